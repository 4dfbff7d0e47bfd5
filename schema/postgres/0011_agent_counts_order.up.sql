-- The agents' per-state counts (migration 7) are kept by a trigger that
-- updated the old state's row, then the new state's: two opposite
-- transitions at once (running -> suspended beside suspended -> running)
-- locked the same two rows in opposite orders and deadlocked. The trigger
-- now locks both rows first, in one order (by state), then updates them.
CREATE OR REPLACE FUNCTION agents_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        PERFORM 1 FROM agent_state_counts WHERE state IN (OLD.state, NEW.state) ORDER BY state FOR UPDATE;
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        UPDATE agent_state_counts SET n = n - 1 WHERE state = OLD.state;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        UPDATE agent_state_counts SET n = n + 1 WHERE state = NEW.state;
    END IF;
    RETURN NULL;
END;
$$;
