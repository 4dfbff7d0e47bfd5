-- The queue, made lean for the hot path (each job: one insert and two updates
-- of its execution, one insert of history):
--   * the current lease lives on the execution row (lease_id, holder,
--     claimed_at_ms, expires_at_ms, revoked_at_ms; after the attempt ends they
--     describe the last lease), so a claim and an outcome each change one row;
--   * attempts becomes history: one row per attempt that ended without
--     completing (failed, reclaimed, cancelled), written once; a completed
--     attempt is the execution's last lease, and a released one never ran:
--     neither leaves a row;
--   * finished_at_ms: when the execution became completed, failed or
--     cancelled (NULL while live), for bounded history (PruneExecutions);
--   * ready: a waiting execution whose RunAt had come when it started waiting
--     is ready (1); one waiting for a later RunAt is scheduled (0), kept in
--     an index of its own and made ready once due, so scheduled work never
--     lies in the way of a claim;
--   * worker_lanes: each worker's lanes as rows, kept by triggers, so that a
--     worker of many lanes tests a lane with one index probe;
--   * fewer indexes: lists keep (namespace, id) and (state, id) and filter
--     the rest, and the other indexes are partial;
--   * payload and result move to the end of the row.
-- SQLite cannot add a CHECK in place, so both tables are rebuilt, inside the
-- migration's transaction and with foreign keys on: the child table is
-- copied first and dropped before its parent, so no cascade fires.

CREATE TABLE executions_new (
    id                    TEXT    NOT NULL PRIMARY KEY CHECK (length(id) = 36),
    namespace             TEXT    NOT NULL CHECK (namespace <> ''),
    lane                  TEXT    NOT NULL CHECK (lane <> ''),
    state                 TEXT    NOT NULL DEFAULT 'waiting'
        CHECK (state IN ('waiting', 'running', 'completed', 'failed', 'cancelled')),
    priority              INTEGER NOT NULL,
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
    ready                 INTEGER NOT NULL DEFAULT 1 CHECK (ready IN (0, 1)),
    -- The current lease while running, else the last one (NULL: never claimed).
    lease_id              TEXT    CHECK (length(lease_id) = 36),
    holder                TEXT,
    claimed_at_ms         INTEGER,
    expires_at_ms         INTEGER,
    revoked_at_ms         INTEGER,
    finished_at_ms        INTEGER,
    -- The blobs come last: SQLite reads a column after a large value only by
    -- walking that value's overflow pages.
    payload               BLOB    NOT NULL,
    result                BLOB,
    CHECK (attempts BETWEEN 0 AND max_attempts),
    CONSTRAINT executions_lease CHECK (state <> 'running' OR (
        lease_id IS NOT NULL AND holder IS NOT NULL AND claimed_at_ms IS NOT NULL AND expires_at_ms IS NOT NULL)),
    CONSTRAINT executions_finished CHECK (
        (state IN ('completed', 'failed', 'cancelled')) = (finished_at_ms IS NOT NULL))
) STRICT;

-- Each execution's latest attempt becomes its lease (the current one of a
-- running execution, else the last one); a finished execution
-- finished when its last attempt ended, else (cancelled while waiting) at the
-- latest when it was created; waiting executions whose RunAt is still ahead
-- are scheduled.
INSERT INTO executions_new (
    id, namespace, lane, state, priority, payload, result, required_capabilities, attempts,
    max_attempts, reclaim_count, last_error, epoch, created_at_ms, run_at_ms, retry_backoff_ms,
    ready, lease_id, holder, claimed_at_ms, expires_at_ms, revoked_at_ms, finished_at_ms
)
SELECT x.id, x.namespace, x.lane, x.state, x.priority, x.payload, x.result, x.required_capabilities, x.attempts,
       x.max_attempts, x.reclaim_count, x.last_error, x.epoch, x.created_at_ms, x.run_at_ms, x.retry_backoff_ms,
       NOT (x.state = 'waiting' AND x.run_at_ms > CAST(unixepoch('subsec') * 1000 AS INTEGER)),
       a.lease_id, a.instance_id, a.claimed_at_ms, a.expires_at_ms, a.revoked_at_ms,
       CASE WHEN x.state IN ('completed', 'failed', 'cancelled') THEN coalesce(
           (SELECT max(h.ended_at_ms) FROM attempts AS h WHERE h.execution_id = x.id), x.created_at_ms) END
