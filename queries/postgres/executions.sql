-- Executions: create, read, list, cancel, and prune finished history.
-- Claims and leases are in leases.sql.
--
-- Lock order (README "Locks in one order"). A transaction that takes locks of several kinds
-- takes them in this order, so that no two ever wait for each other in a
-- cycle:
--   1. worker locks: a transaction advisory lock per worker (two keys:
--      hashtext of the schema and namespace, hashtext(instance_id); the
--      schema is in the key so that roster's schemas in one database never
--      wait for each other's workers), taken shared by a
--      settle for the workers holding its leases (WorkerLockShared or
--      LeaseLockHolders, first in its pipeline), exclusively by
--      MarkWorkerDead (WorkerLock, in WorkerDelete) and by the
--      sweep (WorkerSweepBatch, which skips a worker whose lock it cannot
--      take at once);
--   2. workers rows: MarkWorkerDead's and the sweep's DELETE, a claim's
--      FOR KEY SHARE;
--   3. executions: complete, fail, release, renew, cancel, revoke
--      (LeaseRevokeHeldBy: only the running executions of workers whose
--      worker locks the transaction holds), reclaim and promotion (FOR
--      UPDATE SKIP LOCKED: they never wait);
--   4. attempts: the history rows a fail, a cancel or a reclaim inserts after
--      locking their execution, and pruning deletes (of finished executions,
--      which nothing else locks);
--   5. leaders: the maintenance lease row, share-locked last by each write
--      of a leader's maintenance (LeaderHolds, its fence; fleet.sql) and
--      updated alone by a takeover or renewal (LeaderTake).
-- Unique keys: a create of keyed executions first takes, in lock order, a
-- transaction advisory lock per (namespace, key) (ExecutionKeyLock, the
-- one-key form, apart from the worker locks) before it reads or writes
-- anything, and nothing takes one while holding another lock.
-- agent_state_counts: the agents' count trigger locks the two rows of a
-- transition in state order before it updates them (migration 11).
-- worker_events is only appended to and pruned: nothing waits on its rows.
-- Lane claim locks: a claim of lanes with limits or groups (flow.sql) takes a
-- transaction advisory lock of one bigint key per lane, in lane order, before
-- it reads or writes anything else; only claims take them, and a claim never
-- waits for a row a settle holds (it locks waiting executions, a settle
-- running ones), so a settle that claims may take them after its outcomes.
-- A claim (ExecutionClaim) locks the waiting executions it takes before its
-- worker's row, against the order, but it never waits: both locks are SKIP
-- LOCKED (a revoke can still wait for a claim, when the execution it saw
-- running was reclaimed and is being claimed again: the claim ends without
-- waiting for anything). Agents are apart:
-- one agent row per statement, then the agent_state_counts rows of its old
-- and its new state (the trigger of migration 7, in that order); the
-- statements that end many agents (the boot scans, and AgentAbandonHeldBy,
-- which MarkWorkerDead and the sweep run last, after their executions and
-- before the leader's row) take those locks row by row, so two of them, or
-- one beside a single agent's change, can deadlock on the counts rows: the
-- transaction is then retried.

-- name: ExecutionInsert :exec
-- ExecutionInsert creates one waiting execution (ready when its RunAt is not
-- after its creation time, else scheduled until a claim finds it due) and
-- wakes the namespace's workers.
WITH inserted AS (
    INSERT INTO executions (
        id, namespace, lane, priority, payload, required_capabilities, max_attempts, created_at_ms,
        run_at_ms, retry_backoff_ms, ready, group_key, metadata, timeout_ms
    ) VALUES (
        @id, @namespace, @lane, @priority, @payload, @required_capabilities, @max_attempts, @created_at_ms,
        @run_at_ms, @retry_backoff_ms, @ready, @group_key, @metadata, @timeout_ms
    )
    RETURNING namespace
)
SELECT roster_wake(inserted.namespace) FROM inserted;

-- name: ExecutionInsertMany :exec
-- ExecutionInsertMany creates many waiting executions in one statement (the
-- i-th element of each array is the i-th execution's; its capabilities are
-- joined by chr(31), which no identifier holds; its metadata '' is none) and
-- wakes each namespace's workers once.
WITH input AS (
    SELECT unnest(@ids::uuid[]) AS id, unnest(@namespaces::text[]) AS namespace,
           unnest(@lanes::text[]) AS lane, unnest(@priorities::bigint[]) AS priority,
           unnest(@payloads::bytea[]) AS payload, unnest(@capabilities::text[]) AS caps,
           unnest(@max_attempts::bigint[]) AS max_attempts, unnest(@run_at_ms::bigint[]) AS run_at_ms,
           unnest(@retry_backoff_ms::bigint[]) AS retry_backoff_ms, unnest(@ready::boolean[]) AS ready,
           unnest(@created_at_ms::bigint[]) AS created_at_ms, unnest(@metadata::text[]) AS metadata,
           unnest(@group_keys::text[]) AS group_key, unnest(@timeouts_ms::bigint[]) AS timeout_ms
), inserted AS (
    INSERT INTO executions (
        id, namespace, lane, priority, payload, required_capabilities, max_attempts, created_at_ms,
        run_at_ms, retry_backoff_ms, ready, group_key, metadata, timeout_ms
    )
    SELECT i.id, i.namespace, i.lane, i.priority, i.payload,
           CASE WHEN i.caps = '' THEN '{}'::text[] ELSE string_to_array(i.caps, chr(31)) END,
           i.max_attempts, i.created_at_ms, i.run_at_ms, i.retry_backoff_ms, i.ready, i.group_key, nullif(i.metadata, ''), i.timeout_ms
    FROM input AS i
    RETURNING namespace
)
SELECT roster_wake(n.namespace) FROM (SELECT DISTINCT namespace FROM inserted) AS n;

-- name: ExecutionGet :one
-- ExecutionGet reads one execution by id.
SELECT * FROM executions WHERE id = @id;

-- name: ExecutionGetState :one
-- ExecutionGetState reads the state of one execution.
SELECT state FROM executions WHERE id = @id;

-- name: ExecutionCancel :one
-- ExecutionCancel ends a waiting or running execution as cancelled with the
-- reason, and records a running one's attempt as cancelled (with the
-- reason; lost, ended then, when MarkWorkerDead, a sweep or its holder's
-- lapse revoked its lease before), in one statement; no row when the
-- execution is absent or already ended.
WITH current AS (
    SELECT x.id, x.state FROM executions AS x
    WHERE x.id = @id AND x.state IN ('waiting', 'running')
    FOR UPDATE
), cancelled AS (
    UPDATE executions AS x SET state = 'cancelled', last_error = @reason, finished_at_ms = @now::bigint
    FROM current
    WHERE x.id = current.id
    RETURNING x.id, x.attempts, x.epoch, x.lease_id, x.namespace, x.lane, x.holder, x.claimed_at_ms, x.expires_at_ms,
              x.revoked_at_ms, x.deadline_ms, current.state AS was
), recorded AS (
    INSERT INTO attempts (
        execution_id, attempt_index, epoch, lease_id, namespace, instance_id, state,
        claimed_at_ms, expires_at_ms, ended_at_ms, revoked_at_ms, error
    )
    SELECT c.id, c.attempts, c.epoch, c.lease_id, c.namespace, c.holder,
           CASE WHEN c.revoked_at_ms IS NULL THEN 'cancelled' ELSE 'reclaimed' END,
           c.claimed_at_ms, c.expires_at_ms,
           CASE WHEN c.revoked_at_ms IS NULL THEN @now::bigint
                ELSE greatest(c.claimed_at_ms, least(c.expires_at_ms, @now::bigint)) END,
           c.revoked_at_ms,
           CASE WHEN c.revoked_at_ms IS NULL THEN @reason::text
                WHEN c.deadline_ms IS NOT NULL AND c.expires_at_ms >= c.deadline_ms THEN 'timed out'
                ELSE 'lease expired' END
    FROM cancelled AS c
    WHERE c.was = 'running'
)
SELECT cancelled.id FROM cancelled
-- A running execution's holder hears its lease ended; one of a capped lane
-- frees room: the namespace's workers are woken.
WHERE CASE WHEN cancelled.was = 'running' THEN roster_lost(cancelled.namespace) = 1 ELSE true END
  AND CASE WHEN cancelled.was = 'running' AND EXISTS (
    SELECT 1 FROM lane_limits AS m
    WHERE m.namespace = cancelled.namespace AND m.lane = cancelled.lane AND (m.max_running > 0 OR m.max_running_per_group > 0)
) THEN roster_wake(cancelled.namespace) = 1 ELSE true END;

-- name: ExecutionPruneBatch :execrows
-- ExecutionPruneBatch deletes up to @batch_size executions that finished
-- before @before, oldest first, with their attempts. The ids are collected
-- into an array first, so that every plan (a generic one too) deletes them
-- by primary key instead of hash-joining them against the whole table.
WITH pruned AS (
    DELETE FROM executions
    WHERE id = ANY (ARRAY(
        SELECT f.id FROM executions AS f
        WHERE f.finished_at_ms < @before::bigint
        ORDER BY f.finished_at_ms
        LIMIT @batch_size
        FOR UPDATE SKIP LOCKED
    ))
    RETURNING id
), history AS (
    DELETE FROM attempts AS a WHERE a.execution_id = ANY (ARRAY(SELECT pruned.id FROM pruned))
)
SELECT pruned.id FROM pruned;

-- name: ExecutionList :many
-- ExecutionList pages every execution in id order.
SELECT * FROM executions
WHERE id > @after_id
ORDER BY id
LIMIT @max_rows;

-- name: ExecutionListByNamespace :many
-- ExecutionListByNamespace pages one namespace's executions in id order,
-- optionally of one lane and one state.
SELECT * FROM executions
WHERE namespace = @namespace AND id > @after_id
  AND (@lane::text = '' OR lane = @lane) AND (@state::text = '' OR state = @state)
ORDER BY id
LIMIT @max_rows;

-- name: ExecutionListByState :many
-- ExecutionListByState pages the executions of one state but running, across
-- namespaces, in id order, optionally of one lane.
SELECT * FROM executions
WHERE state = @state AND state <> 'running' AND id > @after_id
  AND (@lane::text = '' OR lane = @lane)
ORDER BY id
LIMIT @max_rows;

-- name: ExecutionListRunning :many
-- ExecutionListRunning pages the running executions, across namespaces, in
-- id order, optionally of one lane: from the index of running leases (live
-- rows only), sorted.
SELECT * FROM executions
WHERE state = 'running' AND id > @after_id
  AND (@lane::text = '' OR lane = @lane)
ORDER BY id
LIMIT @max_rows;

-- name: ExecutionListByLane :many
-- ExecutionListByLane pages one lane's executions, across namespaces, in id
-- order.
SELECT * FROM executions
WHERE lane = @lane AND id > @after_id
ORDER BY id
LIMIT @max_rows;

-- name: ExecutionFinishedPerMinute :many
-- ExecutionFinishedPerMinute counts the executions completed or failed at
-- or after @since, per namespace, lane, minute (Unix ms / 60000) and state,
-- from the index of finished executions: its cost follows the window, not
-- the history.
SELECT namespace, lane, CAST(finished_at_ms / 60000 AS bigint) AS minute, state, count(*) AS n
FROM executions
WHERE finished_at_ms >= @since::bigint AND finished_at_ms IS NOT NULL AND state IN ('completed', 'failed')
GROUP BY namespace, lane, minute, state
ORDER BY namespace, lane, minute, state;
