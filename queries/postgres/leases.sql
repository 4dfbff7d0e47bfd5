-- Executions and their attempts (leases).

-- name: ExecutionInsert :exec
-- ExecutionInsert creates one waiting execution and wakes the namespace's workers.
WITH inserted AS (
    INSERT INTO executions (
        id, namespace, lane, priority, payload, required_capabilities, max_attempts, created_at_ms,
        run_at_ms, retry_backoff_ms
    ) VALUES (
        @id, @namespace, @lane, @priority, @payload, @required_capabilities, @max_attempts, @created_at_ms,
        @run_at_ms, @retry_backoff_ms
    )
    RETURNING namespace
)
SELECT roster_wake(inserted.namespace) FROM inserted;

-- name: ExecutionGet :one
-- ExecutionGet reads one execution by id.
SELECT * FROM executions WHERE id = @id;

-- name: ExecutionClaim :many
-- ExecutionClaim gives an alive worker up to cardinality(@lease_ids) of the
-- best claimable executions, in one statement: it seeks the claim index once
-- per lane of the worker, each seek locking its candidates FOR UPDATE SKIP
-- LOCKED (concurrent claimers never take the same execution and never wait
-- for each other's rows), locks the worker row FOR KEY SHARE (a concurrent
-- MarkWorkerDead or sweep, which deletes it, waits, so no lease outlives its
-- worker; heartbeats do not), starts the best under a new attempt and epoch,
-- and records their leases. The worker row is locked only when there is
-- something to claim: a claim that finds nothing locks nothing, writes
-- nothing and takes no transaction id. No row when nothing is claimable or
-- the worker is not alive.
WITH w AS (
    SELECT wk.lanes, wk.capabilities FROM workers AS wk
    WHERE wk.namespace = @namespace AND wk.instance_id = @instance_id
      AND wk.last_heartbeat_ms + wk.ttl_ms > @now::bigint
), candidates AS (
    SELECT c.id, row_number() OVER (ORDER BY c.priority DESC, c.run_at_ms, c.id) AS n
    FROM w
    CROSS JOIN LATERAL unnest(w.lanes) AS l (lane)
    CROSS JOIN LATERAL (
        SELECT e.id, e.priority, e.run_at_ms FROM executions AS e
        WHERE e.namespace = @namespace AND e.lane = l.lane AND e.state = 'waiting'
          AND e.run_at_ms <= @now::bigint
          AND e.required_capabilities <@ w.capabilities
        ORDER BY e.priority DESC, e.run_at_ms, e.id
        LIMIT cardinality(@lease_ids::uuid[])
        FOR UPDATE OF e SKIP LOCKED
    ) AS c
    ORDER BY c.priority DESC, c.run_at_ms, c.id
    LIMIT cardinality(@lease_ids::uuid[])
), holder AS (
    SELECT 1 AS alive FROM workers AS wk
    WHERE wk.namespace = @namespace AND wk.instance_id = @instance_id
      AND wk.last_heartbeat_ms + wk.ttl_ms > @now::bigint
      AND EXISTS (SELECT 1 FROM candidates)
    FOR KEY SHARE OF wk
), started AS (
    UPDATE executions AS x
    SET state = 'running', attempts = x.attempts + 1, epoch = x.epoch + 1
    FROM candidates
    WHERE x.id = candidates.id AND x.state = 'waiting' AND EXISTS (SELECT 1 FROM holder)
    RETURNING x.id, x.attempts, x.epoch, x.lane, x.payload, candidates.n
), leases AS (
    SELECT s.id, s.attempts, s.epoch, s.lane, s.payload, s.n, CAST((@lease_ids::uuid[])[s.n] AS uuid) AS lease_id
    FROM started AS s
), recorded AS (
    INSERT INTO attempts (
        execution_id, attempt_index, epoch, lease_id, namespace, instance_id, claimed_at_ms, expires_at_ms
    )
    SELECT id, attempts, epoch, lease_id, @namespace, @instance_id, @now::bigint, @expires_at_ms::bigint
    FROM leases
)
SELECT id, attempts, epoch, lane, payload, lease_id FROM leases
ORDER BY n;