FROM executions AS x
LEFT JOIN attempts AS a ON a.execution_id = x.id
    AND a.epoch = (SELECT max(b.epoch) FROM attempts AS b WHERE b.execution_id = x.id);

-- History: one row per ended attempt, keyed by its epoch.
CREATE TABLE attempts_new (
    execution_id  TEXT    NOT NULL REFERENCES executions_new (id) ON DELETE CASCADE,
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

INSERT INTO attempts_new (
    execution_id, epoch, attempt_index, lease_id, namespace, instance_id, state,
    claimed_at_ms, expires_at_ms, ended_at_ms, revoked_at_ms
)
SELECT execution_id, epoch, attempt_index, lease_id, namespace, instance_id, state,
       claimed_at_ms, expires_at_ms, ended_at_ms, revoked_at_ms
FROM attempts WHERE state <> 'running';

DROP TABLE attempts;
DROP TABLE executions;
ALTER TABLE executions_new RENAME TO executions;
ALTER TABLE attempts_new RENAME TO attempts;

-- Lists: by namespace and by state in id order (other filters are applied
-- along the way); running executions are listed from executions_expiry, so
-- a claim adds no entry to the state index.
CREATE INDEX executions_namespace ON executions (namespace, id);
CREATE INDEX executions_state ON executions (state, id) WHERE state <> 'running';
-- Claims: the best ready execution of one lane, or (a worker of several
-- lanes) of the namespace, highest priority first, then earliest RunAt, then
-- lowest id.
CREATE INDEX executions_ready ON executions (namespace, lane, priority DESC, run_at_ms, id)
    WHERE state = 'waiting' AND ready = 1;
CREATE INDEX executions_ready_any ON executions (namespace, priority DESC, run_at_ms, id)
    WHERE state = 'waiting' AND ready = 1;
-- Scheduled executions by RunAt: a claim makes those of its namespace that
-- are due ready; the earliest of a worker's lanes says when it should look
-- again.
CREATE INDEX executions_scheduled ON executions (namespace, run_at_ms, id)
    WHERE state = 'waiting' AND ready = 0;
CREATE INDEX executions_scheduled_lane ON executions (namespace, lane, run_at_ms)
    WHERE state = 'waiting' AND ready = 0;
-- Running leases by expiry (reclaim, expired-lease lists; a dead worker's
-- leases and the running list read all of them: they are live rows).
CREATE INDEX executions_expiry ON executions (expires_at_ms, id) WHERE state = 'running';
-- Finished executions by age, to prune history.
CREATE INDEX executions_finished ON executions (finished_at_ms, id) WHERE finished_at_ms IS NOT NULL;

-- Each worker's lanes, one row each, kept by the triggers below from
-- workers.lanes (so SQL written outside roster keeps them right too).
CREATE TABLE worker_lanes (
    namespace   TEXT NOT NULL,
    instance_id TEXT NOT NULL,
    lane        TEXT NOT NULL,
    PRIMARY KEY (namespace, instance_id, lane)
) STRICT, WITHOUT ROWID;

INSERT INTO worker_lanes (namespace, instance_id, lane)
SELECT w.namespace, w.instance_id, l.value FROM workers AS w, json_each(w.lanes) AS l;

CREATE TRIGGER workers_lanes_insert AFTER INSERT ON workers
BEGIN
    INSERT INTO worker_lanes (namespace, instance_id, lane)
    SELECT NEW.namespace, NEW.instance_id, l.value FROM json_each(NEW.lanes) AS l;
END;

CREATE TRIGGER workers_lanes_update AFTER UPDATE OF namespace, instance_id, lanes ON workers
WHEN OLD.namespace <> NEW.namespace OR OLD.instance_id <> NEW.instance_id OR OLD.lanes <> NEW.lanes
BEGIN
    DELETE FROM worker_lanes WHERE namespace = OLD.namespace AND instance_id = OLD.instance_id;
    INSERT INTO worker_lanes (namespace, instance_id, lane)
    SELECT NEW.namespace, NEW.instance_id, l.value FROM json_each(NEW.lanes) AS l;
END;

CREATE TRIGGER workers_lanes_delete AFTER DELETE ON workers
BEGIN
    DELETE FROM worker_lanes WHERE namespace = OLD.namespace AND instance_id = OLD.instance_id;
END;
