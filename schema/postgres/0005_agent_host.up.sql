-- The host that runs an agent (NULL = none), so that the boot scan of one host
-- on a database many hosts share ends only that host's live agents.
ALTER TABLE agents ADD COLUMN host TEXT CHECK (host <> '');

CREATE INDEX agents_live_host ON agents (host, id) WHERE state <> 'terminal' AND host IS NOT NULL;
