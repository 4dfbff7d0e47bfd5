-- Executions and their attempts (leases).

-- name: ExecutionInsert :exec
-- ExecutionInsert creates one waiting execution.
INSERT INTO executions (
    id, namespace, lane, priority, payload, required_capabilities, max_attempts, created_at_ms
) VALUES (
    @id, @namespace, @lane, @priority, @payload, @required_capabilities, @max_attempts, @created_at_ms
);

-- name: ExecutionGet :one
-- ExecutionGet reads one execution by id.
SELECT * FROM executions WHERE id = @id;

-- name: ExecutionClaim :many
-- ExecutionClaim moves up to @max_rows of the best claimable executions to
-- running under a new attempt and epoch, in one statement: one index seek per
-- lane of the worker, each locking its candidates FOR UPDATE SKIP LOCKED, so
-- that concurrent claimers never take the same execution and never wait for
-- each other's rows.
WITH candidates AS (
    SELECT c.id, c.priority, c.created_at_ms
    FROM unnest(@lanes::text[]) AS l (lane)
    CROSS JOIN LATERAL (
        SELECT e.id, e.priority, e.created_at_ms FROM executions AS e
        WHERE e.namespace = @namespace AND e.lane = l.lane AND e.state = 'waiting'
          AND e.required_capabilities <@ @capabilities::text[]
        ORDER BY e.priority DESC, e.created_at_ms, e.id
        LIMIT @max_rows
        FOR UPDATE SKIP LOCKED
    ) AS c
    ORDER BY c.priority DESC, c.created_at_ms, c.id
    LIMIT @max_rows
)
UPDATE executions AS x
SET state = 'running', attempts = x.attempts + 1, epoch = x.epoch + 1
FROM candidates
WHERE x.id = candidates.id AND x.state = 'waiting'
RETURNING x.id, x.attempts, x.epoch, x.namespace, x.lane, x.payload, x.priority, x.created_at_ms;

-- name: AttemptInsertMany :exec
-- AttemptInsertMany records the leases of new attempts, one per array element.
INSERT INTO attempts (
    execution_id, attempt_index, epoch, lease_id, namespace, instance_id, claimed_at_ms, expires_at_ms
)
SELECT unnest(@execution_ids::uuid[]), unnest(@attempt_indexes::bigint[]), unnest(@epochs::bigint[]),
       unnest(@lease_ids::uuid[]), @namespace::text, @instance_id::text, @claimed_at_ms::bigint, @expires_at_ms::bigint;

-- name: AttemptRenew :one
-- AttemptRenew extends the current, unexpired, unrevoked lease of an execution.
UPDATE attempts SET expires_at_ms = @expires_at_ms
WHERE execution_id = @execution_id AND epoch = @epoch AND state = 'running'
  AND expires_at_ms > @now AND revoked_at_ms IS NULL
RETURNING expires_at_ms;

-- name: AttemptEnd :one
-- AttemptEnd closes the current, unexpired, unrevoked lease of an execution as completed or failed.
UPDATE attempts SET state = @state, ended_at_ms = @now::bigint
WHERE execution_id = @execution_id AND epoch = @epoch AND state = 'running'
  AND expires_at_ms > @now AND revoked_at_ms IS NULL
RETURNING attempt_index;

-- name: ExecutionComplete :exec
-- ExecutionComplete ends a running execution as completed with its result.
UPDATE executions SET state = 'completed', result = @result
WHERE id = @id AND state = 'running';

-- name: ExecutionFail :exec
-- ExecutionFail returns a running execution to waiting while attempts remain, else ends it failed.
UPDATE executions
SET state = CASE WHEN attempts < max_attempts THEN 'waiting' ELSE 'failed' END,
    last_error = @last_error
WHERE id = @id AND state = 'running';

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
-- attempts remain, else ends it failed; either way it counts the reclaim.
UPDATE executions
SET state = CASE WHEN attempts < max_attempts THEN 'waiting' ELSE 'failed' END,
    reclaim_count = reclaim_count + 1,
    last_error = 'lease expired'
WHERE state = 'running' AND id = ANY(@ids::uuid[]);
