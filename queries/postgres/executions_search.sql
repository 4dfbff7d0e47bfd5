-- Executions of a namespace found by their unique key or their group, in
-- either order, optionally of one lane and one state: each walks its partial
-- index (executions_unique_key, executions_group) from the cursor.

-- name: ExecutionListByUniqueKey :many
-- ExecutionListByUniqueKey pages the executions of one namespace and unique
-- key in id order.
SELECT * FROM executions
WHERE namespace = @namespace AND unique_key = @unique_key::text AND id > @after_id
  AND (@lane::text = '' OR lane = @lane) AND (@state::text = '' OR state = @state)
ORDER BY id
LIMIT @max_rows;

-- name: ExecutionListByUniqueKeyNewest :many
-- ExecutionListByUniqueKeyNewest pages the executions of one namespace and
-- unique key newest first.
SELECT * FROM executions
WHERE namespace = @namespace AND unique_key = @unique_key::text AND id < @before_id
  AND (@lane::text = '' OR lane = @lane) AND (@state::text = '' OR state = @state)
ORDER BY id DESC
LIMIT @max_rows;

-- name: ExecutionListByGroup :many
-- ExecutionListByGroup pages the executions of one namespace and group in id
-- order.
SELECT * FROM executions
WHERE namespace = @namespace AND group_key = @group_key AND group_key <> '' AND id > @after_id
  AND (@lane::text = '' OR lane = @lane) AND (@state::text = '' OR state = @state)
ORDER BY id
LIMIT @max_rows;

-- name: ExecutionListByGroupNewest :many
-- ExecutionListByGroupNewest pages the executions of one namespace and group
-- newest first.
SELECT * FROM executions
WHERE namespace = @namespace AND group_key = @group_key AND group_key <> '' AND id < @before_id
  AND (@lane::text = '' OR lane = @lane) AND (@state::text = '' OR state = @state)
ORDER BY id DESC
LIMIT @max_rows;
