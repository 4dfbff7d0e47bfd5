-- Executions of a namespace found by their unique key or their group, in
-- either order, optionally of one lane and one state: each walks its partial
-- index (executions_unique_key, executions_group) from the cursor.

-- name: ExecutionListByUniqueKey :many
-- ExecutionListByUniqueKey pages the executions of one namespace and unique
-- key in id order.
SELECT * FROM executions INDEXED BY executions_unique_key
WHERE namespace = @namespace AND unique_key = CAST(@unique_key AS TEXT) AND id > @after_id
  AND (CAST(@lane AS TEXT) = '' OR lane = @lane) AND (CAST(@state AS TEXT) = '' OR state = @state)
ORDER BY id
LIMIT @limit;

-- name: ExecutionListByUniqueKeyNewest :many
-- ExecutionListByUniqueKeyNewest pages the executions of one namespace and
-- unique key newest first.
SELECT * FROM executions INDEXED BY executions_unique_key
WHERE namespace = @namespace AND unique_key = CAST(@unique_key AS TEXT) AND id < @before_id
  AND (CAST(@lane AS TEXT) = '' OR lane = @lane) AND (CAST(@state AS TEXT) = '' OR state = @state)
ORDER BY id DESC
LIMIT @limit;

-- name: ExecutionListByGroup :many
-- ExecutionListByGroup pages the executions of one namespace and group in id
-- order.
SELECT * FROM executions INDEXED BY executions_group
WHERE namespace = @namespace AND group_key = @group_key AND group_key <> '' AND id > @after_id
  AND (CAST(@lane AS TEXT) = '' OR lane = @lane) AND (CAST(@state AS TEXT) = '' OR state = @state)
ORDER BY id
LIMIT @limit;

-- name: ExecutionListByGroupNewest :many
-- ExecutionListByGroupNewest pages the executions of one namespace and group
-- newest first.
SELECT * FROM executions INDEXED BY executions_group
WHERE namespace = @namespace AND group_key = @group_key AND group_key <> '' AND id < @before_id
  AND (CAST(@lane AS TEXT) = '' OR lane = @lane) AND (CAST(@state AS TEXT) = '' OR state = @state)
ORDER BY id DESC
LIMIT @limit;
