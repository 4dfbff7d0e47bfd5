-- Claims and leases: claim, renew, complete, fail, release, revoke, list
-- expired and reclaim. The current lease lives on its execution's row (and
-- stays there as its last when it ends); an attempt that ends without
-- completing is recorded once in attempts (AttemptInsert, in the same
-- transaction). Every call that presents a lease is fenced in the statement
-- that writes: same lease id and epoch, running, unexpired, not revoked (an
-- epoch alone could be issued twice by a database restored from a backup
-- that lacks the last claims; a lease id, a fresh UUIDv7 per claim, never is).

-- name: WorkerGetClaimer :one
-- WorkerGetClaimer reads what a claim needs of an alive worker: its
-- capabilities and its first and last lane (equal: it serves one lane).
SELECT w.capabilities,
       CAST(coalesce((SELECT min(l.lane) FROM worker_lanes AS l
                      WHERE l.namespace = w.namespace AND l.instance_id = w.instance_id), '') AS TEXT) AS first_lane,
       CAST(coalesce((SELECT max(l.lane) FROM worker_lanes AS l
                      WHERE l.namespace = w.namespace AND l.instance_id = w.instance_id), '') AS TEXT) AS last_lane
FROM workers AS w
WHERE w.namespace = @namespace AND w.instance_id = @instance_id
  AND w.last_heartbeat_ms + w.ttl_ms > @now;

-- name: ExecutionDueExists :one
-- ExecutionDueExists tells whether a namespace has scheduled executions that
-- are due (RunAt <= @now) but not yet ready.
SELECT EXISTS (
    SELECT 1 FROM executions AS s
    WHERE s.namespace = @namespace AND s.state = 'waiting' AND s.ready = 0 AND s.run_at_ms <= @now
) AS due;

-- name: ExecutionPromoteDue :execrows
-- ExecutionPromoteDue makes up to @batch_size of a namespace's due scheduled
-- executions ready, earliest first.
UPDATE executions SET ready = 1
WHERE id IN (
    SELECT s.id FROM executions AS s
    WHERE s.namespace = @namespace AND s.state = 'waiting' AND s.ready = 0 AND s.run_at_ms <= @now
    ORDER BY s.run_at_ms
    LIMIT @batch_size
);

-- name: ExecutionPickOneLane :many
-- ExecutionPickOneLane finds the @limit best ready executions of one lane
-- (highest priority, earliest RunAt, lowest id) whose required capabilities
-- are all in @capabilities (a JSON array), with the size of each payload
-- (the claim bounds their sum). A ready execution is claimable whatever its
-- RunAt says by the claimer's clock (whoever made it ready found it due):
-- work created claimable at once is so for every process.
SELECT e.id, e.priority, e.run_at_ms, CAST(length(e.payload) AS INTEGER) AS payload_bytes FROM executions AS e
WHERE e.namespace = @namespace AND e.lane = @lane AND e.group_key = '' AND e.state = 'waiting' AND e.ready = 1
  AND (e.required_capabilities = '[]' OR NOT EXISTS (
      SELECT 1 FROM json_each(e.required_capabilities) AS r
      WHERE r.value NOT IN (SELECT c.value FROM json_each(CAST(@capabilities AS TEXT)) AS c)
  ))
ORDER BY e.priority DESC, e.run_at_ms, e.id
LIMIT @limit;

-- name: ExecutionPickManyLanes :many
-- ExecutionPickManyLanes is ExecutionPickOneLane for a worker of several
-- lanes: the namespace's ready executions best first, each lane tested
-- against the worker's lanes with one probe.
SELECT e.id, e.priority, e.run_at_ms, CAST(length(e.payload) AS INTEGER) AS payload_bytes FROM executions AS e
WHERE e.namespace = @namespace AND e.state = 'waiting' AND e.ready = 1
  AND EXISTS (
      SELECT 1 FROM worker_lanes AS l
      WHERE l.namespace = e.namespace AND l.instance_id = @instance_id AND l.lane = e.lane
  )
  AND (e.required_capabilities = '[]' OR NOT EXISTS (
      SELECT 1 FROM json_each(e.required_capabilities) AS r
      WHERE r.value NOT IN (SELECT c.value FROM json_each(CAST(@capabilities AS TEXT)) AS c)
  ))
