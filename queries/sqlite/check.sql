-- Consistency checks of `roster check`: each counts rows that break a rule
-- the operations keep (0 when the database is sound).

-- name: ExecutionCheckRunning :one
-- ExecutionCheckRunning counts running executions whose current attempt is
-- already recorded as ended.
SELECT count(*) FROM executions AS e
WHERE e.state = 'running'
  AND EXISTS (SELECT 1 FROM attempts AS a WHERE a.execution_id = e.id AND a.epoch = e.epoch);

-- name: AttemptCheckEpoch :one
-- AttemptCheckEpoch counts recorded attempts of an execution that is gone,
-- or of an epoch their execution never reached.
SELECT count(*) FROM attempts AS a
LEFT JOIN executions AS e ON e.id = a.execution_id
WHERE e.id IS NULL OR a.epoch > e.epoch;

-- name: WorkerCheckLanes :one
-- WorkerCheckLanes counts the workers whose lane rows differ from their lanes.
SELECT count(*) FROM workers AS w
WHERE json_array_length(w.lanes) <> (
    SELECT count(*) FROM worker_lanes AS l WHERE l.namespace = w.namespace AND l.instance_id = w.instance_id
) OR EXISTS (
    SELECT 1 FROM json_each(w.lanes) AS j
    WHERE NOT EXISTS (
        SELECT 1 FROM worker_lanes AS l
        WHERE l.namespace = w.namespace AND l.instance_id = w.instance_id AND l.lane = j.value
    )
);

-- name: AgentCheckCounts :one
-- AgentCheckCounts counts the agent states whose kept count differs from the agents.
SELECT count(*) FROM agent_state_counts AS c
WHERE c.n <> (SELECT count(*) FROM agents AS a WHERE a.state = c.state);
