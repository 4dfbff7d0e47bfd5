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

-- name: LaneTurnTouch :exec
-- LaneTurnTouch records a lane executions are created in with a group: from
-- then on its groups take turns.
INSERT OR IGNORE INTO lane_turns (namespace, lane, priority, capabilities)
SELECT @namespace, @lane, 0, '[]'
WHERE NOT EXISTS (SELECT 1 FROM lane_turns AS t WHERE t.namespace = @namespace AND t.lane = @lane);

-- name: LaneFlowExists :one
-- LaneFlowExists tells whether one of a worker's lanes has limits or groups
-- (its claims go through FlowClaim).
SELECT EXISTS (
    SELECT 1 FROM worker_lanes AS l
    WHERE l.namespace = @namespace AND l.instance_id = @instance_id
      AND (EXISTS (SELECT 1 FROM lane_limits AS m WHERE m.namespace = l.namespace AND m.lane = l.lane)
           OR EXISTS (SELECT 1 FROM lane_turns AS t WHERE t.namespace = l.namespace AND t.lane = l.lane))
) AS flow;

-- name: WorkerLanesList :many
-- WorkerLanesList reads a worker's lanes in order.
SELECT lane FROM worker_lanes WHERE namespace = @namespace AND instance_id = @instance_id ORDER BY lane;

-- name: LaneFlowRead :one
-- LaneFlowRead reads a lane's limits (limited: it has a row), how many of
-- its executions run (counted only under a cap, and only up to the larger
-- cap), and whether it has groups.
SELECT CAST(m.lane IS NOT NULL AS INTEGER) AS limited,
       CAST(coalesce(m.max_running, 0) AS INTEGER) AS max_running,
       CAST(coalesce(m.max_running_per_group, 0) AS INTEGER) AS max_running_per_group,
       CAST(coalesce(m.rate, 0) AS INTEGER) AS rate,
       CAST(coalesce(m.rate_period_ms, 0) AS INTEGER) AS rate_period_ms,
       CAST(coalesce(m.paused, 0) AS INTEGER) AS paused,
       CAST(coalesce(m.window_start_ms, 0) AS INTEGER) AS window_start_ms,
       CAST(coalesce(m.window_claims, 0) AS INTEGER) AS window_claims,
       CAST(CASE WHEN coalesce(m.max_running, 0) > 0 OR coalesce(m.max_running_per_group, 0) > 0 THEN (
           SELECT count(*) FROM (
               SELECT 1 FROM executions AS r INDEXED BY executions_running
               WHERE r.namespace = CAST(@namespace AS TEXT) AND r.lane = CAST(@lane AS TEXT) AND r.state = 'running'
               LIMIT (SELECT max(c.max_running, c.max_running_per_group) FROM lane_limits AS c
                      WHERE c.namespace = CAST(@namespace AS TEXT) AND c.lane = CAST(@lane AS TEXT))
           )
       ) ELSE 0 END AS INTEGER) AS running,
       CAST(EXISTS (SELECT 1 FROM lane_turns AS t
                    WHERE t.namespace = CAST(@namespace AS TEXT) AND t.lane = CAST(@lane AS TEXT)) AS INTEGER) AS grouped
FROM (SELECT 1) AS one
LEFT JOIN lane_limits AS m ON m.namespace = CAST(@namespace AS TEXT) AND m.lane = CAST(@lane AS TEXT);

-- name: ExecutionFlowLevel :one
-- ExecutionFlowLevel reads the highest priority at or below @below of a
-- lane's ready executions (no row: none), with the group the lane served
-- last at it to workers of @capabilities (a JSON array; '' before).
SELECT e.priority, CAST(coalesce((
           SELECT t.last_group FROM lane_turns AS t
           WHERE t.namespace = e.namespace AND t.lane = e.lane AND t.priority = e.priority
             AND t.capabilities = CAST(@capabilities AS TEXT)
       ), '') AS TEXT) AS last_group
FROM executions AS e INDEXED BY executions_ready
WHERE e.namespace = @namespace AND e.lane = @lane AND e.state = 'waiting' AND e.ready = 1
  AND e.priority <= @below
ORDER BY e.priority DESC
LIMIT 1;

