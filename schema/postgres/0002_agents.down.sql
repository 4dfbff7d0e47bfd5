DROP TABLE agent_visibility;
DROP TABLE agents;
DROP FUNCTION agents_visibility_sync();
