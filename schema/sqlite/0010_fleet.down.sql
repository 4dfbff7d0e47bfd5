DROP TABLE schedules;
DROP TABLE leaders;
DROP TABLE execution_keys;
DROP INDEX executions_unique_live;
ALTER TABLE executions DROP COLUMN unique_key;
