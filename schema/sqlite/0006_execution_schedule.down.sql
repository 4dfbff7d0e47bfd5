-- Back to version 5: cancelled executions and attempts become failed; RunAt
-- and RetryBackoff are dropped. The same rebuild as the up migration.

CREATE TABLE executions_old (
    id                    TEXT    NOT NULL PRIMARY KEY CHECK (length(id) = 36),
    namespace             TEXT    NOT NULL CHECK (namespace <> ''),
    lane                  TEXT    NOT NULL CHECK (lane <> ''),
    state                 TEXT    NOT NULL DEFAULT 'waiting'
        CHECK (state IN ('waiting', 'running', 'completed', 'failed')),
    priority              INTEGER NOT NULL,
    payload               BLOB    NOT NULL,
    result                BLOB,
    required_capabilities TEXT    NOT NULL DEFAULT '[]'
        CHECK (json_valid(required_capabilities) AND json_type(required_capabilities) = 'array'),
    attempts              INTEGER NOT NULL DEFAULT 0,
    max_attempts          INTEGER NOT NULL CHECK (max_attempts >= 1),
    reclaim_count         INTEGER NOT NULL DEFAULT 0 CHECK (reclaim_count >= 0),
    last_error            TEXT    NOT NULL DEFAULT '',
    epoch                 INTEGER NOT NULL DEFAULT 0 CHECK (epoch >= attempts),
    created_at_ms         INTEGER NOT NULL,
    CHECK (attempts BETWEEN 0 AND max_attempts)
) STRICT;

INSERT INTO executions_old
SELECT id, namespace, lane, CASE WHEN state = 'cancelled' THEN 'failed' ELSE state END, priority,
       payload, result, required_capabilities, attempts, max_attempts, reclaim_count, last_error,
       epoch, created_at_ms
FROM executions;

CREATE TABLE attempts_old (
    execution_id  TEXT    NOT NULL REFERENCES executions_old (id) ON DELETE CASCADE,
    attempt_index INTEGER NOT NULL CHECK (attempt_index >= 1),
    epoch         INTEGER NOT NULL CHECK (epoch >= 1),
    lease_id      TEXT    NOT NULL UNIQUE CHECK (length(lease_id) = 36),
    namespace     TEXT    NOT NULL,
    instance_id   TEXT    NOT NULL,
    state         TEXT    NOT NULL DEFAULT 'running'
        CHECK (state IN ('running', 'completed', 'failed', 'reclaimed')),
    claimed_at_ms INTEGER NOT NULL,
    expires_at_ms INTEGER NOT NULL,
    ended_at_ms   INTEGER,
    revoked_at_ms INTEGER,
    PRIMARY KEY (execution_id, attempt_index),
    UNIQUE (execution_id, epoch),
    CHECK ((state = 'running') = (ended_at_ms IS NULL))
) STRICT;

INSERT INTO attempts_old SELECT
    execution_id, attempt_index, epoch, lease_id, namespace, instance_id,
    CASE WHEN state = 'cancelled' THEN 'failed' ELSE state END,
    claimed_at_ms, expires_at_ms, ended_at_ms, revoked_at_ms
FROM attempts;

DROP TABLE attempts;
DROP TABLE executions;
ALTER TABLE executions_old RENAME TO executions;
ALTER TABLE attempts_old RENAME TO attempts;

CREATE INDEX executions_claim ON executions (namespace, lane, priority DESC, created_at_ms, id)
    WHERE state = 'waiting';
CREATE UNIQUE INDEX attempts_running ON attempts (execution_id) WHERE state = 'running';
CREATE INDEX attempts_expiry ON attempts (expires_at_ms, execution_id) WHERE state = 'running';
CREATE INDEX attempts_namespace_expiry ON attempts (namespace, expires_at_ms, execution_id)
    WHERE state = 'running';
CREATE INDEX attempts_holder ON attempts (namespace, instance_id, expires_at_ms) WHERE state = 'running';
