-- Flow control: lane limits, the groups of lanes, and the claim of a lane
-- that has either (engine.FlowClaim runs these in the writer's transaction,
-- so the counts it reads hold until it commits).

-- name: LaneLimitsPut :exec
-- LaneLimitsPut creates or replaces a lane's limits; the rate window's count
-- is kept (replacing limits does not reset a rate).
INSERT INTO lane_limits (namespace, lane, max_running, max_running_per_group, rate, rate_period_ms, paused)
VALUES (@namespace, @lane, @max_running, @max_running_per_group, @rate, @rate_period_ms, @paused)
ON CONFLICT (namespace, lane) DO UPDATE
SET max_running = excluded.max_running, max_running_per_group = excluded.max_running_per_group,
    rate = excluded.rate, rate_period_ms = excluded.rate_period_ms, paused = excluded.paused;

-- name: LaneLimitsList :many
-- LaneLimitsList reads the limits of a namespace's lanes (empty: every
-- namespace), by namespace and lane.
SELECT namespace, lane, max_running, max_running_per_group, rate, rate_period_ms, paused
FROM lane_limits
WHERE CAST(@namespace AS TEXT) = '' OR namespace = CAST(@namespace AS TEXT)
ORDER BY namespace, lane;

-- name: LaneLimitsDelete :execrows
-- LaneLimitsDelete removes a lane's limits.
DELETE FROM lane_limits WHERE namespace = @namespace AND lane = @lane;

-- name: LaneGroupTouch :exec
-- LaneGroupTouch records a group executions are created in: from then on
-- the lane's groups take turns.
INSERT OR IGNORE INTO lane_groups (namespace, lane, group_key) VALUES (@namespace, @lane, @group_key);

-- name: LaneFlowExists :one
-- LaneFlowExists tells whether one of a worker's lanes has limits or groups
-- (its claims go through FlowClaim).
SELECT EXISTS (
    SELECT 1 FROM worker_lanes AS l
    WHERE l.namespace = @namespace AND l.instance_id = @instance_id
      AND (EXISTS (SELECT 1 FROM lane_limits AS m WHERE m.namespace = l.namespace AND m.lane = l.lane)
           OR EXISTS (SELECT 1 FROM lane_groups AS g WHERE g.namespace = l.namespace AND g.lane = l.lane))
) AS flow;

-- name: WorkerLanesList :many
-- WorkerLanesList reads a worker's lanes in order.
SELECT lane FROM worker_lanes WHERE namespace = @namespace AND instance_id = @instance_id ORDER BY lane;

-- name: LaneFlowRead :one
-- LaneFlowRead reads a lane's limits (limited: it has a row), how many of
-- its executions run (counted only under a cap), and whether it has groups.
SELECT CAST(m.lane IS NOT NULL AS INTEGER) AS limited,
       CAST(coalesce(m.max_running, 0) AS INTEGER) AS max_running,
       CAST(coalesce(m.max_running_per_group, 0) AS INTEGER) AS max_running_per_group,
       CAST(coalesce(m.rate, 0) AS INTEGER) AS rate,
       CAST(coalesce(m.rate_period_ms, 0) AS INTEGER) AS rate_period_ms,
       CAST(coalesce(m.paused, 0) AS INTEGER) AS paused,
       CAST(coalesce(m.window_start_ms, 0) AS INTEGER) AS window_start_ms,
       CAST(coalesce(m.window_claims, 0) AS INTEGER) AS window_claims,
       CAST(CASE WHEN coalesce(m.max_running, 0) > 0 OR coalesce(m.max_running_per_group, 0) > 0 THEN (
           SELECT count(*) FROM executions AS r
           WHERE r.namespace = CAST(@namespace AS TEXT) AND r.lane = CAST(@lane AS TEXT) AND r.state = 'running'
       ) ELSE 0 END AS INTEGER) AS running,
       CAST(EXISTS (SELECT 1 FROM lane_groups AS g
                    WHERE g.namespace = CAST(@namespace AS TEXT) AND g.lane = CAST(@lane AS TEXT)) AS INTEGER) AS grouped
