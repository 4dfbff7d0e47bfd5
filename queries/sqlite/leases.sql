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
-- capabilities, its first and last lane (equal: it serves one lane) and its
-- expiry (that of the leases bound to it).
SELECT w.capabilities, CAST(w.last_heartbeat_ms + w.ttl_ms AS INTEGER) AS expires_at_ms,
       CAST(coalesce((SELECT min(l.lane) FROM worker_lanes AS l
                      WHERE l.namespace = w.namespace AND l.instance_id = w.instance_id), '') AS TEXT) AS first_lane,
       CAST(coalesce((SELECT max(l.lane) FROM worker_lanes AS l
                      WHERE l.namespace = w.namespace AND l.instance_id = w.instance_id), '') AS TEXT) AS last_lane
FROM workers AS w
WHERE w.namespace = @namespace AND w.instance_id = @instance_id
  AND w.last_heartbeat_ms + w.ttl_ms > @now;

-- name: WorkerGetClaimPlan :one
-- WorkerGetClaimPlan reads, for a claim under the write lock, what
-- WorkerGetClaimer reads of an alive worker, whether its namespace has
-- scheduled executions that are due but not ready (ExecutionDueExists), and
-- whether one of its lanes has limits or groups (LaneFlowExists): one
-- statement where a busy worker's every claim ran three.
SELECT w.capabilities, CAST(w.last_heartbeat_ms + w.ttl_ms AS INTEGER) AS expires_at_ms,
       CAST(coalesce((SELECT min(l.lane) FROM worker_lanes AS l
                      WHERE l.namespace = w.namespace AND l.instance_id = w.instance_id), '') AS TEXT) AS first_lane,
       CAST(coalesce((SELECT max(l.lane) FROM worker_lanes AS l
                      WHERE l.namespace = w.namespace AND l.instance_id = w.instance_id), '') AS TEXT) AS last_lane,
       EXISTS (
           SELECT 1 FROM executions AS s
           WHERE s.namespace = w.namespace AND s.state = 'waiting' AND s.ready = 0 AND s.run_at_ms <= @now
       ) AS due,
       EXISTS (
           SELECT 1 FROM worker_lanes AS l
           WHERE l.namespace = w.namespace AND l.instance_id = w.instance_id
             AND (EXISTS (SELECT 1 FROM lane_limits AS m WHERE m.namespace = l.namespace AND m.lane = l.lane)
                  OR EXISTS (SELECT 1 FROM lane_turns AS t WHERE t.namespace = l.namespace AND t.lane = l.lane))
       ) AS flow
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
-- work created claimable at once is so for every process. It reads the
-- lane's own ready index in its order: by priority, group, RunAt and id,
-- where a lane without groups (one claimed here) has one group, ''. (Without
-- INDEXED BY SQLite may read the namespace's ready index and step over
-- other lanes' work; with the group fixed in the WHERE, it sorts.)
SELECT e.id, e.priority, e.run_at_ms, CAST(length(e.payload) AS INTEGER) AS payload_bytes
FROM executions AS e INDEXED BY executions_ready
WHERE e.namespace = @namespace AND e.lane = @lane AND e.state = 'waiting' AND e.ready = 1
  AND (e.required_capabilities = '[]' OR NOT EXISTS (
      SELECT 1 FROM json_each(e.required_capabilities) AS r
      WHERE r.value NOT IN (SELECT c.value FROM json_each(CAST(@capabilities AS TEXT)) AS c)
  ))
ORDER BY e.priority DESC, e.group_key, e.run_at_ms, e.id
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
-- attempt and epoch, bound or of its own, expiring at @expires_at_ms or at
-- its deadline (claim + timeout) when that comes first.
UPDATE executions
SET state = 'running', attempts = attempts + 1, epoch = epoch + 1,
    lease_id = CAST(@lease_id AS TEXT), holder = CAST(@holder AS TEXT), claimed_at_ms = CAST(@now AS INTEGER),
    bound = CAST(@bound AS INTEGER),
    deadline_ms = CASE WHEN timeout_ms > 0 THEN CAST(@now AS INTEGER) + timeout_ms END,
    expires_at_ms = CASE WHEN timeout_ms > 0
        THEN min(CAST(@expires_at_ms AS INTEGER), CAST(@now AS INTEGER) + timeout_ms)
        ELSE CAST(@expires_at_ms AS INTEGER) END,
    revoked_at_ms = NULL
WHERE id = @id AND state = 'waiting'
RETURNING attempts, epoch, lane, payload, metadata, expires_at_ms, deadline_ms, run_at_ms;

-- name: ExecutionStartMany :many
-- ExecutionStartMany is ExecutionStart for several executions in one
-- statement: @leases is a JSON object of the new lease id by execution id.
-- It returns each execution started, with its lease id, in no order.
UPDATE executions
SET state = 'running', attempts = attempts + 1, epoch = epoch + 1,
    lease_id = json_extract(CAST(@leases AS TEXT), '$."' || id || '"'),
    holder = CAST(@holder AS TEXT), claimed_at_ms = CAST(@now AS INTEGER),
    bound = CAST(@bound AS INTEGER),
    deadline_ms = CASE WHEN timeout_ms > 0 THEN CAST(@now AS INTEGER) + timeout_ms END,
    expires_at_ms = CASE WHEN timeout_ms > 0
        THEN min(CAST(@expires_at_ms AS INTEGER), CAST(@now AS INTEGER) + timeout_ms)
        ELSE CAST(@expires_at_ms AS INTEGER) END,
    revoked_at_ms = NULL
WHERE id IN (SELECT j.key FROM json_each(CAST(@leases AS TEXT)) AS j) AND state = 'waiting'
RETURNING id, lease_id, attempts, epoch, lane, payload, metadata, expires_at_ms, deadline_ms, run_at_ms;

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
-- LeaseRenew extends the current, unexpired, unrevoked lease of its own
-- (not bound) of an execution, never past its deadline, and returns the new
-- expiry.
UPDATE executions SET expires_at_ms = min(CAST(@expires_at_ms AS INTEGER), coalesce(deadline_ms, CAST(@expires_at_ms AS INTEGER)))
WHERE id = @id AND epoch = @epoch AND lease_id = CAST(@lease_id AS TEXT) AND state = 'running' AND bound = 0
  AND expires_at_ms > CAST(@now AS INTEGER) AND revoked_at_ms IS NULL
RETURNING expires_at_ms;

-- name: LeaseHolderExpiry :one
-- LeaseHolderExpiry reads when the current, unrevoked bound lease of an
-- execution expires (its holder's expiry, never past its deadline) while its
-- holder is alive at @now; no row when the lease is lost. It writes nothing:
-- a bound lease is kept alive by its holder's heartbeats.
SELECT CAST(min(w.last_heartbeat_ms + w.ttl_ms, x.expires_at_ms) AS INTEGER) AS expires_at_ms
FROM executions AS x
JOIN workers AS w ON w.namespace = x.namespace AND w.instance_id = x.holder
WHERE x.id = @id AND x.epoch = @epoch AND x.lease_id = CAST(@lease_id AS TEXT) AND x.state = 'running'
  AND x.bound = 1 AND x.expires_at_ms > CAST(@now AS INTEGER) AND x.revoked_at_ms IS NULL
  AND w.last_heartbeat_ms + w.ttl_ms > CAST(@now AS INTEGER);

-- name: LeaseComplete :one
-- LeaseComplete ends the current, unexpired, unrevoked lease and its
-- execution as completed with the result (the lease stays on the row as its
-- last).
UPDATE executions SET state = 'completed', result = @result, finished_at_ms = CAST(@now AS INTEGER)
WHERE id = @id AND epoch = @epoch AND lease_id = CAST(@lease_id AS TEXT) AND state = 'running'
  AND expires_at_ms > CAST(@now AS INTEGER) AND revoked_at_ms IS NULL
  AND (bound = 0 OR EXISTS (
      SELECT 1 FROM workers AS w
      WHERE w.namespace = executions.namespace AND w.instance_id = executions.holder
        AND w.last_heartbeat_ms + w.ttl_ms > CAST(@now AS INTEGER)
  ))
RETURNING id;

-- name: LeaseCompleteBatch :many
-- LeaseCompleteBatch is LeaseComplete for several leases in one statement:
-- @leases is a JSON array of [execution id, epoch, lease id], @results a
-- JSON object of each result in hex by "execution id:epoch:lease id"
-- (absent: none). It returns the leases it completed, in no order.
UPDATE executions SET state = 'completed', finished_at_ms = CAST(@now AS INTEGER),
    result = unhex(json_extract(CAST(@results AS TEXT), '$."' || id || ':' || epoch || ':' || lease_id || '"'))
WHERE id IN (SELECT json_extract(j.value, '$[0]') FROM json_each(CAST(@leases AS TEXT)) AS j)
  AND (id, epoch, lease_id) IN (
      SELECT json_extract(j.value, '$[0]'), json_extract(j.value, '$[1]'), json_extract(j.value, '$[2]')
      FROM json_each(CAST(@leases AS TEXT)) AS j
  )
  AND state = 'running' AND expires_at_ms > CAST(@now AS INTEGER) AND revoked_at_ms IS NULL
  AND (bound = 0 OR EXISTS (
      SELECT 1 FROM workers AS w
      WHERE w.namespace = executions.namespace AND w.instance_id = executions.holder
        AND w.last_heartbeat_ms + w.ttl_ms > CAST(@now AS INTEGER)
  ))
RETURNING id, epoch, lease_id;

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
  AND expires_at_ms > CAST(@now AS INTEGER) AND revoked_at_ms IS NULL
  AND (bound = 0 OR EXISTS (
      SELECT 1 FROM workers AS w
      WHERE w.namespace = executions.namespace AND w.instance_id = executions.holder
        AND w.last_heartbeat_ms + w.ttl_ms > CAST(@now AS INTEGER)
  ))
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
  AND (bound = 0 OR EXISTS (
      SELECT 1 FROM workers AS w
      WHERE w.namespace = executions.namespace AND w.instance_id = executions.holder
        AND w.last_heartbeat_ms + w.ttl_ms > CAST(@now AS INTEGER)
  ))
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
  AND (bound = 0 OR EXISTS (
      SELECT 1 FROM workers AS w
      WHERE w.namespace = executions.namespace AND w.instance_id = executions.holder
        AND w.last_heartbeat_ms + w.ttl_ms > CAST(@now AS INTEGER)
  ))
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
-- cancelled with the reason (nothing when it is not running); one whose
-- lease MarkWorkerDead, a sweep or its holder's lapse revoked before had
-- ended then: it is recorded lost, as it was listed.
INSERT INTO attempts (
    execution_id, epoch, attempt_index, lease_id, namespace, instance_id, state,
    claimed_at_ms, expires_at_ms, ended_at_ms, revoked_at_ms, error
)
SELECT x.id, x.epoch, x.attempts, x.lease_id, x.namespace, x.holder,
       CASE WHEN x.revoked_at_ms IS NULL THEN 'cancelled' ELSE 'reclaimed' END,
       x.claimed_at_ms, x.expires_at_ms,
       CASE WHEN x.revoked_at_ms IS NULL THEN CAST(@now AS INTEGER)
            ELSE max(x.claimed_at_ms, min(x.expires_at_ms, CAST(@now AS INTEGER))) END,
       x.revoked_at_ms,
       CASE WHEN x.revoked_at_ms IS NULL THEN CAST(@reason AS TEXT)
            WHEN x.deadline_ms IS NOT NULL AND x.expires_at_ms >= x.deadline_ms THEN 'timed out'
            ELSE 'lease expired' END
FROM executions AS x
WHERE x.id = @id AND x.state = 'running';

-- name: LeaseFindHeld :many
-- LeaseFindHeld reads which leases of a JSON array of lease ids one worker
-- holds now, not revoked (a claim whose outcome was unknown, looked up; the
-- leases whose handlers run, checked after a change).
SELECT id, epoch, lease_id FROM executions INDEXED BY executions_holder
WHERE namespace = @namespace AND holder = CAST(@holder AS TEXT) AND state = 'running'
  AND revoked_at_ms IS NULL
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
UPDATE executions INDEXED BY executions_holder
SET expires_at_ms = min(expires_at_ms, CAST(@now AS INTEGER)), revoked_at_ms = CAST(@now AS INTEGER)
WHERE state = 'running' AND revoked_at_ms IS NULL
  AND (namespace, holder) IN (
      SELECT json_extract(j.value, '$[0]'), json_extract(j.value, '$[1]')
      FROM json_each(CAST(@holders AS TEXT)) AS j
  );

-- name: LeaseRevokeLapsedBound :execrows
-- LeaseRevokeLapsedBound ends for good, at @now, up to @batch_size bound
-- leases whose holder's registration lapsed (and was not yet swept), each
-- expiring when its holder did (or at its deadline, when that came first),
-- so that a reclaim finds them. It walks the lapsed workers by expiry and
-- their running leases by holder, never the running work.
UPDATE executions
SET expires_at_ms = min(expires_at_ms, (
        SELECT w.last_heartbeat_ms + w.ttl_ms FROM workers AS w
        WHERE w.namespace = executions.namespace AND w.instance_id = executions.holder)),
    revoked_at_ms = CAST(@now AS INTEGER)
WHERE id IN (
    SELECT x.id FROM workers AS w INDEXED BY workers_expiry
    JOIN executions AS x INDEXED BY executions_holder
      ON x.namespace = w.namespace AND x.holder = w.instance_id AND x.state = 'running'
    WHERE w.last_heartbeat_ms + w.ttl_ms <= @now
      AND x.bound = 1 AND x.revoked_at_ms IS NULL
    LIMIT @batch_size
);

-- name: LeaseRevokeBoundOfLapsed :exec
-- LeaseRevokeBoundOfLapsed ends for good, at @now, the bound leases of one
-- holder whose registration lapsed, each expiring when its holder did: run
-- before a register takes the lapsed row over, so that no lease of the old
-- registration lives on in the new one.
UPDATE executions INDEXED BY executions_holder
SET expires_at_ms = min(expires_at_ms, (
        SELECT w.last_heartbeat_ms + w.ttl_ms FROM workers AS w
        WHERE w.namespace = executions.namespace AND w.instance_id = executions.holder)),
    revoked_at_ms = CAST(@now AS INTEGER)
WHERE namespace = @namespace AND holder = CAST(@instance_id AS TEXT) AND state = 'running'
  AND bound = 1 AND revoked_at_ms IS NULL
  AND EXISTS (
      SELECT 1 FROM workers AS w
      WHERE w.namespace = @namespace AND w.instance_id = CAST(@instance_id AS TEXT)
        AND w.last_heartbeat_ms + w.ttl_ms <= @now
  );

-- name: LeaseListExpired :many
-- LeaseListExpired pages the running leases expired by @as_of, by (expiry,
-- execution id), of one namespace ("" = every namespace): those whose own
-- expiry passed (from executions_expiry) and the bound ones whose holder
-- lapsed first (from the lapsed workers, probing executions_holder), each
-- once, at the earlier of the two.
SELECT x.id, x.lease_id, x.attempts, x.epoch, x.namespace, x.holder, x.expires_at_ms
FROM (
    SELECT e.id, e.lease_id, e.attempts, e.epoch, e.namespace, e.holder, e.expires_at_ms
    FROM executions AS e INDEXED BY executions_expiry
    WHERE e.state = 'running' AND e.expires_at_ms <= CAST(@as_of AS INTEGER)
      AND (CAST(@namespace AS TEXT) = '' OR e.namespace = @namespace)
      AND (e.expires_at_ms, e.id) > (CAST(@after_expires_at_ms AS INTEGER), CAST(@after_id AS TEXT))
      AND NOT (e.bound = 1 AND e.revoked_at_ms IS NULL AND EXISTS (
          SELECT 1 FROM workers AS h
          WHERE h.namespace = e.namespace AND h.instance_id = e.holder
            AND h.last_heartbeat_ms + h.ttl_ms < e.expires_at_ms
      ))
    UNION ALL
    SELECT e.id, e.lease_id, e.attempts, e.epoch, e.namespace, e.holder,
           CAST(w.last_heartbeat_ms + w.ttl_ms AS INTEGER)
    FROM workers AS w INDEXED BY workers_expiry
    JOIN executions AS e INDEXED BY executions_holder
      ON e.namespace = w.namespace AND e.holder = w.instance_id AND e.state = 'running'
    WHERE w.last_heartbeat_ms + w.ttl_ms <= @as_of
      AND (CAST(@namespace AS TEXT) = '' OR w.namespace = @namespace)
      AND e.bound = 1 AND e.revoked_at_ms IS NULL
      AND w.last_heartbeat_ms + w.ttl_ms < e.expires_at_ms
      AND (w.last_heartbeat_ms + w.ttl_ms, e.id) > (CAST(@after_expires_at_ms AS INTEGER), CAST(@after_id AS TEXT))
) AS x
ORDER BY x.expires_at_ms, x.id
LIMIT @limit;

-- name: LeaseReclaimBatch :many
-- LeaseReclaimBatch ends up to @batch_size expired leases, soonest expiry
-- first: each execution waits again while attempts remain (claimable from
-- now plus its backoff), else ends failed; either way it counts the reclaim,
-- with LastError "timed out" when the lease ended at its deadline, else
-- "lease expired". It returns the leases to record.
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
    last_error = CASE WHEN deadline_ms IS NOT NULL AND expires_at_ms >= deadline_ms THEN 'timed out' ELSE 'lease expired' END
WHERE state = 'running' AND id IN (
    SELECT r.id FROM executions AS r INDEXED BY executions_expiry
    WHERE r.state = 'running' AND r.expires_at_ms <= @now
    ORDER BY r.expires_at_ms, r.id
    LIMIT @batch_size
)
RETURNING id, attempts, epoch, lease_id, namespace, holder, claimed_at_ms, expires_at_ms, revoked_at_ms, last_error;

-- name: AttemptList :many
-- AttemptList reads an execution's attempts by epoch (its primary key): the
-- recorded ones, then the lease on its row when that is the current attempt
-- (running; lost once MarkWorkerDead, a sweep or its holder's lapse revoked
-- it, ended at its expiry) or the last, completed one (a completion records
-- no row).
SELECT a.epoch, a.attempt_index, a.instance_id, a.state, a.claimed_at_ms, a.ended_at_ms, a.error
FROM attempts AS a
WHERE a.execution_id = @id
UNION ALL
SELECT x.epoch, x.attempts, CAST(x.holder AS TEXT),
       CAST(CASE WHEN x.state = 'running' AND x.revoked_at_ms IS NOT NULL THEN 'reclaimed' ELSE x.state END AS TEXT),
       CAST(x.claimed_at_ms AS INTEGER),
       CAST(CASE WHEN x.state = 'running' AND x.revoked_at_ms IS NOT NULL THEN max(x.claimed_at_ms, x.expires_at_ms)
                 ELSE coalesce(x.finished_at_ms, 0) END AS INTEGER),
       CAST(CASE WHEN x.state <> 'running' OR x.revoked_at_ms IS NULL THEN ''
                 WHEN x.deadline_ms IS NOT NULL AND x.expires_at_ms >= x.deadline_ms THEN 'timed out'
                 ELSE 'lease expired' END AS TEXT)
FROM executions AS x
WHERE x.id = @id AND x.state IN ('running', 'completed') AND x.lease_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM attempts AS h WHERE h.execution_id = x.id AND h.epoch = x.epoch)
ORDER BY 1;