-- name: AttemptRenew :one
-- AttemptRenew extends the current, unexpired, unrevoked lease of an execution.
UPDATE attempts SET expires_at_ms = @expires_at_ms
WHERE execution_id = @execution_id AND epoch = @epoch AND state = 'running'
  AND expires_at_ms > @now AND revoked_at_ms IS NULL
RETURNING expires_at_ms;

-- name: LeaseComplete :one
-- LeaseComplete ends the current, unexpired, unrevoked lease and its
-- execution as completed with the result, in one statement (fenced in its
-- WHERE); no row when the lease is lost.
WITH ended AS (
    UPDATE attempts AS a SET state = 'completed', ended_at_ms = @now::bigint
    WHERE a.execution_id = @execution_id AND a.epoch = @epoch AND a.state = 'running'
      AND a.expires_at_ms > @now::bigint AND a.revoked_at_ms IS NULL
    RETURNING a.execution_id
)
UPDATE executions AS x SET state = 'completed', result = @result
FROM ended
WHERE x.id = ended.execution_id AND x.state = 'running'
RETURNING x.id;

-- name: LeaseFail :one
-- LeaseFail ends the current, unexpired, unrevoked lease as failed, returns
-- its execution to waiting while attempts remain (waking the namespace's
-- workers; else ends it failed) with the reason, in one statement; no row
-- when the lease is lost.
WITH ended AS (
    UPDATE attempts AS a SET state = 'failed', ended_at_ms = @now::bigint
    WHERE a.execution_id = @execution_id AND a.epoch = @epoch AND a.state = 'running'
      AND a.expires_at_ms > @now::bigint AND a.revoked_at_ms IS NULL
    RETURNING a.execution_id
), failed AS (
    UPDATE executions AS x
    SET state = CASE WHEN x.attempts < x.max_attempts THEN 'waiting' ELSE 'failed' END,
        run_at_ms = CASE WHEN x.attempts < x.max_attempts THEN CAST(@now AS bigint) + CASE
            WHEN x.retry_backoff_ms = 0 THEN 0
            WHEN x.attempts - 1 >= 27 THEN 86400000
            ELSE least(x.retry_backoff_ms << (x.attempts - 1)::int, 86400000) END
          ELSE x.run_at_ms END,
        last_error = @last_error
    FROM ended
    WHERE x.id = ended.execution_id AND x.state = 'running'
    RETURNING x.id, x.state, x.namespace
)
SELECT failed.id FROM failed
WHERE CASE WHEN failed.state = 'waiting' THEN roster_wake(failed.namespace) = 1 ELSE true END;

-- name: LeaseRelease :one
-- LeaseRelease ends the current, unexpired, unrevoked lease without using up
-- its attempt: the attempt is deleted (it never ran), the execution waits
-- again with its RunAt and one attempt fewer, its epoch unchanged (the
-- released lease stays fenced), and the namespace's workers are woken. No
-- row when the lease is lost.
WITH ended AS (
    DELETE FROM attempts AS a
    WHERE a.execution_id = @execution_id AND a.epoch = @epoch AND a.state = 'running'
      AND a.expires_at_ms > @now::bigint AND a.revoked_at_ms IS NULL
    RETURNING a.execution_id
), released AS (
    UPDATE executions AS x SET state = 'waiting', attempts = x.attempts - 1
    FROM ended
    WHERE x.id = ended.execution_id AND x.state = 'running'
    RETURNING x.id, x.namespace
)
SELECT released.id FROM released WHERE roster_wake(released.namespace) = 1;

-- name: AttemptGetByLease :one
-- AttemptGetByLease reads the execution, epoch and state of the attempt
-- holding a lease id (a claim whose outcome was unknown, looked up).
SELECT execution_id, epoch, state FROM attempts WHERE lease_id = @lease_id;