ORDER BY e.priority DESC, e.run_at_ms, e.id
LIMIT @limit;

-- name: ExecutionStart :one
-- ExecutionStart moves a waiting execution to running under a new lease,
-- attempt and epoch.
UPDATE executions
SET state = 'running', attempts = attempts + 1, epoch = epoch + 1,
    lease_id = CAST(@lease_id AS TEXT), holder = CAST(@holder AS TEXT), claimed_at_ms = CAST(@now AS INTEGER),
    expires_at_ms = CAST(@expires_at_ms AS INTEGER),
    revoked_at_ms = NULL
WHERE id = @id AND state = 'waiting'
RETURNING attempts, epoch, lane, payload, metadata;

-- name: ExecutionNextRunAtOneLane :one
-- ExecutionNextRunAtOneLane finds the earliest RunAt after @now among one
-- lane's scheduled executions (0: none).
SELECT CAST(coalesce(min(s.run_at_ms), 0) AS INTEGER) AS next_run_at_ms FROM executions AS s
WHERE s.namespace = @namespace AND s.lane = @lane AND s.state = 'waiting' AND s.ready = 0
  AND s.run_at_ms > @now;

-- name: ExecutionNextRunAtManyLanes :one
-- ExecutionNextRunAtManyLanes finds the earliest RunAt after @now among the
-- scheduled executions of a worker's lanes (0: none).
SELECT CAST(coalesce((
    SELECT s.run_at_ms FROM executions AS s
    WHERE s.namespace = @namespace AND s.state = 'waiting' AND s.ready = 0 AND s.run_at_ms > @now
      AND EXISTS (
          SELECT 1 FROM worker_lanes AS l
          WHERE l.namespace = s.namespace AND l.instance_id = @instance_id AND l.lane = s.lane
      )
    ORDER BY s.run_at_ms
    LIMIT 1
), 0) AS INTEGER) AS next_run_at_ms;

-- name: LeaseRenew :one
-- LeaseRenew extends the current, unexpired, unrevoked lease of an execution.
UPDATE executions SET expires_at_ms = CAST(@expires_at_ms AS INTEGER)
WHERE id = @id AND epoch = @epoch AND lease_id = CAST(@lease_id AS TEXT) AND state = 'running'
  AND expires_at_ms > CAST(@now AS INTEGER) AND revoked_at_ms IS NULL
RETURNING id;

-- name: LeaseComplete :one
-- LeaseComplete ends the current, unexpired, unrevoked lease and its
-- execution as completed with the result (the lease stays on the row as its
-- last).
UPDATE executions SET state = 'completed', result = @result, finished_at_ms = CAST(@now AS INTEGER)
WHERE id = @id AND epoch = @epoch AND lease_id = CAST(@lease_id AS TEXT) AND state = 'running'
  AND expires_at_ms > @now AND revoked_at_ms IS NULL
RETURNING id;

-- name: LeaseFail :one
-- LeaseFail ends the current, unexpired, unrevoked lease as failed: the
-- execution waits again while attempts remain (claimable from now plus its
-- backoff: ready at once without one), else ends failed, with the reason.
-- It returns the lease to record.
UPDATE executions
SET state = CASE WHEN attempts < max_attempts THEN 'waiting' ELSE 'failed' END,
    run_at_ms = CASE WHEN attempts < max_attempts THEN CAST(@now AS INTEGER) + CASE
        WHEN retry_backoff_ms = 0 THEN 0
        WHEN attempts - 1 >= 27 THEN 86400000
        ELSE min(retry_backoff_ms << (attempts - 1), 86400000) END
      ELSE run_at_ms END,
    ready = retry_backoff_ms = 0,
    finished_at_ms = CASE WHEN attempts < max_attempts THEN NULL ELSE CAST(@now AS INTEGER) END,
    last_error = @last_error
WHERE id = @id AND epoch = @epoch AND lease_id = CAST(@lease_id AS TEXT) AND state = 'running'
  AND expires_at_ms > @now AND revoked_at_ms IS NULL
