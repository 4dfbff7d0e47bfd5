-- Worker registry and its audit log. Alive means now < last_heartbeat_ms + ttl_ms.

-- name: WorkerGet :one
-- WorkerGet reads one worker row, alive or lapsed.
SELECT * FROM workers
WHERE namespace = @namespace AND instance_id = @instance_id;

-- name: WorkerGetAlive :one
-- WorkerGetAlive reads one worker row only while its TTL has not lapsed.
SELECT * FROM workers
WHERE namespace = @namespace AND instance_id = @instance_id
  AND last_heartbeat_ms + ttl_ms > @now;

-- name: WorkerRefresh :one
-- WorkerRefresh replaces the fields of a worker alive under the same worker id
-- and returns its RegisteredAt; no row when it is absent, lapsed or held by
-- another worker id (the check is in the statement that writes).
UPDATE workers
SET lanes = @lanes, capabilities = @capabilities, last_heartbeat_ms = @now,
    ttl_ms = @ttl_ms
WHERE namespace = @namespace AND instance_id = @instance_id
  AND worker_id = @worker_id AND last_heartbeat_ms + ttl_ms > @now
RETURNING registered_at_ms;

-- name: WorkerRegister :one
-- WorkerRegister inserts a worker, or takes over a lapsed row of the same key;
-- no row when the key is held by an alive worker (the check is in the statement).
INSERT INTO workers AS w (
    namespace, instance_id, worker_id, lanes, capabilities,
    last_heartbeat_ms, ttl_ms, registered_at_ms
) VALUES (
    @namespace, @instance_id, @worker_id, @lanes, @capabilities,
    @now, @ttl_ms, @now
)
ON CONFLICT (namespace, instance_id) DO UPDATE SET
    worker_id         = excluded.worker_id,
    lanes             = excluded.lanes,
    capabilities      = excluded.capabilities,
    last_heartbeat_ms = excluded.last_heartbeat_ms,
    ttl_ms            = excluded.ttl_ms,
    registered_at_ms  = excluded.registered_at_ms
WHERE w.last_heartbeat_ms + w.ttl_ms <= excluded.last_heartbeat_ms
RETURNING registered_at_ms;

-- name: WorkerHeartbeat :one
-- WorkerHeartbeat moves an alive worker's heartbeat to now, logs a heartbeat
-- event when @log_event is set, and returns its TTL, in one statement.
WITH hb AS (
    UPDATE workers AS w SET last_heartbeat_ms = @now::bigint
    WHERE w.namespace = @namespace AND w.instance_id = @instance_id
      AND w.last_heartbeat_ms + w.ttl_ms > @now::bigint
    RETURNING w.namespace, w.instance_id, w.ttl_ms
), logged AS (
    INSERT INTO worker_events (namespace, instance_id, kind, at_ms, reason)
    SELECT hb.namespace, hb.instance_id, 'heartbeat', @now::bigint, '' FROM hb
    WHERE @log_event::boolean
)
SELECT hb.ttl_ms FROM hb;

-- name: WorkerLock :exec
-- WorkerLock takes one worker's worker lock exclusively (a transaction
-- advisory lock, see LeaseLockHolders): MarkWorkerDead waits for the
-- settles of its leases under way, and no settle starts until it commits.
SELECT pg_advisory_xact_lock(hashtext(coalesce(current_schema(), '') || chr(31) || @namespace::text), hashtext(@instance_id::text));

-- name: WorkerLockShared :exec
-- WorkerLockShared takes one worker's worker lock shared: a settle of that
-- worker's leases (LeaseLockHolders without the lookup, when the settle
-- knows its worker).
SELECT pg_advisory_xact_lock_shared(hashtext(coalesce(current_schema(), '') || chr(31) || @namespace::text), hashtext(@instance_id::text));

-- name: WorkerDelete :execrows
-- WorkerDelete removes one worker row, alive or lapsed.
DELETE FROM workers
WHERE namespace = @namespace AND instance_id = @instance_id;