-- name: WorkerNextRunAt :one
-- WorkerNextRunAt reads, for an alive worker, the earliest RunAt after @now
-- among the waiting executions of its lanes (0: none), one seek per lane;
-- no row when the worker is not alive.
SELECT CAST(coalesce((
    SELECT min(n.run_at_ms) FROM unnest(wk.lanes) AS l (lane)
    CROSS JOIN LATERAL (
        SELECT e.run_at_ms FROM executions AS e
        WHERE e.namespace = wk.namespace AND e.lane = l.lane AND e.state = 'waiting'
          AND e.run_at_ms > @now::bigint
        ORDER BY e.run_at_ms
        LIMIT 1
    ) AS n
), 0) AS bigint) AS next_run_at_ms
FROM workers AS wk
WHERE wk.namespace = @namespace AND wk.instance_id = @instance_id
  AND wk.last_heartbeat_ms + wk.ttl_ms > @now::bigint;

-- name: AttemptRevokeHeldBy :exec
-- AttemptRevokeHeldBy ends for good, at @now, every running lease of the
-- given (namespace, instance_id) pairs: the leases expire (and can be
-- reclaimed) and no later call renews, completes or fails them.
UPDATE attempts
SET expires_at_ms = least(expires_at_ms, @now::bigint), revoked_at_ms = @now::bigint
WHERE state = 'running' AND revoked_at_ms IS NULL
  AND (namespace, instance_id) IN (
      SELECT unnest(@namespaces::text[]), unnest(@instance_ids::text[])
  );

-- name: AttemptListExpired :many
-- AttemptListExpired pages the running leases expired by @as_of, by (expiry, execution id).
SELECT execution_id, lease_id, attempt_index, epoch, namespace, instance_id, expires_at_ms
FROM attempts
WHERE state = 'running' AND expires_at_ms <= @as_of
  AND (expires_at_ms, execution_id) > (@after_expires_at_ms::bigint, @after_execution_id::uuid)
ORDER BY expires_at_ms, execution_id
LIMIT @max_rows;

-- name: AttemptListExpiredByNamespace :many
-- AttemptListExpiredByNamespace pages one namespace's running leases expired by @as_of.
SELECT execution_id, lease_id, attempt_index, epoch, namespace, instance_id, expires_at_ms
FROM attempts
WHERE namespace = @namespace AND state = 'running' AND expires_at_ms <= @as_of
  AND (expires_at_ms, execution_id) > (@after_expires_at_ms::bigint, @after_execution_id::uuid)
ORDER BY expires_at_ms, execution_id
LIMIT @max_rows;

-- name: AttemptReclaimBatch :many
-- AttemptReclaimBatch ends up to @batch_size expired running leases, soonest
-- expiry first; leases another reclaimer holds are skipped, not waited for.
UPDATE attempts SET state = 'reclaimed', ended_at_ms = @now::bigint
WHERE state = 'running' AND (execution_id, attempt_index) IN (
    SELECT a.execution_id, a.attempt_index FROM attempts AS a
    WHERE a.state = 'running' AND a.expires_at_ms <= @now::bigint
    ORDER BY a.expires_at_ms, a.execution_id
    LIMIT @batch_size
    FOR UPDATE SKIP LOCKED
)
RETURNING execution_id;

