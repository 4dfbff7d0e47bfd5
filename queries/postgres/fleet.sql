-- Fleet features: unique executions, redrive, the maintenance leader and
-- schedules.

-- name: ExecutionInsertUnique :many
-- ExecutionInsertUnique creates one waiting execution holding a unique key,
-- unless a live execution of its namespace holds the key (no row then).
-- Wakes the namespace's workers when it inserted. A concurrent insert of the
-- same key waits for the other's transaction, then does nothing.
WITH inserted AS (
    INSERT INTO executions (
        id, namespace, lane, priority, payload, required_capabilities, max_attempts, created_at_ms,
        run_at_ms, retry_backoff_ms, ready, unique_key, group_key, metadata, timeout_ms
    ) VALUES (
        @id, @namespace, @lane, @priority, @payload, @required_capabilities, @max_attempts, @created_at_ms,
        @run_at_ms, @retry_backoff_ms, @ready, @unique_key, @group_key, @metadata, @timeout_ms
    )
    ON CONFLICT (namespace, unique_key) WHERE unique_key IS NOT NULL AND state IN ('waiting', 'running') DO NOTHING
    RETURNING namespace
)
SELECT roster_wake(inserted.namespace) FROM inserted;

-- name: ExecutionFindLiveByKey :one
-- ExecutionFindLiveByKey reads the waiting or running execution of a
-- namespace that holds a unique key.
SELECT id FROM executions
WHERE namespace = @namespace AND unique_key = @unique_key AND state IN ('waiting', 'running');

-- name: ExecutionKeyGet :one
-- ExecutionKeyGet reads the execution a unique key is still held for (its
-- UniqueFor has not ended).
SELECT execution_id FROM execution_keys
WHERE namespace = @namespace AND unique_key = @unique_key AND until_ms > @now::bigint;

-- name: ExecutionKeyPut :execrows
-- ExecutionKeyPut holds a unique key for an execution until @until_ms,
-- unless another execution's hold of it has not ended at @now (no row then).
INSERT INTO execution_keys (namespace, unique_key, execution_id, until_ms)
VALUES (@namespace, @unique_key, @execution_id, @until_ms)
ON CONFLICT (namespace, unique_key) DO UPDATE SET execution_id = excluded.execution_id, until_ms = excluded.until_ms
WHERE execution_keys.until_ms <= @now::bigint OR execution_keys.execution_id = excluded.execution_id;

-- name: ExecutionKeyLock :exec
-- ExecutionKeyLock takes, in lock order, the transaction advisory lock of
-- each (namespace, unique key) of the arrays, so that the creates of one
-- key run one at a time: each statement after it (a fresh snapshot under
-- READ COMMITTED) sees every create of its keys that committed before. The
-- one-key form (a bigint), apart from the two-key worker locks; the schema
-- is part of the key, since advisory locks are the database's, so that
-- roster's schemas in one database never wait for each other's creates.
SELECT pg_advisory_xact_lock(k.lock_key)
FROM (
    SELECT DISTINCT hashtextextended(coalesce(current_schema(), '') || chr(31) || i.namespace || chr(31) || i.unique_key, 0) AS lock_key
    FROM (SELECT unnest(@namespaces::text[]) AS namespace, unnest(@unique_keys::text[]) AS unique_key) AS i
    WHERE i.unique_key <> ''
    ORDER BY lock_key
) AS k;

-- name: ExecutionKeyPruneBatch :execrows
-- ExecutionKeyPruneBatch deletes up to @batch_size unique keys whose hold
-- ended before @before.
DELETE FROM execution_keys AS d
USING (
    SELECT k.namespace, k.unique_key FROM execution_keys AS k
    WHERE k.until_ms < @before::bigint
    ORDER BY k.until_ms
    LIMIT @batch_size
    FOR UPDATE SKIP LOCKED
) AS k
WHERE d.namespace = k.namespace AND d.unique_key = k.unique_key;

-- name: ExecutionRetry :one
-- ExecutionRetry puts a failed or cancelled execution back to waiting at
-- @run_at, granting one more attempt when none is left; no row when it is
-- absent or in another state.
-- Wakes the namespace's workers.
WITH retried AS (
    UPDATE executions
    SET state = 'waiting', run_at_ms = @run_at::bigint, ready = @ready::boolean,
        max_attempts = CASE WHEN attempts >= max_attempts THEN attempts + 1 ELSE max_attempts END,
        finished_at_ms = NULL
    WHERE id = @id AND state IN ('failed', 'cancelled')
    RETURNING namespace
)
SELECT roster_wake(retried.namespace) FROM retried;