RETURNING attempts, lease_id, namespace, holder, claimed_at_ms, expires_at_ms;

-- name: LeaseRelease :one
-- LeaseRelease ends the current, unexpired, unrevoked lease without using up
-- its attempt: the execution waits again, ready as when it was claimed, with
-- its RunAt and one attempt fewer, its epoch unchanged (the released lease
-- stays fenced). It returns the lease to record (its attempt index is the
-- one it was claimed under).
UPDATE executions
SET state = 'waiting', attempts = attempts - 1, ready = 1
WHERE id = @id AND epoch = @epoch AND lease_id = CAST(@lease_id AS TEXT) AND state = 'running'
  AND expires_at_ms > CAST(@now AS INTEGER) AND revoked_at_ms IS NULL
RETURNING CAST(attempts + 1 AS INTEGER) AS attempt_index, lease_id, namespace, holder, claimed_at_ms, expires_at_ms;

-- name: LeaseSnooze :one
-- LeaseSnooze ends the current, unexpired, unrevoked lease as LeaseRelease
-- does, the execution waiting until @run_at (ready when it is due at @now,
-- else scheduled). It returns the lease to record.
UPDATE executions
SET state = 'waiting', attempts = attempts - 1, run_at_ms = CAST(@run_at AS INTEGER),
    ready = CAST(@run_at AS INTEGER) <= CAST(@now AS INTEGER)
WHERE id = @id AND epoch = @epoch AND lease_id = CAST(@lease_id AS TEXT) AND state = 'running'
  AND expires_at_ms > CAST(@now AS INTEGER) AND revoked_at_ms IS NULL
RETURNING CAST(attempts + 1 AS INTEGER) AS attempt_index, lease_id, namespace, holder, claimed_at_ms, expires_at_ms;

-- name: AttemptInsert :exec
-- AttemptInsert records an attempt that ended.
INSERT INTO attempts (
    execution_id, epoch, attempt_index, lease_id, namespace, instance_id, state,
    claimed_at_ms, expires_at_ms, ended_at_ms, revoked_at_ms, error
) VALUES (
    @execution_id, @epoch, @attempt_index, @lease_id, @namespace, @instance_id, @state,
    @claimed_at_ms, @expires_at_ms, @ended_at_ms, @revoked_at_ms, @error
);

-- name: AttemptInsertCancelled :exec
-- AttemptInsertCancelled records the attempt of a running execution as
-- cancelled with the reason (nothing when it is not running).
INSERT INTO attempts (
    execution_id, epoch, attempt_index, lease_id, namespace, instance_id, state,
    claimed_at_ms, expires_at_ms, ended_at_ms, revoked_at_ms, error
)
SELECT x.id, x.epoch, x.attempts, x.lease_id, x.namespace, x.holder, 'cancelled',
       x.claimed_at_ms, x.expires_at_ms, CAST(@now AS INTEGER), x.revoked_at_ms, CAST(@reason AS TEXT)
FROM executions AS x
WHERE x.id = @id AND x.state = 'running';

-- name: LeaseFindHeld :many
-- LeaseFindHeld reads which leases of a JSON array of lease ids one worker
-- holds now (a claim whose outcome was unknown, looked up).
SELECT id, epoch, lease_id FROM executions INDEXED BY executions_expiry
WHERE namespace = @namespace AND holder = CAST(@holder AS TEXT) AND state = 'running'
  AND lease_id IN (SELECT j.value FROM json_each(CAST(@lease_ids AS TEXT)) AS j);

-- name: LeaseGetOutcome :one
-- LeaseGetOutcome reads how a lease ended when its holder's own outcome
-- ended it: 'completed' (its execution completed under it), 'failed' or
-- 'snoozed' (its attempt was recorded so); no row otherwise (lost, or still
-- running). For an outcome whose write was retried after an unknown result:
-- the earlier try may have committed it.
SELECT CAST('completed' AS TEXT) AS outcome FROM executions AS x
WHERE x.id = @id AND x.lease_id = CAST(@lease_id AS TEXT) AND x.epoch = @epoch AND x.state = 'completed'
UNION ALL
SELECT a.state FROM attempts AS a
WHERE a.execution_id = @id AND a.epoch = @epoch AND a.lease_id = CAST(@lease_id AS TEXT)
  AND a.state IN ('failed', 'snoozed')
