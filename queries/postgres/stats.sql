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
-- StatsExpiredLeases counts each namespace's running leases expired by @at:
-- by their own expiry, or bound to a holder that lapsed (walking the lapsed
-- workers, as LeaseListExpired does).
SELECT x.namespace, count(*) AS expired
FROM (
    SELECT e.namespace FROM executions AS e
    WHERE e.state = 'running' AND e.expires_at_ms <= @at::bigint
    UNION ALL
    (SELECT w.namespace FROM workers AS w
    CROSS JOIN LATERAL (
        SELECT 1 FROM executions AS e
        WHERE e.namespace = w.namespace AND e.holder = w.instance_id AND e.state = 'running'
          AND e.bound AND e.revoked_at_ms IS NULL AND e.expires_at_ms > @at::bigint
        OFFSET 0
    ) AS e
    WHERE w.last_heartbeat_ms + w.ttl_ms <= @at::bigint
    ORDER BY w.last_heartbeat_ms + w.ttl_ms)
) AS x
GROUP BY x.namespace
ORDER BY x.namespace;

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

-- name: StatsLaneWorkers :many
-- StatsLaneWorkers counts each lane's alive workers (those that claim from
-- it), walking the workers and their lanes (a cost of the registry, as
-- StatsWorkers).
SELECT w.namespace, l.lane::text AS lane, count(*) AS alive
FROM workers AS w, unnest(w.lanes) AS l(lane)
WHERE w.last_heartbeat_ms + w.ttl_ms > @at::bigint
GROUP BY w.namespace, l.lane
ORDER BY w.namespace, l.lane;

-- name: StatsAgents :many
-- StatsAgents reads the number of agents in each state.
SELECT state, n FROM agent_state_counts ORDER BY state;
