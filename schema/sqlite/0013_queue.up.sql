-- What a job queue's users expect of it: metadata carried with each
-- execution, and the history of every attempt.
--   * executions.metadata: a JSON object of strings (NULL: none), handed to
--     every lease of the execution (a trace context, say);
--   * attempts records every attempt that ended other than by completing:
--     failed, reclaimed (its lease was lost), cancelled, and now released
--     and snoozed too (a completed attempt is still the execution's last
--     lease on its row, so a claim and a completion write no history), each
--     with its error: the fail reason, "lease expired" or the cancel reason.
-- SQLite cannot change a CHECK in place: attempts is rebuilt (it is the
-- child table, so dropping it cascades nothing).

ALTER TABLE executions ADD COLUMN metadata TEXT
    CHECK (json_valid(metadata) AND json_type(metadata) = 'object');

CREATE TABLE attempts_new (
    execution_id  TEXT    NOT NULL REFERENCES executions (id) ON DELETE CASCADE,
    epoch         INTEGER NOT NULL CHECK (epoch >= 1),
    attempt_index INTEGER NOT NULL CHECK (attempt_index >= 1),
    lease_id      TEXT    NOT NULL CHECK (length(lease_id) = 36),
    namespace     TEXT    NOT NULL,
    instance_id   TEXT    NOT NULL,
    state         TEXT    NOT NULL
        CHECK (state IN ('completed', 'failed', 'reclaimed', 'cancelled', 'released', 'snoozed')),
    claimed_at_ms INTEGER NOT NULL,
    expires_at_ms INTEGER NOT NULL,
    ended_at_ms   INTEGER NOT NULL,
    revoked_at_ms INTEGER,
    error         TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (execution_id, epoch)
) STRICT, WITHOUT ROWID;

INSERT INTO attempts_new (
    execution_id, epoch, attempt_index, lease_id, namespace, instance_id, state,
    claimed_at_ms, expires_at_ms, ended_at_ms, revoked_at_ms, error
)
SELECT execution_id, epoch, attempt_index, lease_id, namespace, instance_id, state,
       claimed_at_ms, expires_at_ms, ended_at_ms, revoked_at_ms,
       CASE WHEN state = 'reclaimed' THEN 'lease expired' ELSE '' END
FROM attempts;

DROP TABLE attempts;
ALTER TABLE attempts_new RENAME TO attempts;