FROM (SELECT 1) AS one
LEFT JOIN lane_limits AS m ON m.namespace = CAST(@namespace AS TEXT) AND m.lane = CAST(@lane AS TEXT);

-- name: LaneGroupsRead :many
-- LaneGroupsRead reads a lane's groups, with when each was last served and how many of each group's executions run (counted only when
-- @count_running).
SELECT g.group_key, g.served_seq,
       CAST(CASE WHEN CAST(@count_running AS INTEGER) THEN (
           SELECT count(*) FROM executions AS r
           WHERE r.namespace = g.namespace AND r.lane = g.lane AND r.group_key = g.group_key AND r.state = 'running'
       ) ELSE 0 END AS INTEGER) AS running
FROM lane_groups AS g
WHERE g.namespace = @namespace AND g.lane = @lane;

-- name: ExecutionPickGroups :many
-- ExecutionPickGroups finds, for each group of @group_keys (a JSON array),
-- up to @limit of the group's best ready executions in one lane (highest
-- priority, earliest RunAt, lowest id) whose required capabilities are all
-- in @capabilities (a JSON array), with the size of each payload, in no
-- order. (SQLite takes no LIMIT from the outer row: the caller orders each
-- group's and keeps its own limit of them.)
SELECT e.id, e.group_key, e.priority, e.run_at_ms, CAST(length(e.payload) AS INTEGER) AS payload_bytes
FROM json_each(CAST(@group_keys AS TEXT)) AS g
JOIN executions AS e ON e.id IN (
    SELECT x.id FROM executions AS x INDEXED BY executions_ready
    WHERE x.namespace = @namespace AND x.lane = @lane AND x.group_key = g.value
      AND x.state = 'waiting' AND x.ready = 1
      AND (x.required_capabilities = '[]' OR NOT EXISTS (
          SELECT 1 FROM json_each(x.required_capabilities) AS r
          WHERE r.value NOT IN (SELECT c.value FROM json_each(CAST(@capabilities AS TEXT)) AS c)
      ))
    ORDER BY x.priority DESC, x.run_at_ms, x.id
    LIMIT @limit
);

-- name: ExecutionReadyInGroups :one
-- ExecutionReadyInGroups tells whether one of the groups of @group_keys (a
-- JSON array) of a lane has a ready execution whose required capabilities
-- are all in @capabilities (a JSON array); it stops at the first found.
SELECT EXISTS (
    SELECT 1 FROM json_each(CAST(@group_keys AS TEXT)) AS g
    WHERE EXISTS (
        SELECT 1 FROM executions AS x INDEXED BY executions_ready
        WHERE x.namespace = @namespace AND x.lane = @lane AND x.group_key = g.value
          AND x.state = 'waiting' AND x.ready = 1
          AND (x.required_capabilities = '[]' OR NOT EXISTS (
              SELECT 1 FROM json_each(x.required_capabilities) AS r
              WHERE r.value NOT IN (SELECT c.value FROM json_each(CAST(@capabilities AS TEXT)) AS c)
          ))
    )
) AS ready;

-- name: LaneGroupServe :exec
-- LaneGroupServe records when a group was last served.
INSERT INTO lane_groups (namespace, lane, group_key, served_seq) VALUES (@namespace, @lane, @group_key, @served_seq)
ON CONFLICT (namespace, lane, group_key) DO UPDATE SET served_seq = excluded.served_seq;

-- name: LaneRateCount :exec
-- LaneRateCount counts @claims claims in the rate window that began at
-- @window_start_ms (a new window starts its count afresh; a window older
-- than the one counted is never counted).
UPDATE lane_limits
SET window_claims = CASE WHEN window_start_ms = CAST(@window_start_ms AS INTEGER) THEN window_claims + CAST(@claims AS INTEGER) ELSE CAST(@claims AS INTEGER) END,
    window_start_ms = CAST(@window_start_ms AS INTEGER)
WHERE namespace = @namespace AND lane = @lane AND window_start_ms <= CAST(@window_start_ms AS INTEGER);
