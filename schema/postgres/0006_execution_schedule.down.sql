DROP INDEX executions_state;
DROP INDEX executions_lane_state;
DROP INDEX executions_lane;
DROP INDEX executions_namespace_lane_state;
DROP INDEX executions_namespace_state;
DROP INDEX executions_namespace_lane;
DROP INDEX executions_namespace;
DROP INDEX executions_claim;
CREATE INDEX executions_claim ON executions (namespace, lane, priority DESC, created_at_ms, id)
    WHERE state = 'waiting';
UPDATE attempts SET state = 'failed' WHERE state = 'cancelled';
UPDATE executions SET state = 'failed' WHERE state = 'cancelled';
ALTER TABLE attempts DROP CONSTRAINT attempts_state_check;
ALTER TABLE attempts ADD CONSTRAINT attempts_state_check
    CHECK (state IN ('running', 'completed', 'failed', 'reclaimed'));
ALTER TABLE executions DROP CONSTRAINT executions_state_check;
ALTER TABLE executions ADD CONSTRAINT executions_state_check
    CHECK (state IN ('waiting', 'running', 'completed', 'failed'));
ALTER TABLE executions DROP COLUMN retry_backoff_ms;
ALTER TABLE executions DROP COLUMN run_at_ms;