-- name: LeaderTake :one
-- LeaderTake takes or renews a leadership lease by compare-and-set: the
-- holder keeps its epoch while its lease holds; anyone takes a lapsed lease
-- under the next epoch. No row when another holder's lease holds.
INSERT INTO leaders (name, holder, epoch, expires_at_ms)
VALUES (@name, @holder, 1, @expires_at_ms)
ON CONFLICT (name) DO UPDATE SET
    epoch = CASE WHEN leaders.holder = excluded.holder AND leaders.epoch = @epoch::bigint
                      AND leaders.expires_at_ms > @now::bigint
                 THEN leaders.epoch ELSE leaders.epoch + 1 END,
    holder = excluded.holder,
    expires_at_ms = excluded.expires_at_ms
WHERE leaders.expires_at_ms <= @now::bigint
   OR (leaders.holder = excluded.holder AND leaders.epoch = @epoch::bigint)
RETURNING epoch;

-- name: LeaderResign :exec
-- LeaderResign ends a holder's lease of its epoch at once.
UPDATE leaders SET expires_at_ms = @now::bigint
WHERE name = @name AND holder = @holder AND epoch = @epoch AND expires_at_ms > @now::bigint;

-- name: LeaderGet :one
-- LeaderGet reads a leadership lease.
SELECT holder, epoch, expires_at_ms FROM leaders WHERE name = @name;

-- name: SchedulePut :exec
-- SchedulePut creates or replaces a schedule (a replaced one keeps its next
-- run while its timing is unchanged and it was not paused), and notifies
-- the schedules' key (chr(29)) so that the leader looks at its next run.
WITH put AS (
INSERT INTO schedules (
    namespace, name, every_ms, cron, lane, priority, required_capabilities, max_attempts,
    retry_backoff_ms, paused, next_run_at_ms, updated_at_ms, payload, timeout_ms
) VALUES (
    @namespace, @name, @every_ms, @cron, @lane, @priority, @required_capabilities, @max_attempts,
    @retry_backoff_ms, @paused, @next_run_at_ms, @updated_at_ms, @payload, @timeout_ms
)
ON CONFLICT (namespace, name) DO UPDATE SET
    every_ms = excluded.every_ms, cron = excluded.cron, lane = excluded.lane,
    priority = excluded.priority, required_capabilities = excluded.required_capabilities,
    max_attempts = excluded.max_attempts, retry_backoff_ms = excluded.retry_backoff_ms,
    paused = excluded.paused,
    -- The same timing, not resumed from paused: the next run stays (a due
    -- period still runs); else it starts over from now.
    next_run_at_ms = CASE WHEN schedules.every_ms IS NOT DISTINCT FROM excluded.every_ms AND schedules.cron IS NOT DISTINCT FROM excluded.cron
                               AND NOT schedules.paused
                          THEN schedules.next_run_at_ms ELSE excluded.next_run_at_ms END,
    updated_at_ms = excluded.updated_at_ms, payload = excluded.payload, timeout_ms = excluded.timeout_ms
RETURNING 1
)
SELECT roster_wake(chr(29)) FROM put;

-- name: ScheduleDelete :execrows
-- ScheduleDelete removes a schedule, and notifies the schedules' key
-- (chr(29)) so that the leader looks at its next run.
WITH gone AS (
    DELETE FROM schedules WHERE namespace = @namespace AND name = @name
    RETURNING 1
)
SELECT roster_wake(chr(29)) FROM gone;

-- name: ScheduleList :many
-- ScheduleList reads the schedules of a namespace ('' = every namespace) by
-- (namespace, name), with the state of each one's last run.
SELECT sqlc.embed(s), coalesce(x.state, '')::text AS last_state
FROM schedules AS s
LEFT JOIN executions AS x ON x.id = s.last_execution_id
WHERE @namespace::text = '' OR s.namespace = @namespace
ORDER BY s.namespace, s.name;

-- name: ScheduleListDue :many
-- ScheduleListDue reads up to @max_rows schedules not paused whose next
-- period has begun, in (next run, namespace, name) order after the given
-- one: a page of a walk that visits each due schedule once, whether or not
-- it could run.
SELECT * FROM schedules
WHERE NOT paused AND next_run_at_ms <= @now::bigint AND next_run_at_ms >= @after_ms::bigint
  AND (next_run_at_ms, namespace, name) > (@after_ms::bigint, @after_namespace::text, @after_name::text)
ORDER BY next_run_at_ms, namespace, name
LIMIT @max_rows;

-- name: ScheduleAdvance :execrows
-- ScheduleAdvance moves a schedule from the period it ran (@from_ms, by
-- compare-and-set) to its next one and records the run's execution.
UPDATE schedules SET next_run_at_ms = @next_run_at_ms, last_execution_id = @last_execution_id
WHERE namespace = @namespace AND name = @name AND next_run_at_ms = @from_ms AND NOT paused;

-- name: LeaderHolds :one
-- LeaderHolds reads whether holder still holds the leadership lease name
-- under epoch (no other instance took it since), and keeps the lease row
-- share-locked until the transaction ends: the fence of every write of the
-- leader's maintenance, run last in the same transaction, so that no
-- takeover (an UPDATE of the row, which gives a new epoch) commits between
-- the check and the write's commit. The expiry is not the fence: a lease
-- that lapsed with nobody taking it over leaves no other leader to write
-- beside this one, so a run longer than a term still gets done.
SELECT count(*) FROM (
    SELECT 1 FROM leaders
    WHERE name = @name AND holder = @holder AND epoch = @epoch
    FOR SHARE
) AS held;