-- name: ExecutionRequeueReclaimed :exec
-- ExecutionRequeueReclaimed returns each execution of @ids to waiting while
-- attempts remain (waking their namespaces' workers), else ends it failed;
-- either way it counts the reclaim.
WITH requeued AS (
    UPDATE executions
    SET state = CASE WHEN attempts < max_attempts THEN 'waiting' ELSE 'failed' END,
        run_at_ms = CASE WHEN attempts < max_attempts THEN CAST(@now AS bigint) + CASE
            WHEN retry_backoff_ms = 0 THEN 0
            WHEN attempts - 1 >= 27 THEN 86400000
            ELSE least(retry_backoff_ms << (attempts - 1)::int, 86400000) END
          ELSE run_at_ms END,
        reclaim_count = reclaim_count + 1,
        last_error = 'lease expired'
    WHERE state = 'running' AND id = ANY(@ids::uuid[])
    RETURNING namespace, state
)
SELECT roster_wake(w.namespace) FROM (SELECT DISTINCT namespace FROM requeued WHERE state = 'waiting') AS w;

-- name: ExecutionGetState :one
-- ExecutionGetState reads the state of one execution.
SELECT state FROM executions WHERE id = @id;

-- name: ExecutionCancel :one
-- ExecutionCancel ends a waiting or running execution as cancelled with the
-- reason, and its running attempt with it, in one statement; no row when the
-- execution is absent or already ended.
WITH cancelled AS (
    UPDATE executions AS x SET state = 'cancelled', last_error = @reason
    WHERE x.id = @id AND x.state IN ('waiting', 'running')
    RETURNING x.id
), ended AS (
    UPDATE attempts AS a SET state = 'cancelled', ended_at_ms = @now::bigint
    FROM cancelled
    WHERE a.execution_id = cancelled.id AND a.state = 'running'
)
SELECT cancelled.id FROM cancelled;

-- name: ExecutionList :many
-- ExecutionList pages every execution in id order.
SELECT * FROM executions
WHERE id > @after_id
ORDER BY id
LIMIT @max_rows;

-- name: ExecutionListByNamespace :many
-- ExecutionListByNamespace pages one namespace's executions in id order.
SELECT * FROM executions
WHERE namespace = @namespace AND id > @after_id
ORDER BY id
LIMIT @max_rows;

-- name: ExecutionListByLane :many
-- ExecutionListByLane pages one lane's executions, across namespaces, in id order.
SELECT * FROM executions
WHERE lane = @lane AND id > @after_id
ORDER BY id
LIMIT @max_rows;

-- name: ExecutionListByState :many
-- ExecutionListByState pages the executions of one state, across namespaces, in id order.
SELECT * FROM executions
WHERE state = @state AND id > @after_id
ORDER BY id
LIMIT @max_rows;

-- name: ExecutionListByNamespaceLane :many
-- ExecutionListByNamespaceLane pages one lane of one namespace in id order.
SELECT * FROM executions
WHERE namespace = @namespace AND lane = @lane AND id > @after_id
ORDER BY id
LIMIT @max_rows;

-- name: ExecutionListByNamespaceState :many
-- ExecutionListByNamespaceState pages one namespace's executions of one state in id order.
SELECT * FROM executions
WHERE namespace = @namespace AND state = @state AND id > @after_id
ORDER BY id
LIMIT @max_rows;

-- name: ExecutionListByLaneState :many
-- ExecutionListByLaneState pages one lane's executions of one state, across namespaces, in id order.
SELECT * FROM executions
WHERE lane = @lane AND state = @state AND id > @after_id
ORDER BY id
LIMIT @max_rows;

-- name: ExecutionListByNamespaceLaneState :many
-- ExecutionListByNamespaceLaneState pages one lane of one namespace, of one state, in id order.
SELECT * FROM executions
WHERE namespace = @namespace AND lane = @lane AND state = @state AND id > @after_id
ORDER BY id
LIMIT @max_rows;

-- name: LeaseCompleteMany :many
-- LeaseCompleteMany completes many leases in one statement, each fenced as
-- LeaseComplete is (current epoch, running, unexpired, unrevoked) and given
-- the result of its own (execution, epoch), and returns the leases it
-- completed; the others were lost.
WITH input AS (
    SELECT unnest(@execution_ids::uuid[]) AS execution_id,
           unnest(@epochs::bigint[]) AS epoch,
           unnest(@results::bytea[]) AS result
), ended AS (
    UPDATE attempts AS a SET state = 'completed', ended_at_ms = @now::bigint
    FROM input
    WHERE a.execution_id = input.execution_id AND a.epoch = input.epoch AND a.state = 'running'
      AND a.expires_at_ms > @now::bigint AND a.revoked_at_ms IS NULL
    RETURNING a.execution_id, a.epoch
)
UPDATE executions AS x SET state = 'completed', result = input.result
FROM ended
JOIN input ON input.execution_id = ended.execution_id AND input.epoch = ended.epoch
WHERE x.id = ended.execution_id AND x.state = 'running'
RETURNING x.id, ended.epoch;
