-- Agent ledger. Optional identifiers are NULL when absent.

-- name: AgentInsert :exec
-- AgentInsert stores one agent record as given.
INSERT INTO agents (
    id, state, terminal_reason, provider, provider_session_id,
    checkpoint_session_id, checkpoint_cursor, owner_actor, owner_peer_class,
    owner_write_namespace, owner_visible_namespaces, spawn_fingerprint,
    spawned_at_ms, state_changed_at_ms, idempotency_key, host,
    holder_namespace, holder_instance_id
) VALUES (
    @id, @state, @terminal_reason, @provider, @provider_session_id,
    @checkpoint_session_id, @checkpoint_cursor, @owner_actor, @owner_peer_class,
    @owner_write_namespace, @owner_visible_namespaces, @spawn_fingerprint,
    @spawned_at_ms, @state_changed_at_ms, @idempotency_key, @host,
    @holder_namespace, @holder_instance_id
);

-- name: AgentSpawn :execrows
-- AgentSpawn stores one agent record unless its owner already used its
-- idempotency key (then it inserts nothing).
INSERT INTO agents (
    id, state, terminal_reason, provider, provider_session_id,
    checkpoint_session_id, checkpoint_cursor, owner_actor, owner_peer_class,
    owner_write_namespace, owner_visible_namespaces, spawn_fingerprint,
    spawned_at_ms, state_changed_at_ms, idempotency_key, host,
    holder_namespace, holder_instance_id
) VALUES (
    @id, @state, @terminal_reason, @provider, @provider_session_id,
    @checkpoint_session_id, @checkpoint_cursor, @owner_actor, @owner_peer_class,
    @owner_write_namespace, @owner_visible_namespaces, @spawn_fingerprint,
    @spawned_at_ms, @state_changed_at_ms, @idempotency_key, @host,
    @holder_namespace, @holder_instance_id
)
ON CONFLICT (owner_actor, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING;

-- name: AgentGet :one
-- AgentGet reads one agent by id.
SELECT * FROM agents WHERE id = @id;

-- name: AgentSetState :execrows
-- AgentSetState moves an agent to a state (and reason) at a time, provided it
-- is still in @from_state (compare-and-set in the statement that writes).
UPDATE agents
SET state = @state, terminal_reason = @terminal_reason, state_changed_at_ms = @state_changed_at_ms
WHERE id = @id AND state = @from_state;

-- name: AgentSetCheckpoint :execrows
-- AgentSetCheckpoint records an agent's checkpoint session and cursor.
UPDATE agents
SET checkpoint_session_id = @checkpoint_session_id, checkpoint_cursor = @checkpoint_cursor
WHERE id = @id;

-- name: AgentFindByIdempotencyKey :one
-- AgentFindByIdempotencyKey reads the agent an owner spawned under a key.
SELECT * FROM agents
WHERE owner_actor = @owner_actor AND idempotency_key = @idempotency_key;

-- name: AgentFindLiveByProviderSession :one
-- AgentFindLiveByProviderSession reads the live agent holding a provider session.
SELECT * FROM agents
WHERE provider = @provider AND provider_session_id = @provider_session_id
  AND state <> 'terminal';

-- name: AgentSetHolder :execrows
-- AgentSetHolder moves a live agent to another holder (NULL = none); a terminal one is left as it is.
UPDATE agents
SET holder_namespace = @holder_namespace, holder_instance_id = @holder_instance_id
WHERE id = @id AND state <> 'terminal';

-- name: AgentAbandonHeldBy :execrows
-- AgentAbandonHeldBy ends with reason abandoned, at @at_ms, every live agent held by a [namespace, instance id] pair of a JSON array.
UPDATE agents INDEXED BY agents_live_holder
SET state = 'terminal', terminal_reason = 'abandoned', state_changed_at_ms = CAST(@at_ms AS INTEGER)
WHERE state <> 'terminal' AND holder_namespace IS NOT NULL
  AND (holder_namespace, holder_instance_id) IN (
      SELECT json_extract(j.value, '$[0]'), json_extract(j.value, '$[1]')
      FROM json_each(CAST(@holders AS TEXT)) AS j
  );

-- name: AgentTerminateLive :execrows
-- AgentTerminateLive ends every live agent with reason host_restart.
UPDATE agents
SET state = 'terminal', terminal_reason = 'host_restart', state_changed_at_ms = @at_ms
WHERE state <> 'terminal';

-- name: AgentTerminateLiveOnHost :execrows
-- AgentTerminateLiveOnHost ends the live agents of one host with reason host_restart.
UPDATE agents
SET state = 'terminal', terminal_reason = 'host_restart', state_changed_at_ms = @at_ms
WHERE host = @host AND state <> 'terminal';

-- name: AgentList :many
-- AgentList pages every agent in id order, optionally of one host and one holder.
SELECT * FROM agents
WHERE id > @after_id
  AND (CAST(@host AS TEXT) = '' OR host = @host)
  AND (CAST(@holder_namespace AS TEXT) = '' OR (holder_namespace = @holder_namespace AND holder_instance_id = @holder_instance_id))
ORDER BY id
LIMIT @limit;

-- name: AgentListByState :many
-- AgentListByState pages the agents of one state in id order, optionally of one host and one holder.
SELECT * FROM agents
WHERE state = @state AND id > @after_id
  AND (CAST(@host AS TEXT) = '' OR host = @host)
  AND (CAST(@holder_namespace AS TEXT) = '' OR (holder_namespace = @holder_namespace AND holder_instance_id = @holder_instance_id))
ORDER BY id
LIMIT @limit;

-- name: AgentListByOwner :many
-- AgentListByOwner pages one owner's agents in id order, optionally of one state, host and holder.
SELECT * FROM agents
WHERE owner_actor = @owner_actor AND id > @after_id
  AND (CAST(@state AS TEXT) = '' OR state = @state)
  AND (CAST(@host AS TEXT) = '' OR host = @host)
  AND (CAST(@holder_namespace AS TEXT) = '' OR (holder_namespace = @holder_namespace AND holder_instance_id = @holder_instance_id))
ORDER BY id
LIMIT @limit;

-- name: AgentListVisibleIn :many
-- AgentListVisibleIn pages the agents visible in a namespace in id order, optionally of one state, owner, host and holder.
SELECT a.* FROM agent_visibility AS v
JOIN agents AS a ON a.id = v.agent_id
WHERE v.namespace = @namespace AND v.agent_id > @after_id
  AND (CAST(@state AS TEXT) = '' OR a.state = @state)
  AND (CAST(@owner_actor AS TEXT) = '' OR a.owner_actor = @owner_actor)
  AND (CAST(@host AS TEXT) = '' OR a.host = @host)
  AND (CAST(@holder_namespace AS TEXT) = '' OR (a.holder_namespace = @holder_namespace AND a.holder_instance_id = @holder_instance_id))
ORDER BY v.agent_id
LIMIT @limit;

-- name: AgentListLiveOnHost :many
-- AgentListLiveOnHost pages one host's live agents in id order, optionally of one live state and one holder.
SELECT * FROM agents INDEXED BY agents_live_host
WHERE host = @host AND state <> 'terminal' AND id > @after_id
  AND (CAST(@state AS TEXT) = '' OR state = @state)
  AND (CAST(@holder_namespace AS TEXT) = '' OR (holder_namespace = @holder_namespace AND holder_instance_id = @holder_instance_id))
ORDER BY id
LIMIT @limit;

-- name: AgentListLiveByHolder :many
-- AgentListLiveByHolder pages one holder's live agents in id order (sorting that holder's live agents), optionally of one live state.
SELECT * FROM agents INDEXED BY agents_live_holder
WHERE holder_namespace = @holder_namespace AND holder_instance_id = @holder_instance_id
  AND state <> 'terminal' AND id > @after_id
  AND (CAST(@state AS TEXT) = '' OR state = @state)
ORDER BY id
LIMIT @limit;
