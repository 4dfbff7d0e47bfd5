-- Back to migration 13: no bound leases, timeouts or agent holders.
DROP FUNCTION roster_lost(TEXT);
DROP INDEX agents_live_holder;
ALTER TABLE agents DROP CONSTRAINT agents_holder_both;
ALTER TABLE agents DROP COLUMN holder_instance_id;
ALTER TABLE agents DROP COLUMN holder_namespace;
DROP INDEX executions_holder;
ALTER TABLE executions DROP COLUMN bound;
ALTER TABLE executions DROP COLUMN deadline_ms;
ALTER TABLE executions DROP COLUMN timeout_ms;
ALTER TABLE schedules DROP COLUMN timeout_ms;
