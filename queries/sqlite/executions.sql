-- Executions: create, read, list, cancel, and prune finished history.
-- Claims and leases are in leases.sql.

-- name: ExecutionInsert :exec
-- ExecutionInsert creates one waiting execution (ready when its RunAt is not
-- after its creation time, else scheduled until a claim finds it due).
INSERT INTO executions (
    id, namespace, lane, priority, payload, required_capabilities, max_attempts, created_at_ms,
    run_at_ms, retry_backoff_ms, ready, group_key, metadata, timeout_ms
) VALUES (
    @id, @namespace, @lane, @priority, @payload, @required_capabilities, @max_attempts, @created_at_ms,
    @run_at_ms, @retry_backoff_ms, @ready, @group_key, @metadata, @timeout_ms
);

-- name: ExecutionGet :one
-- ExecutionGet reads one execution by id.
SELECT * FROM executions WHERE id = @id;

-- name: ExecutionGetState :one
-- ExecutionGetState reads the state of one execution.
SELECT state FROM executions WHERE id = @id;

-- name: ExecutionCancel :one
-- ExecutionCancel ends a waiting or running execution as cancelled with the
-- reason (a running one's attempt is recorded first: AttemptInsertCancelled);
-- no row when the execution is absent or already ended.
UPDATE executions SET state = 'cancelled', last_error = @reason, finished_at_ms = CAST(@now AS INTEGER)
WHERE id = @id AND state IN ('waiting', 'running')
RETURNING id;

-- name: ExecutionPruneBatch :execrows
-- ExecutionPruneBatch deletes up to @batch_size executions that finished
-- before @before (their attempts go with them), oldest first.
DELETE FROM executions
WHERE id IN (
    SELECT f.id FROM executions AS f
    WHERE f.finished_at_ms < CAST(@before AS INTEGER)
    ORDER BY f.finished_at_ms
    LIMIT @batch_size
);

-- name: ExecutionList :many
-- ExecutionList pages every execution in id order.
SELECT * FROM executions
WHERE id > @after_id
ORDER BY id
LIMIT @limit;

-- name: ExecutionListByNamespace :many
-- ExecutionListByNamespace pages one namespace's executions in id order,
-- optionally of one lane and one state.
SELECT * FROM executions
WHERE namespace = @namespace AND id > @after_id
  AND (CAST(@lane AS TEXT) = '' OR lane = @lane) AND (CAST(@state AS TEXT) = '' OR state = @state)
ORDER BY id
LIMIT @limit;

-- name: ExecutionListByState :many
-- ExecutionListByState pages the executions of one state but running, across
-- namespaces, in id order, optionally of one lane.
SELECT * FROM executions INDEXED BY executions_state
WHERE state = @state AND state <> 'running' AND id > @after_id
  AND (CAST(@lane AS TEXT) = '' OR lane = @lane)
ORDER BY id
LIMIT @limit;

-- name: ExecutionListRunning :many
-- ExecutionListRunning pages the running executions, across namespaces, in
-- id order, optionally of one lane: from the index of running leases (live
-- rows only), sorted.
SELECT * FROM executions INDEXED BY executions_expiry
WHERE state = 'running' AND id > @after_id
  AND (CAST(@lane AS TEXT) = '' OR lane = @lane)
ORDER BY id
LIMIT @limit;

-- name: ExecutionListByLane :many
-- ExecutionListByLane pages one lane's executions, across namespaces, in id
-- order.
SELECT * FROM executions
WHERE lane = @lane AND id > @after_id
ORDER BY id
LIMIT @limit;

-- name: ExecutionFinishedPerMinute :many
-- ExecutionFinishedPerMinute counts the executions completed or failed at
-- or after @since, per namespace, lane, minute (Unix ms / 60000) and state,
-- from the index of finished executions: its cost follows the window, not
-- the history.
SELECT namespace, lane, CAST(finished_at_ms / 60000 AS INTEGER) AS minute, state, CAST(count(*) AS INTEGER) AS n
FROM executions INDEXED BY executions_finished
WHERE finished_at_ms >= CAST(@since AS INTEGER) AND state IN ('completed', 'failed')
GROUP BY namespace, lane, minute, state
ORDER BY namespace, lane, minute, state;
