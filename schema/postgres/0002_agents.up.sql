-- Agent ledger: one row per long-running agent process. The schema itself
-- enforces the ledger's invariants, so they hold for SQL written outside roster:
--   * a terminal agent has a known reason, a live one has none;
--   * at most one live agent holds a (provider, provider session) pair;
--   * (owner actor, idempotency key) is unique where a key is set.
-- Optional identifiers are NULL when absent, never ''.

CREATE TABLE agents (
    id                       TEXT   NOT NULL CHECK (id <> ''),
    state                    TEXT   NOT NULL CHECK (state IN ('spawned', 'running', 'suspended', 'terminal')),
    terminal_reason          TEXT   CHECK (terminal_reason IN ('completed', 'failed', 'killed', 'abandoned', 'host_restart')),
    provider                 TEXT   NOT NULL CHECK (provider <> ''),
    provider_session_id      TEXT   CHECK (provider_session_id <> ''),
    checkpoint_session_id    TEXT   CHECK (checkpoint_session_id <> ''),
    checkpoint_cursor        BIGINT NOT NULL DEFAULT 0,
    owner_actor              TEXT   NOT NULL CHECK (owner_actor <> ''),
    owner_peer_class         TEXT   NOT NULL CHECK (owner_peer_class <> ''),
    owner_write_namespace    TEXT   NOT NULL CHECK (owner_write_namespace <> ''),
    -- Namespaces, in the order given.
    owner_visible_namespaces TEXT[] NOT NULL DEFAULT '{}',
    spawn_fingerprint        TEXT   NOT NULL CHECK (spawn_fingerprint <> ''),
    spawned_at_ms            BIGINT NOT NULL,
    state_changed_at_ms      BIGINT NOT NULL,
    idempotency_key          TEXT   CHECK (idempotency_key <> ''),
    CONSTRAINT agents_pkey PRIMARY KEY (id),
    CONSTRAINT agents_reason CHECK ((state = 'terminal') = (terminal_reason IS NOT NULL))
);

-- A live agent holds its provider session exclusively; a terminal one frees it.
CREATE UNIQUE INDEX agents_live_provider_session ON agents (provider, provider_session_id)
    WHERE state <> 'terminal' AND provider_session_id IS NOT NULL;

-- Spawn idempotency: one agent per (owner actor, key).
CREATE UNIQUE INDEX agents_idempotency ON agents (owner_actor, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- The host-restart scan visits live agents only.
CREATE INDEX agents_live ON agents (id) WHERE state <> 'terminal';

-- List filters, each in agent id order.
CREATE INDEX agents_state ON agents (state, id);
CREATE INDEX agents_owner ON agents (owner_actor, id);

-- Every namespace an agent is visible in (its write namespace and each visible
-- namespace), kept by a trigger so the VisibleIn filter is an index seek.
CREATE TABLE agent_visibility (
    namespace TEXT NOT NULL,
    agent_id  TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    PRIMARY KEY (namespace, agent_id)
);

CREATE INDEX agent_visibility_agent ON agent_visibility (agent_id);

CREATE FUNCTION agents_visibility_sync() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM agent_visibility WHERE agent_id = NEW.id;
    INSERT INTO agent_visibility (namespace, agent_id)
    SELECT DISTINCT ns, NEW.id
    FROM unnest(array_prepend(NEW.owner_write_namespace, NEW.owner_visible_namespaces)) AS ns;
    RETURN NULL;
END;
$$;

CREATE TRIGGER agents_visibility_insert AFTER INSERT ON agents
    FOR EACH ROW EXECUTE FUNCTION agents_visibility_sync();

CREATE TRIGGER agents_visibility_update
    AFTER UPDATE OF owner_write_namespace, owner_visible_namespaces ON agents
    FOR EACH ROW EXECUTE FUNCTION agents_visibility_sync();
