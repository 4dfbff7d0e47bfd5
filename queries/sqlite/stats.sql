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
-- StatsExpiredLeases counts each namespace's running leases expired by @at:
-- by their own expiry, or bound to a holder that lapsed (walking the lapsed
-- workers, as LeaseListExpired does).
SELECT x.namespace, CAST(count(*) AS INTEGER) AS expired
FROM (
    SELECT e.namespace FROM executions AS e INDEXED BY executions_expiry
    WHERE e.state = 'running' AND e.expires_at_ms <= CAST(@at AS INTEGER)
    UNION ALL
    SELECT e.namespace FROM workers AS w INDEXED BY workers_expiry
    JOIN executions AS e INDEXED BY executions_holder
      ON e.namespace = w.namespace AND e.holder = w.instance_id AND e.state = 'running'
    WHERE w.last_heartbeat_ms + w.ttl_ms <= @at
      AND e.bound = 1 AND e.revoked_at_ms IS NULL AND e.expires_at_ms > CAST(@at AS INTEGER)
) AS x
GROUP BY x.namespace
ORDER BY x.namespace;

-- name: StatsLanes :many
-- StatsLanes counts each lane's ready, scheduled and running executions, with
-- the oldest ready RunAt (0 when none is ready), from the indexes of waiting
-- and running executions only.
SELECT l.namespace, l.lane,
       CAST(sum(l.state = 'waiting' AND l.run_at_ms <= @at) AS INTEGER) AS ready,
       CAST(sum(l.state = 'waiting' AND l.run_at_ms > @at) AS INTEGER) AS scheduled,
       CAST(sum(l.state = 'running') AS INTEGER) AS running,
       CAST(coalesce(min(CASE WHEN l.state = 'waiting' AND l.run_at_ms <= @at THEN l.run_at_ms END), 0) AS INTEGER) AS oldest_ready_ms
FROM (
    SELECT namespace, lane, state, run_at_ms FROM executions INDEXED BY executions_ready
    WHERE state = 'waiting' AND ready = 1
    UNION ALL
    SELECT namespace, lane, state, run_at_ms FROM executions INDEXED BY executions_scheduled_lane
    WHERE state = 'waiting' AND ready = 0
    UNION ALL
    SELECT namespace, lane, state, run_at_ms FROM executions INDEXED BY executions_expiry
    WHERE state = 'running'
) AS l
GROUP BY l.namespace, l.lane
ORDER BY l.namespace, l.lane;

-- name: StatsLaneWorkers :many
-- StatsLaneWorkers counts each lane's alive workers (those that claim from
-- it), walking the workers and their lanes' rows (a cost of the registry,
-- as StatsWorkers).
SELECT wl.namespace, wl.lane, CAST(count(*) AS INTEGER) AS alive
FROM workers AS w
JOIN worker_lanes AS wl ON wl.namespace = w.namespace AND wl.instance_id = w.instance_id
WHERE w.last_heartbeat_ms + w.ttl_ms > CAST(@at AS INTEGER)
GROUP BY wl.namespace, wl.lane
ORDER BY wl.namespace, wl.lane;

-- name: StatsAgents :many
-- StatsAgents reads the number of agents in each state.
SELECT state, n FROM agent_state_counts ORDER BY state;