LIMIT 1;

-- name: LeaseRevokeHeldBy :exec
-- LeaseRevokeHeldBy ends for good, at @now, every running lease of each
-- [namespace, holder] pair of a JSON array: the leases expire (and can be
-- reclaimed) and no later call renews, completes or fails them.
UPDATE executions INDEXED BY executions_expiry
SET expires_at_ms = min(expires_at_ms, CAST(@now AS INTEGER)), revoked_at_ms = CAST(@now AS INTEGER)
WHERE state = 'running' AND revoked_at_ms IS NULL
  AND (namespace, holder) IN (
      SELECT json_extract(j.value, '$[0]'), json_extract(j.value, '$[1]')
      FROM json_each(CAST(@holders AS TEXT)) AS j
  );

-- name: LeaseListExpired :many
-- LeaseListExpired pages the running leases expired by @as_of, by (expiry,
-- execution id), of one namespace ("" = every namespace).
SELECT id, lease_id, attempts, epoch, namespace, holder, expires_at_ms
FROM executions INDEXED BY executions_expiry
WHERE state = 'running' AND expires_at_ms <= CAST(@as_of AS INTEGER)
  AND (CAST(@namespace AS TEXT) = '' OR namespace = @namespace)
  AND (expires_at_ms, id) > (CAST(@after_expires_at_ms AS INTEGER), CAST(@after_id AS TEXT))
ORDER BY expires_at_ms, id
LIMIT @limit;

-- name: LeaseReclaimBatch :many
-- LeaseReclaimBatch ends up to @batch_size expired leases, soonest expiry
-- first: each execution waits again while attempts remain (claimable from
-- now plus its backoff), else ends failed; either way it counts the reclaim,
-- with LastError "lease expired". It returns the leases to record.
UPDATE executions
SET state = CASE WHEN attempts < max_attempts THEN 'waiting' ELSE 'failed' END,
    run_at_ms = CASE WHEN attempts < max_attempts THEN CAST(@now AS INTEGER) + CASE
        WHEN retry_backoff_ms = 0 THEN 0
        WHEN attempts - 1 >= 27 THEN 86400000
        ELSE min(retry_backoff_ms << (attempts - 1), 86400000) END
      ELSE run_at_ms END,
    ready = retry_backoff_ms = 0,
    finished_at_ms = CASE WHEN attempts < max_attempts THEN NULL ELSE CAST(@now AS INTEGER) END,
    reclaim_count = reclaim_count + 1,
    last_error = 'lease expired'
WHERE state = 'running' AND id IN (
    SELECT r.id FROM executions AS r INDEXED BY executions_expiry
    WHERE r.state = 'running' AND r.expires_at_ms <= @now
    ORDER BY r.expires_at_ms, r.id
    LIMIT @batch_size
)
RETURNING id, attempts, epoch, lease_id, namespace, holder, claimed_at_ms, expires_at_ms, revoked_at_ms;

-- name: AttemptList :many
-- AttemptList reads an execution's attempts by epoch (its primary key): the
-- recorded ones, then the lease on its row when that is the current attempt
-- (running) or the last, completed one (a completion records no row).
SELECT a.epoch, a.attempt_index, a.instance_id, a.state, a.claimed_at_ms, a.ended_at_ms, a.error
FROM attempts AS a
WHERE a.execution_id = @id
UNION ALL
SELECT x.epoch, x.attempts, CAST(x.holder AS TEXT), x.state, CAST(x.claimed_at_ms AS INTEGER),
       CAST(coalesce(x.finished_at_ms, 0) AS INTEGER), CAST('' AS TEXT)
FROM executions AS x
WHERE x.id = @id AND x.state IN ('running', 'completed') AND x.lease_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM attempts AS h WHERE h.execution_id = x.id AND h.epoch = x.epoch)
ORDER BY 1;
