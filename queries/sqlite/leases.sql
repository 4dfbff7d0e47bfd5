-- Executions and their attempts (leases).

-- name: ExecutionInsert :exec
-- ExecutionInsert creates one waiting execution.
INSERT INTO executions (
    id, namespace, lane, priority, payload, required_capabilities, max_attempts, created_at_ms,
    run_at_ms, retry_backoff_ms
) VALUES (
    @id, @namespace, @lane, @priority, @payload, @required_capabilities, @max_attempts, @created_at_ms,
    @run_at_ms, @retry_backoff_ms
);

-- name: ExecutionGet :one
-- ExecutionGet reads one execution by id.
SELECT * FROM executions WHERE id = @id;

-- name: ExecutionTopPriority :one
-- ExecutionTopPriority finds the highest priority at most @at_most among a
-- lane's waiting executions: one step of the claim's loose index scan.
SELECT e.priority FROM executions AS e
WHERE e.namespace = @namespace AND e.lane = @lane AND e.state = 'waiting'
  AND e.priority <= @at_most
ORDER BY e.priority DESC
LIMIT 1;

-- name: ExecutionPickInLane :many
-- ExecutionPickInLane finds the @limit best claimable executions of one lane
-- at one priority (waiting, RunAt <= @now; earliest RunAt, then lowest id)
-- whose required capabilities are all in @capabilities (a JSON array).
SELECT e.id, e.priority, e.run_at_ms FROM executions AS e
WHERE e.namespace = @namespace AND e.lane = @lane AND e.state = 'waiting'
  AND e.priority = @priority AND e.run_at_ms <= @now
  AND NOT EXISTS (
      SELECT 1 FROM json_each(e.required_capabilities) AS r
      WHERE r.value NOT IN (SELECT c.value FROM json_each(CAST(@capabilities AS TEXT)) AS c)
  )
ORDER BY e.run_at_ms, e.id
LIMIT @limit;

-- name: ExecutionStart :one
-- ExecutionStart moves a waiting execution to running under a new attempt and epoch.
UPDATE executions
SET state = 'running', attempts = attempts + 1, epoch = epoch + 1
WHERE id = @id AND state = 'waiting'
RETURNING attempts, epoch, namespace, lane, payload;

-- name: AttemptInsert :exec
-- AttemptInsert records the lease of a new attempt.
INSERT INTO attempts (
    execution_id, attempt_index, epoch, lease_id, namespace, instance_id, claimed_at_ms, expires_at_ms
) VALUES (
    @execution_id, @attempt_index, @epoch, @lease_id, @namespace, @instance_id, @claimed_at_ms, @expires_at_ms
);

-- name: AttemptRenew :one
-- AttemptRenew extends the current, unexpired lease of an execution.
UPDATE attempts SET expires_at_ms = @expires_at_ms
WHERE execution_id = @execution_id AND epoch = @epoch AND state = 'running'
  AND expires_at_ms > @now AND revoked_at_ms IS NULL
RETURNING expires_at_ms;

-- name: AttemptEnd :one
-- AttemptEnd closes the current, unexpired lease of an execution as completed or failed.
UPDATE attempts SET state = @state, ended_at_ms = CAST(@now AS INTEGER)
WHERE execution_id = @execution_id AND epoch = @epoch AND state = 'running'
  AND expires_at_ms > @now AND revoked_at_ms IS NULL
RETURNING attempt_index;

-- name: ExecutionComplete :exec
-- ExecutionComplete ends a running execution as completed with its result.
UPDATE executions SET state = 'completed', result = @result
WHERE id = @id AND state = 'running';

-- name: ExecutionGetState :one
-- ExecutionGetState reads the state of one execution.
SELECT state FROM executions WHERE id = @id;

