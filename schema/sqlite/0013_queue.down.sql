-- Back to migration 12: no metadata, no released or snoozed attempts, no
-- attempt errors.
CREATE TABLE attempts_old (
    execution_id  TEXT    NOT NULL REFERENCES executions (id) ON DELETE CASCADE,
    epoch         INTEGER NOT NULL CHECK (epoch >= 1),
    attempt_index INTEGER NOT NULL CHECK (attempt_index >= 1),
    lease_id      TEXT    NOT NULL CHECK (length(lease_id) = 36),
    namespace     TEXT    NOT NULL,
    instance_id   TEXT    NOT NULL,
    state         TEXT    NOT NULL CHECK (state IN ('completed', 'failed', 'reclaimed', 'cancelled')),
    claimed_at_ms INTEGER NOT NULL,
    expires_at_ms INTEGER NOT NULL,
    ended_at_ms   INTEGER NOT NULL,
    revoked_at_ms INTEGER,
    PRIMARY KEY (execution_id, epoch)
) STRICT, WITHOUT ROWID;

INSERT INTO attempts_old (
    execution_id, epoch, attempt_index, lease_id, namespace, instance_id, state,
    claimed_at_ms, expires_at_ms, ended_at_ms, revoked_at_ms
)
SELECT execution_id, epoch, attempt_index, lease_id, namespace, instance_id, state,
       claimed_at_ms, expires_at_ms, ended_at_ms, revoked_at_ms
FROM attempts WHERE state NOT IN ('released', 'snoozed');

DROP TABLE attempts;
ALTER TABLE attempts_old RENAME TO attempts;

ALTER TABLE executions DROP COLUMN metadata;
