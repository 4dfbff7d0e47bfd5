-- Executions and their attempts. An execution moves waiting -> running ->
-- completed | failed, and back to waiting when an attempt fails or its lease
-- is reclaimed while attempts remain. Each claim adds one attempt row holding
-- the lease: its epoch, its holder and its expiry. An attempt is 'running'
-- exactly while its execution is running under it.

CREATE TABLE executions (
    id                    UUID    NOT NULL,
    namespace             TEXT    NOT NULL CHECK (namespace <> ''),
    lane                  TEXT    NOT NULL CHECK (lane <> ''),
    state                 TEXT    NOT NULL DEFAULT 'waiting'
        CHECK (state IN ('waiting', 'running', 'completed', 'failed')),
    priority              BIGINT  NOT NULL,
    payload               BYTEA   NOT NULL,
    result                BYTEA,
    -- Sorted, duplicate-free array of capability identifiers.
    required_capabilities TEXT[]  NOT NULL DEFAULT '{}',
    attempts              BIGINT  NOT NULL DEFAULT 0,
    max_attempts          BIGINT  NOT NULL CHECK (max_attempts >= 1),
    reclaim_count         BIGINT  NOT NULL DEFAULT 0 CHECK (reclaim_count >= 0),
    last_error            TEXT    NOT NULL DEFAULT '',
    -- The epoch of the latest claim; fences every older lease.
    epoch                 BIGINT  NOT NULL DEFAULT 0 CHECK (epoch >= attempts),
    created_at_ms         BIGINT  NOT NULL,
    CONSTRAINT executions_pkey PRIMARY KEY (id),
    CHECK (attempts BETWEEN 0 AND max_attempts)
);

-- The claim query: best waiting execution of one lane, highest priority first,
-- then oldest.
CREATE INDEX executions_claim ON executions (namespace, lane, priority DESC, created_at_ms, id)
    WHERE state = 'waiting';

CREATE TABLE attempts (
    execution_id  UUID   NOT NULL REFERENCES executions (id) ON DELETE CASCADE,
    attempt_index BIGINT NOT NULL CHECK (attempt_index >= 1),
    epoch         BIGINT NOT NULL CHECK (epoch >= 1),
    lease_id      UUID   NOT NULL,
    namespace     TEXT   NOT NULL,
    instance_id   TEXT   NOT NULL,
    state         TEXT   NOT NULL DEFAULT 'running'
        CHECK (state IN ('running', 'completed', 'failed', 'reclaimed')),
    claimed_at_ms BIGINT NOT NULL,
    expires_at_ms BIGINT NOT NULL,
    ended_at_ms   BIGINT,
    PRIMARY KEY (execution_id, attempt_index),
    CONSTRAINT attempts_lease_id UNIQUE (lease_id),
    UNIQUE (execution_id, epoch),
    CHECK ((state = 'running') = (ended_at_ms IS NULL))
);

-- At most one running attempt per execution.
CREATE UNIQUE INDEX attempts_running ON attempts (execution_id) WHERE state = 'running';

-- Expired-lease listing and reclaim, across namespaces and within one.
CREATE INDEX attempts_expiry ON attempts (expires_at_ms, execution_id) WHERE state = 'running';
CREATE INDEX attempts_namespace_expiry ON attempts (namespace, expires_at_ms, execution_id)
    WHERE state = 'running';

-- A dead or swept worker's running leases.
CREATE INDEX attempts_holder ON attempts (namespace, instance_id, expires_at_ms) WHERE state = 'running';
