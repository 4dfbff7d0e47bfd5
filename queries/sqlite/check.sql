-- Consistency checks of `roster check`: each counts rows that break a rule
-- the operations keep (0 when the database is sound).

-- name: ExecutionCheckRunning :one
-- ExecutionCheckRunning counts running executions without a running attempt.
SELECT count(*) FROM executions AS e
WHERE e.state = 'running'
  AND NOT EXISTS (SELECT 1 FROM attempts AS a WHERE a.execution_id = e.id AND a.state = 'running');

-- name: AttemptCheckRunning :one
-- AttemptCheckRunning counts running attempts whose execution is not running.
SELECT count(*) FROM attempts AS a
JOIN executions AS e ON e.id = a.execution_id
WHERE a.state = 'running' AND e.state <> 'running';

-- name: AgentCheckCounts :one
-- AgentCheckCounts counts the agent states whose kept count differs from the agents.
SELECT count(*) FROM agent_state_counts AS c
WHERE c.n <> (SELECT count(*) FROM agents AS a WHERE a.state = c.state);