-- name: WorkerListByNamespace :many
-- WorkerListByNamespace pages one namespace's workers in instance id order.
SELECT * FROM workers
WHERE namespace = @namespace AND instance_id > @after_instance_id
ORDER BY instance_id
LIMIT @max_rows;

-- name: WorkerListAll :many
-- WorkerListAll pages every namespace's workers in (namespace, instance id) order.
SELECT * FROM workers
WHERE (namespace, instance_id) > (@after_namespace::text, @after_instance_id::text)
ORDER BY namespace, instance_id
LIMIT @max_rows;

-- name: WorkerSweepBatch :many
-- WorkerSweepBatch deletes up to @batch_size lapsed workers, soonest expiry
-- first, each under its worker lock taken exclusively (WorkerLock); rows
-- another sweeper is deleting, and workers whose leases a settle is writing
-- now, are skipped, not waited for (the next sweep takes them).
DELETE FROM workers
WHERE (namespace, instance_id) IN (
    SELECT w.namespace, w.instance_id FROM workers AS w
    WHERE w.last_heartbeat_ms + w.ttl_ms <= @now
    ORDER BY w.last_heartbeat_ms + w.ttl_ms
    LIMIT @batch_size
    FOR UPDATE SKIP LOCKED
) AND pg_try_advisory_xact_lock(hashtext(coalesce(current_schema(), '') || chr(31) || namespace), hashtext(instance_id))
RETURNING namespace, instance_id;

-- name: WorkerEventAppend :exec
-- WorkerEventAppend adds one event to the audit log.
INSERT INTO worker_events (namespace, instance_id, kind, at_ms, reason)
VALUES (@namespace, @instance_id, @kind, @at_ms, @reason);

-- name: WorkerEventAppendSwept :exec
-- WorkerEventAppendSwept logs one ttl_swept event per (namespace, instance_id) pair, in order.
INSERT INTO worker_events (namespace, instance_id, kind, at_ms, reason)
SELECT unnest(@namespaces::text[]), unnest(@instance_ids::text[]), 'ttl_swept', @at_ms::bigint, '';

-- name: WorkerEventList :many
-- WorkerEventList tails the audit log of every namespace in Seq order.
SELECT * FROM worker_events
WHERE seq > @after_seq
ORDER BY seq
LIMIT @max_rows;

-- name: WorkerEventListByNamespace :many
-- WorkerEventListByNamespace tails one namespace's audit log in Seq order.
SELECT * FROM worker_events
WHERE namespace = @namespace AND seq > @after_seq
ORDER BY seq
LIMIT @max_rows;

-- name: WorkerEventListByInstance :many
-- WorkerEventListByInstance tails one instance's audit log in Seq order (namespace '' = any).
SELECT * FROM worker_events
WHERE instance_id = @instance_id AND seq > @after_seq
  AND (@namespace::text = '' OR namespace = @namespace)
ORDER BY seq
LIMIT @max_rows;

-- name: WorkerEventPruneBatch :execrows
-- WorkerEventPruneBatch deletes up to @batch_size of the events logged before
-- @before_ms (seqs collected first: every plan deletes them by primary key).
DELETE FROM worker_events
WHERE seq = ANY (ARRAY(
    SELECT e.seq FROM worker_events AS e
    WHERE e.at_ms < @before_ms
    ORDER BY e.at_ms
    LIMIT @batch_size
));

-- name: WorkerEventListLatest :many
-- WorkerEventListLatest reads the newest events of every namespace, newest first.
SELECT * FROM worker_events
ORDER BY seq DESC
LIMIT @max_rows;

-- name: WorkerEventListLatestByNamespace :many
-- WorkerEventListLatestByNamespace reads one namespace's newest events, newest first.
SELECT * FROM worker_events
WHERE namespace = @namespace
ORDER BY seq DESC
LIMIT @max_rows;
