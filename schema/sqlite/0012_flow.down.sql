DROP INDEX executions_running;
DROP INDEX executions_ready;
CREATE INDEX executions_ready ON executions (namespace, lane, priority DESC, run_at_ms, id)
    WHERE state = 'waiting' AND ready = 1;
ALTER TABLE executions DROP COLUMN group_key;
DROP TABLE lane_groups;
DROP TABLE lane_limits;