-- name: ExecutionFail :exec
-- ExecutionFail returns a running execution to waiting while attempts remain
-- (claimable from now + min(backoff x 2^(attempts-1), 24 h)), else ends it failed.
UPDATE executions
SET state = CASE WHEN attempts < max_attempts THEN 'waiting' ELSE 'failed' END,
    run_at_ms = CASE WHEN attempts < max_attempts THEN CAST(@now AS INTEGER) + CASE
        WHEN retry_backoff_ms = 0 THEN 0
        WHEN attempts - 1 >= 27 THEN 86400000
        ELSE min(retry_backoff_ms << (attempts - 1), 86400000) END
      ELSE run_at_ms END,
    last_error = @last_error
WHERE id = @id AND state = 'running';

-- name: AttemptDeleteCurrent :one
-- AttemptDeleteCurrent deletes the current, unexpired, unrevoked attempt of an
-- execution whose lease is released (it never ran).
DELETE FROM attempts
WHERE execution_id = @execution_id AND epoch = @epoch AND state = 'running'
  AND expires_at_ms > @now AND revoked_at_ms IS NULL
RETURNING attempt_index;

-- name: AttemptGetByLease :one
-- AttemptGetByLease reads the execution, epoch and state of the attempt
-- holding a lease id (a claim whose outcome was unknown, looked up).
SELECT execution_id, epoch, state FROM attempts WHERE lease_id = @lease_id;

-- name: ExecutionRelease :exec
-- ExecutionRelease returns a running execution to waiting with one attempt
-- fewer, its RunAt and epoch unchanged.
UPDATE executions SET state = 'waiting', attempts = attempts - 1
WHERE id = @id AND state = 'running';

-- name: ExecutionNextRunAt :one
-- ExecutionNextRunAt finds the earliest RunAt after @now among one lane's
-- waiting executions (0: none), from the index of live executions.
SELECT CAST(coalesce(min(e.run_at_ms), 0) AS INTEGER) AS next_run_at_ms FROM executions AS e
WHERE e.namespace = @namespace AND e.lane = @lane
  AND e.state IN ('waiting', 'running') AND e.state = 'waiting'
  AND e.run_at_ms > @now;

-- name: AttemptRevokeHeldBy :exec
-- AttemptRevokeHeldBy ends for good, at @now, every running lease of each
-- [namespace, instance_id] pair of a JSON array: the leases expire (and can be
-- reclaimed) and no later call renews, completes or fails them.
UPDATE attempts
SET expires_at_ms = min(expires_at_ms, CAST(@now AS INTEGER)), revoked_at_ms = CAST(@now AS INTEGER)
WHERE state = 'running' AND revoked_at_ms IS NULL
  AND (namespace, instance_id) IN (
      SELECT json_extract(j.value, '$[0]'), json_extract(j.value, '$[1]')
      FROM json_each(CAST(@instances AS TEXT)) AS j
  );

-- name: AttemptListExpired :many
-- AttemptListExpired pages the running leases expired by @as_of, by (expiry, execution id).
SELECT execution_id, lease_id, attempt_index, epoch, namespace, instance_id, expires_at_ms
FROM attempts
WHERE state = 'running' AND expires_at_ms <= @as_of
  AND (expires_at_ms, execution_id) > (CAST(@after_expires_at_ms AS INTEGER), CAST(@after_execution_id AS TEXT))
ORDER BY expires_at_ms, execution_id
LIMIT @limit;

-- name: AttemptListExpiredByNamespace :many
-- AttemptListExpiredByNamespace pages one namespace's running leases expired by @as_of.
SELECT execution_id, lease_id, attempt_index, epoch, namespace, instance_id, expires_at_ms
FROM attempts
WHERE namespace = @namespace AND state = 'running' AND expires_at_ms <= @as_of
  AND (expires_at_ms, execution_id) > (CAST(@after_expires_at_ms AS INTEGER), CAST(@after_execution_id AS TEXT))
ORDER BY expires_at_ms, execution_id
LIMIT @limit;

