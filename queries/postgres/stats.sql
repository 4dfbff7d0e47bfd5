-- Stats: aggregates over live rows only (see schema 0007).

-- name: StatsWorkers :many
-- StatsWorkers counts each namespace's alive and lapsed (not yet swept) workers.
SELECT namespace,
       count(*) FILTER (WHERE last_heartbeat_ms + ttl_ms > @at::bigint) AS alive,
       count(*) FILTER (WHERE last_heartbeat_ms + ttl_ms <= @at::bigint) AS lapsed
FROM workers
GROUP BY namespace
ORDER BY namespace;

-- name: StatsExpiredLeases :many
-- StatsExpiredLeases counts each namespace's running leases expired by @at.
SELECT namespace, count(*) AS expired
FROM executions
WHERE state = 'running' AND expires_at_ms <= @at::bigint
GROUP BY namespace
ORDER BY namespace;

-- name: StatsLanes :many
-- StatsLanes counts each lane's ready, scheduled and running executions, with
-- the oldest ready RunAt (0 when none is ready), from the indexes of waiting
-- and running executions only.
SELECT l.namespace, l.lane,
       count(*) FILTER (WHERE l.state = 'waiting' AND l.run_at_ms <= @at::bigint) AS ready,
       count(*) FILTER (WHERE l.state = 'waiting' AND l.run_at_ms > @at::bigint) AS scheduled,
       count(*) FILTER (WHERE l.state = 'running') AS running,
       CAST(coalesce(min(l.run_at_ms) FILTER (WHERE l.state = 'waiting' AND l.run_at_ms <= @at::bigint), 0) AS bigint) AS oldest_ready_ms
FROM (
    SELECT namespace, lane, state, run_at_ms FROM executions WHERE state = 'waiting' AND ready
    UNION ALL
    SELECT namespace, lane, state, run_at_ms FROM executions WHERE state = 'waiting' AND NOT ready
    UNION ALL
    SELECT namespace, lane, state, run_at_ms FROM executions WHERE state = 'running'
) AS l
GROUP BY l.namespace, l.lane
ORDER BY l.namespace, l.lane;

-- name: StatsAgents :many
-- StatsAgents reads the number of agents in each state.
SELECT state, n FROM agent_state_counts ORDER BY state;
