-- Stats reads live rows only, never finished history:
--   * waiting and running executions per namespace and lane, from a partial
--     index that holds just them;
--   * agents per state from a counts table that a trigger keeps exact, so SQL
--     written outside roster keeps it right too.

CREATE INDEX executions_live ON executions (namespace, lane, state, run_at_ms)
    WHERE state IN ('waiting', 'running');

CREATE TABLE agent_state_counts (
    state TEXT   NOT NULL PRIMARY KEY CHECK (state IN ('spawned', 'running', 'suspended', 'terminal')),
    n     BIGINT NOT NULL CHECK (n >= 0)
);

INSERT INTO agent_state_counts (state, n)
SELECT v.state, (SELECT count(*) FROM agents AS a WHERE a.state = v.state)
FROM (VALUES ('spawned'), ('running'), ('suspended'), ('terminal')) AS v (state);

CREATE FUNCTION agents_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        UPDATE agent_state_counts SET n = n - 1 WHERE state = OLD.state;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        UPDATE agent_state_counts SET n = n + 1 WHERE state = NEW.state;
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER agents_count_insert AFTER INSERT ON agents
    FOR EACH ROW EXECUTE FUNCTION agents_count();
CREATE TRIGGER agents_count_update AFTER UPDATE OF state ON agents
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state) EXECUTE FUNCTION agents_count();
CREATE TRIGGER agents_count_delete AFTER DELETE ON agents
    FOR EACH ROW EXECUTE FUNCTION agents_count();