-- name: ExecutionInsertManyUnique :many
-- ExecutionInsertManyUnique creates a batch some of whose items hold unique
-- keys (each key at most once in the batch), in one statement, run after
-- ExecutionKeyLock took the batch's keys (its snapshot then holds every
-- create of them that committed): an item whose key is held (by a live
-- execution, or a key whose UniqueFor has not ended at the item's creation)
-- gets the holder's id; the others are inserted (a keyed insert that meets
-- a concurrent redrive of an execution of its key waits for it, then does
-- nothing, and gets the nil id: the caller looks again), their UniqueFor
-- holds recorded (never over a hold that has not ended: kept is false for
-- an item whose hold could not be recorded, and the caller rolls back), and
-- each namespace's workers woken once. One row per item, in input order.
WITH input AS (
    SELECT unnest(@ords::integer[]) AS ord, unnest(@ids::uuid[]) AS id, unnest(@namespaces::text[]) AS namespace,
           unnest(@lanes::text[]) AS lane, unnest(@priorities::bigint[]) AS priority,
           unnest(@payloads::bytea[]) AS payload, unnest(@capabilities::text[]) AS caps,
           unnest(@max_attempts::bigint[]) AS max_attempts, unnest(@run_at_ms::bigint[]) AS run_at_ms,
           unnest(@retry_backoff_ms::bigint[]) AS retry_backoff_ms, unnest(@ready::boolean[]) AS ready,
           unnest(@created_at_ms::bigint[]) AS created_at_ms, unnest(@unique_keys::text[]) AS unique_key,
           unnest(@until_ms::bigint[]) AS until_ms, unnest(@metadata::text[]) AS metadata,
           unnest(@group_keys::text[]) AS group_key, unnest(@timeouts_ms::bigint[]) AS timeout_ms
), held AS (
    SELECT i.ord, coalesce(
        (SELECT x.id FROM executions AS x
         WHERE x.namespace = i.namespace AND x.unique_key = i.unique_key AND x.state IN ('waiting', 'running')),
        (SELECT k.execution_id FROM execution_keys AS k
         WHERE k.namespace = i.namespace AND k.unique_key = i.unique_key AND k.until_ms > i.created_at_ms)
    ) AS holder
    FROM input AS i
    WHERE i.unique_key <> ''
), inserted AS (
    INSERT INTO executions (
        id, namespace, lane, priority, payload, required_capabilities, max_attempts, created_at_ms,
        run_at_ms, retry_backoff_ms, ready, unique_key, group_key, metadata, timeout_ms
    )
    SELECT i.id, i.namespace, i.lane, i.priority, i.payload,
           CASE WHEN i.caps = '' THEN '{}'::text[] ELSE string_to_array(i.caps, chr(31)) END,
           i.max_attempts, i.created_at_ms, i.run_at_ms, i.retry_backoff_ms, i.ready, nullif(i.unique_key, ''),
           i.group_key, nullif(i.metadata, ''), i.timeout_ms
    FROM input AS i
    WHERE NOT EXISTS (SELECT 1 FROM held AS h WHERE h.ord = i.ord AND h.holder IS NOT NULL)
    ON CONFLICT (namespace, unique_key) WHERE unique_key IS NOT NULL AND state IN ('waiting', 'running') DO NOTHING
    RETURNING id, namespace
), kept AS (
    INSERT INTO execution_keys (namespace, unique_key, execution_id, until_ms)
    SELECT i.namespace, i.unique_key, i.id, i.until_ms
    FROM input AS i JOIN inserted AS n ON n.id = i.id
    WHERE i.unique_key <> '' AND i.until_ms > 0
    ON CONFLICT (namespace, unique_key) DO UPDATE SET execution_id = excluded.execution_id, until_ms = excluded.until_ms
    WHERE execution_keys.until_ms <= (SELECT c.created_at_ms FROM input AS c WHERE c.id = excluded.execution_id)
    RETURNING execution_id
), woken AS (
    SELECT count(roster_wake(w.namespace)) AS n FROM (SELECT DISTINCT namespace FROM inserted) AS w
)
SELECT i.ord, coalesce(h.holder, n.id, '00000000-0000-0000-0000-000000000000'::uuid)::uuid AS id,
       CAST(n.id IS NULL OR i.unique_key = '' OR i.until_ms = 0 OR k.execution_id IS NOT NULL AS boolean) AS kept
FROM input AS i
LEFT JOIN held AS h ON h.ord = i.ord
LEFT JOIN inserted AS n ON n.id = i.id
LEFT JOIN kept AS k ON k.execution_id = i.id
CROSS JOIN woken
ORDER BY i.ord;
