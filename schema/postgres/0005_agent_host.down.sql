DROP INDEX agents_live_host;
ALTER TABLE agents DROP COLUMN host;
