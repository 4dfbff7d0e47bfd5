-- Fleet features: unique executions, redrive, the maintenance leader and
-- schedules.

-- name: ExecutionInsertUnique :execrows
-- ExecutionInsertUnique creates one waiting execution holding a unique key,
-- unless a live execution of its namespace holds the key (no row then).
INSERT INTO executions (
    id, namespace, lane, priority, payload, required_capabilities, max_attempts, created_at_ms,
    run_at_ms, retry_backoff_ms, ready, unique_key, group_key, metadata, timeout_ms
) VALUES (
    @id, @namespace, @lane, @priority, @payload, @required_capabilities, @max_attempts, @created_at_ms,
    @run_at_ms, @retry_backoff_ms, @ready, @unique_key, @group_key, @metadata, @timeout_ms
)
ON CONFLICT (namespace, unique_key) WHERE unique_key IS NOT NULL AND state IN ('waiting', 'running') DO NOTHING;

-- name: ExecutionFindLiveByKey :one
-- ExecutionFindLiveByKey reads the waiting or running execution of a
-- namespace that holds a unique key.
SELECT id FROM executions
WHERE namespace = @namespace AND unique_key = @unique_key AND state IN ('waiting', 'running');

-- name: ExecutionKeyGet :one
-- ExecutionKeyGet reads the execution a unique key is still held for (its
-- UniqueFor has not ended).
SELECT execution_id FROM execution_keys
WHERE namespace = @namespace AND unique_key = @unique_key AND until_ms > CAST(@now AS INTEGER);

-- name: ExecutionKeyPut :execrows
-- ExecutionKeyPut holds a unique key for an execution until @until_ms,
-- unless another execution's hold of it has not ended at @now (no row then).
INSERT INTO execution_keys (namespace, unique_key, execution_id, until_ms)
SELECT @namespace, @unique_key, @execution_id, @until_ms
WHERE NOT EXISTS (
    SELECT 1 FROM execution_keys AS k
    WHERE k.namespace = @namespace AND k.unique_key = @unique_key
      AND k.until_ms > CAST(@now AS INTEGER) AND k.execution_id <> @execution_id
)
ON CONFLICT (namespace, unique_key) DO UPDATE SET execution_id = excluded.execution_id, until_ms = excluded.until_ms;

-- name: ExecutionKeyPruneBatch :execrows
-- ExecutionKeyPruneBatch deletes up to @batch_size unique keys whose hold
-- ended before @before.
DELETE FROM execution_keys
WHERE (namespace, unique_key) IN (
    SELECT k.namespace, k.unique_key FROM execution_keys AS k
    WHERE k.until_ms < CAST(@before AS INTEGER)
    ORDER BY k.until_ms
    LIMIT @batch_size
);

-- name: ExecutionRetry :one
-- ExecutionRetry puts a failed or cancelled execution back to waiting at
-- @run_at, granting one more attempt when none is left; no row when it is
-- absent or in another state.
UPDATE executions
SET state = 'waiting', run_at_ms = CAST(@run_at AS INTEGER), ready = CAST(@ready AS INTEGER),
    max_attempts = CASE WHEN attempts >= max_attempts THEN attempts + 1 ELSE max_attempts END,
    finished_at_ms = NULL
WHERE id = @id AND state IN ('failed', 'cancelled')
RETURNING namespace;

