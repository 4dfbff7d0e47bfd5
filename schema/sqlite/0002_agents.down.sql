DROP TRIGGER agents_visibility_update;
DROP TRIGGER agents_visibility_insert;
DROP TABLE agent_visibility;
DROP TABLE agents;
