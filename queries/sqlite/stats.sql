-- Stats: aggregates over live rows only (see schema 0007).

-- name: StatsWorkers :many
-- StatsWorkers counts each namespace's alive and lapsed (not yet swept) workers.
SELECT namespace,
       CAST(sum(last_heartbeat_ms + ttl_ms > @at) AS INTEGER) AS alive,
       CAST(sum(last_heartbeat_ms + ttl_ms <= @at) AS INTEGER) AS lapsed
FROM workers
GROUP BY namespace
ORDER BY namespace;

-- name: StatsExpiredLeases :many
-- StatsExpiredLeases counts each namespace's running leases expired by @at.
SELECT namespace, CAST(count(*) AS INTEGER) AS expired
FROM attempts
WHERE state = 'running' AND expires_at_ms <= @at
GROUP BY namespace
ORDER BY namespace;

-- name: StatsLanes :many
-- StatsLanes counts each lane's ready, scheduled and running executions, with
-- the oldest ready RunAt (0 when none is ready).
SELECT namespace, lane,
       CAST(sum(state = 'waiting' AND run_at_ms <= @at) AS INTEGER) AS ready,
       CAST(sum(state = 'waiting' AND run_at_ms > @at) AS INTEGER) AS scheduled,
       CAST(sum(state = 'running') AS INTEGER) AS running,
       CAST(coalesce(min(CASE WHEN state = 'waiting' AND run_at_ms <= @at THEN run_at_ms END), 0) AS INTEGER) AS oldest_ready_ms
FROM executions
WHERE state IN ('waiting', 'running')
GROUP BY namespace, lane
ORDER BY namespace, lane;

-- name: StatsAgents :many
-- StatsAgents reads the number of agents in each state.
SELECT state, n FROM agent_state_counts ORDER BY state;
