-- Back to leases held by running attempts (schema 0008): the executions'
-- current leases become running attempts again; finished_at_ms, ready and
-- the lanes rows are dropped.

DROP TRIGGER workers_lanes_delete;
DROP TRIGGER workers_lanes_update;
DROP TRIGGER workers_lanes_insert;
DROP TABLE worker_lanes;

CREATE TABLE executions_old (
    id                    TEXT    NOT NULL PRIMARY KEY CHECK (length(id) = 36),
    namespace             TEXT    NOT NULL CHECK (namespace <> ''),
    lane                  TEXT    NOT NULL CHECK (lane <> ''),
    state                 TEXT    NOT NULL DEFAULT 'waiting'
        CHECK (state IN ('waiting', 'running', 'completed', 'failed', 'cancelled')),
    priority              INTEGER NOT NULL,
    payload               BLOB    NOT NULL,
    result                BLOB,
    -- Sorted, duplicate-free JSON array of capability strings.
    required_capabilities TEXT    NOT NULL DEFAULT '[]'
        CHECK (json_valid(required_capabilities) AND json_type(required_capabilities) = 'array'),
    attempts              INTEGER NOT NULL DEFAULT 0,
    max_attempts          INTEGER NOT NULL CHECK (max_attempts >= 1),
    reclaim_count         INTEGER NOT NULL DEFAULT 0 CHECK (reclaim_count >= 0),
    last_error            TEXT    NOT NULL DEFAULT '',
    -- The epoch of the latest claim; fences every older lease.
    epoch                 INTEGER NOT NULL DEFAULT 0 CHECK (epoch >= attempts),
    created_at_ms         INTEGER NOT NULL,
    run_at_ms             INTEGER NOT NULL,
    retry_backoff_ms      INTEGER NOT NULL DEFAULT 0 CHECK (retry_backoff_ms BETWEEN 0 AND 86400000),
    CHECK (attempts BETWEEN 0 AND max_attempts)
) STRICT;

INSERT INTO executions_old (
    id, namespace, lane, state, priority, payload, result, required_capabilities, attempts,
    max_attempts, reclaim_count, last_error, epoch, created_at_ms, run_at_ms, retry_backoff_ms
)
SELECT id, namespace, lane, state, priority, payload, result, required_capabilities, attempts,
       max_attempts, reclaim_count, last_error, epoch, created_at_ms, run_at_ms, retry_backoff_ms
FROM executions;

CREATE TABLE attempts_old (
    execution_id  TEXT    NOT NULL REFERENCES executions_old (id) ON DELETE CASCADE,
    attempt_index INTEGER NOT NULL CHECK (attempt_index >= 1),
    epoch         INTEGER NOT NULL CHECK (epoch >= 1),
    lease_id      TEXT    NOT NULL UNIQUE CHECK (length(lease_id) = 36),
    namespace     TEXT    NOT NULL,
    instance_id   TEXT    NOT NULL,
    state         TEXT    NOT NULL DEFAULT 'running'
        CHECK (state IN ('running', 'completed', 'failed', 'reclaimed', 'cancelled')),
    claimed_at_ms INTEGER NOT NULL,
    expires_at_ms INTEGER NOT NULL,
    ended_at_ms   INTEGER,
    revoked_at_ms INTEGER,
    PRIMARY KEY (execution_id, attempt_index),
    UNIQUE (execution_id, epoch),
    CHECK ((state = 'running') = (ended_at_ms IS NULL))
) STRICT;

INSERT INTO attempts_old (
    execution_id, attempt_index, epoch, lease_id, namespace, instance_id, state,
    claimed_at_ms, expires_at_ms, ended_at_ms, revoked_at_ms
)
SELECT execution_id, attempt_index, epoch, lease_id, namespace, instance_id, state,
       claimed_at_ms, expires_at_ms, ended_at_ms, revoked_at_ms
FROM attempts;

-- The last lease of a completed execution becomes its completed attempt
-- (schema 9 records none), the leases of running executions running ones.
INSERT INTO attempts_old (
    execution_id, attempt_index, epoch, lease_id, namespace, instance_id, state,
    claimed_at_ms, expires_at_ms, ended_at_ms, revoked_at_ms
)
SELECT x.id, x.attempts, x.epoch, x.lease_id, x.namespace, x.holder, 'completed', x.claimed_at_ms,
       x.expires_at_ms, x.finished_at_ms, x.revoked_at_ms
FROM executions AS x
WHERE x.state = 'completed' AND x.lease_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM attempts AS a WHERE a.execution_id = x.id AND a.epoch = x.epoch);

INSERT INTO attempts_old (
    execution_id, attempt_index, epoch, lease_id, namespace, instance_id, state,
    claimed_at_ms, expires_at_ms, revoked_at_ms
)
SELECT id, attempts, epoch, lease_id, namespace, holder, 'running', claimed_at_ms, expires_at_ms, revoked_at_ms
FROM executions WHERE state = 'running';

DROP TABLE attempts;
DROP TABLE executions;
ALTER TABLE executions_old RENAME TO executions;
ALTER TABLE attempts_old RENAME TO attempts;

CREATE INDEX executions_claim ON executions (namespace, lane, priority DESC, run_at_ms, id)
    WHERE state = 'waiting';
CREATE INDEX executions_namespace ON executions (namespace, id);
CREATE INDEX executions_namespace_lane ON executions (namespace, lane, id);
CREATE INDEX executions_namespace_state ON executions (namespace, state, id);
CREATE INDEX executions_namespace_lane_state ON executions (namespace, lane, state, id);
CREATE INDEX executions_lane ON executions (lane, id);
CREATE INDEX executions_lane_state ON executions (lane, state, id);
CREATE INDEX executions_state ON executions (state, id);
CREATE INDEX executions_live ON executions (namespace, lane, state, run_at_ms)
    WHERE state IN ('waiting', 'running');

CREATE UNIQUE INDEX attempts_running ON attempts (execution_id) WHERE state = 'running';
CREATE INDEX attempts_expiry ON attempts (expires_at_ms, execution_id) WHERE state = 'running';
CREATE INDEX attempts_namespace_expiry ON attempts (namespace, expires_at_ms, execution_id)
    WHERE state = 'running';
CREATE INDEX attempts_holder ON attempts (namespace, instance_id, expires_at_ms) WHERE state = 'running';
