-- Worker registry: one row per live (or lapsed, not yet swept) worker instance,
-- keyed by (namespace, instance_id), plus an append-only audit log of events.
-- Times are Unix milliseconds; durations are milliseconds.

CREATE TABLE workers (
    namespace         TEXT    NOT NULL CHECK (namespace <> ''),
    instance_id       TEXT    NOT NULL CHECK (instance_id <> ''),
    worker_id         TEXT    NOT NULL CHECK (worker_id <> ''),
    -- Sorted, duplicate-free JSON arrays of strings (never comma-joined).
    lanes             TEXT    NOT NULL CHECK (json_valid(lanes) AND json_type(lanes) = 'array'),
    capabilities      TEXT    NOT NULL CHECK (json_valid(capabilities) AND json_type(capabilities) = 'array'),
    last_heartbeat_ms INTEGER NOT NULL,
    ttl_ms            INTEGER NOT NULL CHECK (ttl_ms BETWEEN 1 AND 2592000000),
    registered_at_ms  INTEGER NOT NULL,
    PRIMARY KEY (namespace, instance_id)
) STRICT, WITHOUT ROWID;

-- The sweep finds lapsed rows by their expiry (alive iff now < expiry).
CREATE INDEX workers_expiry ON workers (last_heartbeat_ms + ttl_ms);

CREATE TABLE worker_events (
    -- AUTOINCREMENT: a pruned tail never lets a Seq be handed out twice.
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    namespace   TEXT    NOT NULL,
    instance_id TEXT    NOT NULL,
    kind        TEXT    NOT NULL CHECK (kind IN ('registered', 'heartbeat', 'marked_dead', 'ttl_swept')),
    at_ms       INTEGER NOT NULL,
    reason      TEXT    NOT NULL DEFAULT '' CHECK (length(CAST(reason AS BLOB)) <= 256)
) STRICT;

CREATE INDEX worker_events_namespace ON worker_events (namespace, seq);
CREATE INDEX worker_events_instance ON worker_events (instance_id, seq);
CREATE INDEX worker_events_at ON worker_events (at_ms);
