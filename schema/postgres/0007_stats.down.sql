DROP TRIGGER agents_count_delete ON agents;
DROP TRIGGER agents_count_update ON agents;
DROP TRIGGER agents_count_insert ON agents;
DROP FUNCTION agents_count();
DROP TABLE agent_state_counts;
DROP INDEX executions_live;
