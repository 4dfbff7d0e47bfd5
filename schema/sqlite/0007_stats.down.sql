DROP TRIGGER agents_count_delete;
DROP TRIGGER agents_count_update;
DROP TRIGGER agents_count_insert;
DROP TABLE agent_state_counts;
DROP INDEX executions_live;