-- name: ExecutionFlowWalk :many
-- ExecutionFlowWalk takes up to @steps steps of a lane's turns at
-- @priority, from the first group from @from_group on in key order: for each
-- group with a ready execution whose required capabilities are all in
-- @capabilities (a JSON array), in key order, that execution (the group's
-- best: earliest RunAt, lowest id), the size of its payload, and how many of
-- the group's executions run, counted up to @per_group (0: not counted).
-- Each step is one probe of the ready index, in one statement; the steps
-- come in the order taken (the caller orders them by group all the same).
WITH RECURSIVE step(id) AS (
    SELECT (
        SELECT x.id FROM executions AS x INDEXED BY executions_ready
        WHERE x.namespace = @namespace AND x.lane = @lane AND x.state = 'waiting' AND x.ready = 1
          AND x.priority = @priority AND x.group_key >= CAST(@from_group AS TEXT)
          AND (x.required_capabilities = '[]' OR NOT EXISTS (
              SELECT 1 FROM json_each(x.required_capabilities) AS r
              WHERE r.value NOT IN (SELECT c.value FROM json_each(CAST(@capabilities AS TEXT)) AS c)
          ))
        ORDER BY x.group_key, x.run_at_ms, x.id
        LIMIT 1
    )
    UNION ALL
    SELECT (
        SELECT x.id FROM executions AS x INDEXED BY executions_ready
        WHERE x.namespace = @namespace AND x.lane = @lane AND x.state = 'waiting' AND x.ready = 1
          AND x.priority = @priority AND x.group_key > (SELECT p.group_key FROM executions AS p WHERE p.id = step.id)
          AND (x.required_capabilities = '[]' OR NOT EXISTS (
              SELECT 1 FROM json_each(x.required_capabilities) AS r
              WHERE r.value NOT IN (SELECT c.value FROM json_each(CAST(@capabilities AS TEXT)) AS c)
          ))
        ORDER BY x.group_key, x.run_at_ms, x.id
        LIMIT 1
    )
    FROM step
    WHERE step.id IS NOT NULL
    LIMIT CAST(@steps AS INTEGER)
)
SELECT e.id, e.group_key, e.run_at_ms, CAST(length(e.payload) AS INTEGER) AS payload_bytes,
       CAST(CASE WHEN CAST(@per_group AS INTEGER) > 0 THEN (
           SELECT count(*) FROM (
               SELECT 1 FROM executions AS r INDEXED BY executions_running
               WHERE r.namespace = e.namespace AND r.lane = e.lane AND r.group_key = e.group_key AND r.state = 'running'
               LIMIT CAST(@per_group AS INTEGER)
           )
       ) ELSE 0 END AS INTEGER) AS running
FROM step
CROSS JOIN executions AS e ON e.id = step.id; -- (CROSS JOIN: the steps first, each execution by its key)

-- name: ExecutionFlowMore :many
-- ExecutionFlowMore reads up to @limit more of a group's ready executions
-- at @priority after (@run_at_ms, @id) whose required capabilities are all
-- in @capabilities (a JSON array), best first, with the size of each
-- payload.
SELECT e.id, e.run_at_ms, CAST(length(e.payload) AS INTEGER) AS payload_bytes
FROM executions AS e INDEXED BY executions_ready
WHERE e.namespace = @namespace AND e.lane = @lane AND e.state = 'waiting' AND e.ready = 1
  AND e.priority = @priority AND e.group_key = @group_key
  AND (e.run_at_ms, e.id) > (CAST(@run_at_ms AS INTEGER), CAST(@id AS TEXT))
  AND (e.required_capabilities = '[]' OR NOT EXISTS (
      SELECT 1 FROM json_each(e.required_capabilities) AS r
      WHERE r.value NOT IN (SELECT c.value FROM json_each(CAST(@capabilities AS TEXT)) AS c)
  ))
ORDER BY e.run_at_ms, e.id
LIMIT @limit;

-- name: ExecutionReadyInLane :one
-- ExecutionReadyInLane tells whether a lane has a ready execution whose
-- required capabilities are all in @capabilities (a JSON array).
SELECT EXISTS (
    SELECT 1 FROM executions AS e INDEXED BY executions_ready
    WHERE e.namespace = @namespace AND e.lane = @lane AND e.state = 'waiting' AND e.ready = 1
      AND (e.required_capabilities = '[]' OR NOT EXISTS (
      SELECT 1 FROM json_each(e.required_capabilities) AS r
      WHERE r.value NOT IN (SELECT c.value FROM json_each(CAST(@capabilities AS TEXT)) AS c)
  ))
) AS ready;

-- name: LaneTurnServe :exec
-- LaneTurnServe records the group a lane served last at a priority to
-- workers of @capabilities (a JSON array).
INSERT INTO lane_turns (namespace, lane, priority, capabilities, last_group)
VALUES (@namespace, @lane, @priority, @capabilities, @last_group)
ON CONFLICT (namespace, lane, priority, capabilities) DO UPDATE SET last_group = excluded.last_group;

-- name: LaneRateCount :exec
-- LaneRateCount counts @claims claims in the rate window that began at
-- @window_start_ms (a new window starts its count afresh; a window older
-- than the one counted is never counted).
UPDATE lane_limits
SET window_claims = CASE WHEN window_start_ms = CAST(@window_start_ms AS INTEGER) THEN window_claims + CAST(@claims AS INTEGER) ELSE CAST(@claims AS INTEGER) END,
    window_start_ms = CAST(@window_start_ms AS INTEGER)
WHERE namespace = @namespace AND lane = @lane AND window_start_ms <= CAST(@window_start_ms AS INTEGER);
