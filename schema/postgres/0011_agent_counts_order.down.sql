CREATE OR REPLACE FUNCTION agents_count() RETURNS trigger LANGUAGE plpgsql AS $$
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