-- name: AttemptReclaimBatch :many
-- AttemptReclaimBatch ends up to @batch_size expired running leases, soonest expiry first.
UPDATE attempts SET state = 'reclaimed', ended_at_ms = CAST(@now AS INTEGER)
WHERE state = 'running' AND (execution_id, attempt_index) IN (
    SELECT a.execution_id, a.attempt_index FROM attempts AS a
    WHERE a.state = 'running' AND a.expires_at_ms <= @now
    ORDER BY a.expires_at_ms, a.execution_id
    LIMIT @batch_size
)
RETURNING execution_id;

-- name: ExecutionRequeueReclaimed :exec
-- ExecutionRequeueReclaimed returns each execution of a JSON array of ids to
-- waiting while attempts remain (claimable from now + the backoff), else ends
-- it failed; either way it counts the reclaim.
UPDATE executions
SET state = CASE WHEN attempts < max_attempts THEN 'waiting' ELSE 'failed' END,
    run_at_ms = CASE WHEN attempts < max_attempts THEN CAST(@now AS INTEGER) + CASE
        WHEN retry_backoff_ms = 0 THEN 0
        WHEN attempts - 1 >= 27 THEN 86400000
        ELSE min(retry_backoff_ms << (attempts - 1), 86400000) END
      ELSE run_at_ms END,
    reclaim_count = reclaim_count + 1,
    last_error = 'lease expired'
WHERE state = 'running'
  AND id IN (SELECT j.value FROM json_each(CAST(@ids AS TEXT)) AS j);

-- name: AttemptCancelRunning :exec
-- AttemptCancelRunning ends the running attempt of an execution, if any, as cancelled.
UPDATE attempts SET state = 'cancelled', ended_at_ms = CAST(@now AS INTEGER)
WHERE execution_id = @execution_id AND state = 'running';

-- name: ExecutionCancel :one
-- ExecutionCancel ends a waiting or running execution as cancelled with the reason.
UPDATE executions SET state = 'cancelled', last_error = @reason
WHERE id = @id AND state IN ('waiting', 'running')
RETURNING id;

-- name: ExecutionList :many
-- ExecutionList pages every execution in id order.
SELECT * FROM executions
WHERE id > @after_id
ORDER BY id
LIMIT @limit;

-- name: ExecutionListByNamespace :many
-- ExecutionListByNamespace pages one namespace's executions in id order.
SELECT * FROM executions
WHERE namespace = @namespace AND id > @after_id
ORDER BY id
LIMIT @limit;

-- name: ExecutionListByLane :many
-- ExecutionListByLane pages one lane's executions, across namespaces, in id order.
SELECT * FROM executions
WHERE lane = @lane AND id > @after_id
ORDER BY id
LIMIT @limit;

-- name: ExecutionListByState :many
-- ExecutionListByState pages the executions of one state, across namespaces, in id order.
SELECT * FROM executions
WHERE state = @state AND id > @after_id
ORDER BY id
LIMIT @limit;

-- name: ExecutionListByNamespaceLane :many
-- ExecutionListByNamespaceLane pages one lane of one namespace in id order.
SELECT * FROM executions
WHERE namespace = @namespace AND lane = @lane AND id > @after_id
ORDER BY id
LIMIT @limit;

-- name: ExecutionListByNamespaceState :many
-- ExecutionListByNamespaceState pages one namespace's executions of one state in id order.
SELECT * FROM executions
WHERE namespace = @namespace AND state = @state AND id > @after_id
ORDER BY id
LIMIT @limit;

-- name: ExecutionListByLaneState :many
-- ExecutionListByLaneState pages one lane's executions of one state, across namespaces, in id order.
SELECT * FROM executions
WHERE lane = @lane AND state = @state AND id > @after_id
ORDER BY id
LIMIT @limit;

-- name: ExecutionListByNamespaceLaneState :many
-- ExecutionListByNamespaceLaneState pages one lane of one namespace, of one state, in id order.
SELECT * FROM executions
WHERE namespace = @namespace AND lane = @lane AND state = @state AND id > @after_id
ORDER BY id
LIMIT @limit;
