-- Stats reads live rows only, never finished history:
--   * waiting and running executions per namespace and lane, from a partial
--     index that holds just them (covering: Stats never reads the table);
--   * agents per state from a counts table that triggers keep exact, so SQL
--     written outside roster keeps it right too.

CREATE INDEX executions_live ON executions (namespace, lane, state, run_at_ms)
    WHERE state IN ('waiting', 'running');

CREATE TABLE agent_state_counts (
    state TEXT    NOT NULL PRIMARY KEY CHECK (state IN ('spawned', 'running', 'suspended', 'terminal')),
    n     INTEGER NOT NULL CHECK (n >= 0)
) STRICT, WITHOUT ROWID;

INSERT INTO agent_state_counts (state, n)
SELECT v.column1, (SELECT count(*) FROM agents AS a WHERE a.state = v.column1)
FROM (VALUES ('spawned'), ('running'), ('suspended'), ('terminal')) AS v;

CREATE TRIGGER agents_count_insert AFTER INSERT ON agents
BEGIN
    UPDATE agent_state_counts SET n = n + 1 WHERE state = NEW.state;
END;

CREATE TRIGGER agents_count_update AFTER UPDATE OF state ON agents
WHEN OLD.state <> NEW.state
BEGIN
    UPDATE agent_state_counts SET n = n - 1 WHERE state = OLD.state;
    UPDATE agent_state_counts SET n = n + 1 WHERE state = NEW.state;
END;

CREATE TRIGGER agents_count_delete AFTER DELETE ON agents
BEGIN
    UPDATE agent_state_counts SET n = n - 1 WHERE state = OLD.state;
END;
