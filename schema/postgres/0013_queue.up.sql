-- What a job queue's users expect of it: metadata carried with each
-- execution, the history of every attempt, and enqueue inside the
-- application's own transaction.
--   * executions.metadata: a JSON object of strings as text (NULL: none),
--     handed to every lease of the execution (a trace context, say);
--   * attempts records every attempt that ended other than by completing:
--     failed, reclaimed (its lease was lost), cancelled, and now released
--     and snoozed too (a completed attempt is still the execution's last
--     lease on its row, so a claim and a completion write no history), each
--     with its error: the fail reason, "lease expired" or the cancel reason;
--   * roster_identity: one row naming this roster schema, so that a
--     caller's transaction can be checked to reach this very database and
--     schema (not a namesake on another server) before anything is written.

ALTER TABLE executions ADD COLUMN metadata TEXT;

-- (Rows recorded before keep '': a lost attempt reads as "lease expired"
-- all the same, and no row of a large history is rewritten here.)
ALTER TABLE attempts ADD COLUMN error TEXT NOT NULL DEFAULT '';
ALTER TABLE attempts DROP CONSTRAINT attempts_state_check;
ALTER TABLE attempts ADD CONSTRAINT attempts_state_check
    CHECK (state IN ('completed', 'failed', 'reclaimed', 'cancelled', 'released', 'snoozed'));

CREATE TABLE roster_identity (
    id  UUID    NOT NULL PRIMARY KEY,
    one BOOLEAN NOT NULL DEFAULT true UNIQUE CHECK (one)
);
INSERT INTO roster_identity (id) VALUES (md5(random()::text || clock_timestamp()::text || current_schema())::uuid);
