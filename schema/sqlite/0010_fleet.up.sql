-- Fleet features: unique executions, one maintenance leader, schedules.

-- An execution's optional unique key. While an execution holding a key is
-- waiting or running no other execution of its namespace may hold it: the
-- partial unique index says so, so that concurrent creates yield one.
ALTER TABLE executions ADD COLUMN unique_key TEXT CHECK (unique_key <> '');
CREATE UNIQUE INDEX executions_unique_live ON executions (namespace, unique_key)
    WHERE unique_key IS NOT NULL AND state IN ('waiting', 'running');

-- A key created with a UniqueFor stays held until until_ms, whatever its
-- execution's state (and after the execution is pruned).
CREATE TABLE execution_keys (
    namespace    TEXT    NOT NULL CHECK (namespace <> ''),
    unique_key   TEXT    NOT NULL CHECK (unique_key <> ''),
    execution_id TEXT    NOT NULL CHECK (length(execution_id) = 36),
    until_ms     INTEGER NOT NULL,
    PRIMARY KEY (namespace, unique_key)
) STRICT, WITHOUT ROWID;
CREATE INDEX execution_keys_until ON execution_keys (until_ms);

-- Leadership leases: one row per role ('maintenance'). The holder leads
-- while now < expires_at_ms; epoch increases with every new term, so a
-- leader that lost its lease is fenced.
CREATE TABLE leaders (
    name          TEXT    NOT NULL PRIMARY KEY CHECK (name <> ''),
    holder        TEXT    NOT NULL CHECK (holder <> ''),
    epoch         INTEGER NOT NULL CHECK (epoch >= 1),
    expires_at_ms INTEGER NOT NULL
) STRICT;

-- Schedules: each creates one execution per period (exactly one of
-- every_ms and cron), from its template.
CREATE TABLE schedules (
    namespace             TEXT    NOT NULL CHECK (namespace <> ''),
    name                  TEXT    NOT NULL CHECK (name <> ''),
    every_ms              INTEGER CHECK (every_ms BETWEEN 1000 AND 31622400000),
    cron                  TEXT    CHECK (cron <> ''),
    lane                  TEXT    NOT NULL CHECK (lane <> ''),
    priority              INTEGER NOT NULL,
    required_capabilities TEXT    NOT NULL DEFAULT '[]'
        CHECK (json_valid(required_capabilities) AND json_type(required_capabilities) = 'array'),
    max_attempts          INTEGER NOT NULL CHECK (max_attempts >= 0),
    retry_backoff_ms      INTEGER NOT NULL CHECK (retry_backoff_ms BETWEEN 0 AND 86400000),
    paused                INTEGER NOT NULL CHECK (paused IN (0, 1)),
    next_run_at_ms        INTEGER NOT NULL,
    last_execution_id     TEXT    CHECK (length(last_execution_id) = 36),
    updated_at_ms         INTEGER NOT NULL,
    payload               BLOB    NOT NULL,
    PRIMARY KEY (namespace, name),
    CHECK ((every_ms IS NULL) <> (cron IS NULL))
) STRICT;
CREATE INDEX schedules_due ON schedules (next_run_at_ms) WHERE paused = 0;
