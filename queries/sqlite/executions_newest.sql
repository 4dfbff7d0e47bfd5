-- Executions listed newest first: each list of executions.sql walked the
-- other way (id descending), for operators who want the latest first.

-- name: ExecutionListNewest :many
-- ExecutionListNewest pages every execution newest first (descending id).
SELECT * FROM executions
WHERE id < @before_id
ORDER BY id DESC
LIMIT @limit;

-- name: ExecutionListByNamespaceNewest :many
-- ExecutionListByNamespaceNewest pages one namespace's executions newest
-- first (descending id), optionally of one lane and one state.
SELECT * FROM executions
WHERE namespace = @namespace AND id < @before_id
  AND (CAST(@lane AS TEXT) = '' OR lane = @lane) AND (CAST(@state AS TEXT) = '' OR state = @state)
ORDER BY id DESC
LIMIT @limit;

-- name: ExecutionListByStateNewest :many
-- ExecutionListByStateNewest pages the executions of one state but running,
-- across namespaces, newest first, optionally of one lane.
SELECT * FROM executions INDEXED BY executions_state
WHERE state = @state AND state <> 'running' AND id < @before_id
  AND (CAST(@lane AS TEXT) = '' OR lane = @lane)
ORDER BY id DESC
LIMIT @limit;

-- name: ExecutionListRunningNewest :many
-- ExecutionListRunningNewest pages the running executions, across
-- namespaces, newest first, optionally of one lane: from the index of
-- running leases (live rows only), sorted.
SELECT * FROM executions INDEXED BY executions_expiry
WHERE state = 'running' AND id < @before_id
  AND (CAST(@lane AS TEXT) = '' OR lane = @lane)
ORDER BY id DESC
LIMIT @limit;

-- name: ExecutionListByLaneNewest :many
-- ExecutionListByLaneNewest pages one lane's executions, across namespaces,
-- newest first.
SELECT * FROM executions
WHERE lane = @lane AND id < @before_id
ORDER BY id DESC
LIMIT @limit;
