-- Worker registry: one row per live (or lapsed, not yet swept) worker instance,
-- keyed by (namespace, instance_id), plus an append-only audit log of events.
-- Times are Unix milliseconds (BIGINT); durations are milliseconds.

CREATE TABLE workers (
    namespace         TEXT   NOT NULL CHECK (namespace <> ''),
    instance_id       TEXT   NOT NULL CHECK (instance_id <> ''),
    worker_id         TEXT   NOT NULL CHECK (worker_id <> ''),
    -- Sorted, duplicate-free arrays of identifiers.
    lanes             TEXT[] NOT NULL,
    capabilities      TEXT[] NOT NULL,
    last_heartbeat_ms BIGINT NOT NULL,
    ttl_ms            BIGINT NOT NULL CHECK (ttl_ms BETWEEN 1 AND 2592000000),
    registered_at_ms  BIGINT NOT NULL,
    CONSTRAINT workers_pkey PRIMARY KEY (namespace, instance_id)
) WITH (fillfactor = 80); -- room for HOT updates: heartbeats rewrite every row often

-- The sweep finds lapsed rows by their expiry (alive iff now < expiry). The
-- heartbeat column is in this expression index, so a heartbeat is not a HOT
-- update; the sweep needs it to stay a seek, and the fill factor keeps the new
-- version on its page.
CREATE INDEX workers_expiry ON workers ((last_heartbeat_ms + ttl_ms));

CREATE TABLE worker_events (
    seq         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    namespace   TEXT   NOT NULL,
    instance_id TEXT   NOT NULL,
    kind        TEXT   NOT NULL CHECK (kind IN ('registered', 'heartbeat', 'marked_dead', 'ttl_swept')),
    at_ms       BIGINT NOT NULL,
    reason      TEXT   NOT NULL DEFAULT '' CHECK (octet_length(reason) <= 256)
);

CREATE INDEX worker_events_namespace ON worker_events (namespace, seq);
CREATE INDEX worker_events_instance ON worker_events (instance_id, seq);
CREATE INDEX worker_events_at ON worker_events (at_ms);
