-- Fleet features: unique executions, one maintenance leader, schedules.

-- An execution's optional unique key. While an execution holding a key is
-- waiting or running no other execution of its namespace may hold it: the
-- partial unique index says so, so that concurrent creates on many hosts
-- yield one (INSERT ... ON CONFLICT DO NOTHING waits for the other insert).
-- (No CHECK of its own: each CHECK costs every write of the table its
-- re-preparation; the Store validates the key.)
ALTER TABLE executions ADD COLUMN unique_key TEXT;
CREATE UNIQUE INDEX executions_unique_live ON executions (namespace, unique_key)
    WHERE unique_key IS NOT NULL AND state IN ('waiting', 'running');

-- A key created with a UniqueFor stays held until until_ms, whatever its
-- execution's state (and after the execution is pruned).
CREATE TABLE execution_keys (
    namespace    TEXT   NOT NULL CHECK (namespace <> ''),
    unique_key   TEXT   NOT NULL CHECK (unique_key <> ''),
    execution_id UUID   NOT NULL,
    until_ms     BIGINT NOT NULL,
    PRIMARY KEY (namespace, unique_key)
);
CREATE INDEX execution_keys_until ON execution_keys (until_ms);

-- Leadership leases: one row per role ('maintenance'). The holder leads
-- while now < expires_at_ms; epoch increases with every new term, so a
-- leader that lost its lease is fenced.
CREATE TABLE leaders (
    name          TEXT   NOT NULL PRIMARY KEY CHECK (name <> ''),
    holder        TEXT   NOT NULL CHECK (holder <> ''),
    epoch         BIGINT NOT NULL CHECK (epoch >= 1),
    expires_at_ms BIGINT NOT NULL
);

-- Schedules: each creates one execution per period (exactly one of
-- every_ms and cron), from its template.
CREATE TABLE schedules (
    namespace             TEXT    NOT NULL CHECK (namespace <> ''),
    name                  TEXT    NOT NULL CHECK (name <> ''),
    every_ms              BIGINT  CHECK (every_ms BETWEEN 1000 AND 31622400000),
    cron                  TEXT    CHECK (cron <> ''),
    lane                  TEXT    NOT NULL CHECK (lane <> ''),
    priority              BIGINT  NOT NULL,
    required_capabilities TEXT[]  NOT NULL DEFAULT '{}',
    max_attempts          BIGINT  NOT NULL CHECK (max_attempts >= 0),
    retry_backoff_ms      BIGINT  NOT NULL CHECK (retry_backoff_ms BETWEEN 0 AND 86400000),
    paused                BOOLEAN NOT NULL,
    next_run_at_ms        BIGINT  NOT NULL,
    last_execution_id     UUID,
    updated_at_ms         BIGINT  NOT NULL,
    payload               BYTEA   NOT NULL,
    PRIMARY KEY (namespace, name),
    CHECK ((every_ms IS NULL) <> (cron IS NULL))
);
CREATE INDEX schedules_due ON schedules (next_run_at_ms) WHERE NOT paused;