-- name: LeaderTake :one
-- LeaderTake takes or renews an existing leadership lease by compare-and-set:
-- the holder keeps its epoch while its lease holds; anyone takes a lapsed
-- lease under the next epoch. No row when another holder's lease holds (or
-- there is no lease yet: LeaderInsert). (sqlc's SQLite engine does not bind
-- parameters inside an upsert's DO UPDATE, hence two statements.)
UPDATE leaders SET
    epoch = CASE WHEN holder = @holder AND epoch = @epoch AND expires_at_ms > @now
                 THEN epoch ELSE epoch + 1 END,
    holder = @holder,
    expires_at_ms = @expires_at_ms
WHERE name = @name AND (expires_at_ms <= @now OR (holder = @holder AND epoch = @epoch))
RETURNING epoch;

-- name: LeaderInsert :execrows
-- LeaderInsert creates a leadership lease under epoch 1, unless it exists.
INSERT INTO leaders (name, holder, epoch, expires_at_ms) VALUES (@name, @holder, 1, @expires_at_ms)
ON CONFLICT (name) DO NOTHING;

-- name: LeaderResign :exec
-- LeaderResign ends a holder's lease of its epoch at once.
UPDATE leaders SET expires_at_ms = CAST(@now AS INTEGER)
WHERE name = @name AND holder = @holder AND epoch = @epoch AND expires_at_ms > CAST(@now AS INTEGER);

-- name: LeaderGet :one
-- LeaderGet reads a leadership lease.
SELECT holder, epoch, expires_at_ms FROM leaders WHERE name = @name;

-- name: SchedulePut :exec
-- SchedulePut creates or replaces a schedule (a replaced one keeps its next
-- run while its timing is unchanged and it was not paused).
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
    next_run_at_ms = CASE WHEN schedules.every_ms IS excluded.every_ms AND schedules.cron IS excluded.cron
                               AND schedules.paused = 0
                          THEN schedules.next_run_at_ms ELSE excluded.next_run_at_ms END,
    updated_at_ms = excluded.updated_at_ms, payload = excluded.payload, timeout_ms = excluded.timeout_ms;

-- name: ScheduleDelete :execrows
-- ScheduleDelete removes a schedule.
DELETE FROM schedules WHERE namespace = @namespace AND name = @name;

-- name: ScheduleList :many
-- ScheduleList reads the schedules of a namespace ('' = every namespace) by
-- (namespace, name), with the state of each one's last run.
SELECT sqlc.embed(s), CAST(coalesce(x.state, '') AS TEXT) AS last_state
FROM schedules AS s
LEFT JOIN executions AS x ON x.id = s.last_execution_id
WHERE CAST(@namespace AS TEXT) = '' OR s.namespace = @namespace
ORDER BY s.namespace, s.name;

-- name: ScheduleListDue :many
-- ScheduleListDue reads up to @max_rows schedules not paused whose next
-- period has begun, in (next run, namespace, name) order after the given
-- one: a page of a walk that visits each due schedule once, whether or not
-- it could run.
SELECT * FROM schedules
WHERE paused = 0 AND next_run_at_ms <= CAST(@now AS INTEGER) AND next_run_at_ms >= CAST(@after_ms AS INTEGER)
  AND (next_run_at_ms > CAST(@after_ms AS INTEGER)
       OR namespace > CAST(@after_namespace AS TEXT)
       OR (namespace = CAST(@after_namespace AS TEXT) AND name > CAST(@after_name AS TEXT)))
ORDER BY next_run_at_ms, namespace, name
LIMIT @max_rows;

-- name: ScheduleAdvance :execrows
-- ScheduleAdvance moves a schedule from the period it ran (@from_ms, by
-- compare-and-set) to its next one and records the run's execution.
UPDATE schedules SET next_run_at_ms = @next_run_at_ms, last_execution_id = @last_execution_id
WHERE namespace = @namespace AND name = @name AND next_run_at_ms = @from_ms AND paused = 0;

-- name: LeaderHolds :one
-- LeaderHolds reads whether holder still holds the leadership lease name
-- under epoch (no other instance took it since, which gives a new epoch):
-- the fence of every write of the leader's maintenance, run last in the
-- same transaction (the single writer orders it with any takeover). The
-- expiry is not the fence: a lease that lapsed with nobody taking it over
-- leaves no other leader to write beside this one.
SELECT count(*) FROM leaders
WHERE name = @name AND holder = @holder AND epoch = @epoch;
