-- Leases: claim, renew, complete, fail, release, revoke, list expired and
-- reclaim. The current lease lives on its execution's row (and stays there
-- as its last when it ends); an attempt that ends without completing is
-- recorded once in attempts. Every call that presents a lease is fenced in
-- the statement that writes: same lease id and epoch, running, unexpired,
-- not revoked. The lease id is what makes a fence safe after a failover: an
-- asynchronous standby promoted without the primary's last commits issues
-- those epochs again, but a lease id (a fresh UUIDv7 per claim) never is.
-- The fence is one CASE, which no partial index of running executions can
-- serve: the row is always found by its id (given state = 'running' as a
-- plain condition, the planner walked every entry of executions_expiry,
-- dead ones included, comparing ids).

-- name: ExecutionClaim :one
-- ExecutionClaim gives an alive worker up to cardinality(@lease_ids) of the
-- best claimable executions, in one statement, and says what it found.
--   * Scheduled executions of the namespace that are due (RunAt <= @now, not
--     yet ready) come first: when there are any (and @promote), it claims
--     nothing and says due, so that the caller makes them ready
--     (ExecutionPromoteDue) and claims again, and the best of all claimable
--     work wins.
--   * Else, when one of the worker's lanes has limits or groups (flow), it
--     claims nothing and says flow: the caller claims through FlowClaim.
--   * Else it reads the ready index of the worker's one lane (a worker of
--     several lanes: the namespace's, lanes filtered) best first (a ready
--     execution is claimable whatever its RunAt says by this worker's
--     clock: whoever made it ready found it due, and work created
--     claimable at once must be so for every worker, however far their
--     clocks lie apart), locking
--     FOR UPDATE SKIP LOCKED as it goes, so it locks exactly what it claims
--     and never reports no work while unlocked work is left (concurrent
--     claimers never take the same execution nor wait for each other).
--   * It locks the worker row FOR KEY SHARE (a concurrent MarkWorkerDead or
--     sweep, which deletes it, waits, so no lease outlives its worker;
--     heartbeats do not) and starts each execution under a new lease,
--     attempt and epoch. SKIP LOCKED there too: a worker whose row is being
--     deleted (or swept) claims nothing, and a claim never waits for any
--     lock, so it is never part of a deadlock.
--   * It takes at most @max_bytes of payloads (always the first execution):
--     PostgreSQL's arrays and messages stop at 1 GiB; bounded says it left
--     out executions it found for that (claim again).
--   * When it claims fewer than asked, next_run_at_ms is the earliest RunAt
--     after @now among the scheduled executions of the worker's lanes (0:
--     none), when the worker should look again at the latest.
-- When there is nothing to claim it locks nothing, writes nothing and takes
-- no transaction id. Each lease is bound (@bound) or of its own, and
-- expires at @expires_at_ms or at its deadline (claim + the execution's
-- timeout) when that comes first. One row: alive (false: the worker is
-- not alive, nothing claimed), due, next_run_at_ms, the claimed leases
-- as arrays, best first (metadata '': none; deadline 0: none), and the
-- worker's expiry (that of the leases bound to it).
WITH w AS (
    SELECT wk.lanes, wk.capabilities, wk.last_heartbeat_ms + wk.ttl_ms AS expires_at_ms FROM workers AS wk
    WHERE wk.namespace = @namespace AND wk.instance_id = @instance_id
      AND wk.last_heartbeat_ms + wk.ttl_ms > @now::bigint
), due AS (
    SELECT s.id FROM executions AS s
    WHERE @promote::boolean AND s.namespace = @namespace AND s.state = 'waiting' AND NOT s.ready
      AND s.run_at_ms <= @now::bigint
    ORDER BY s.run_at_ms
    LIMIT 1
), flow AS (
    SELECT 1 AS flow FROM lane_limits AS m
    WHERE NOT EXISTS (SELECT 1 FROM due) AND m.namespace = @namespace AND m.lane = ANY(CAST((SELECT w.lanes FROM w) AS text[]))
    UNION ALL
    SELECT 1 FROM lane_turns AS g
    WHERE NOT EXISTS (SELECT 1 FROM due) AND g.namespace = @namespace AND g.lane = ANY(CAST((SELECT w.lanes FROM w) AS text[]))
    LIMIT 1
), one_lane AS (
    SELECT e.id, e.priority, e.run_at_ms, octet_length(e.payload) AS payload_bytes FROM executions AS e
    WHERE NOT EXISTS (SELECT 1 FROM due) AND NOT EXISTS (SELECT 1 FROM flow) AND (SELECT cardinality(w.lanes) FROM w) = 1
      AND e.namespace = @namespace AND e.lane = (SELECT w.lanes[1] FROM w) AND e.group_key = ''
      AND e.state = 'waiting' AND e.ready
      AND e.required_capabilities <@ (SELECT w.capabilities FROM w)
    ORDER BY e.priority DESC, e.run_at_ms, e.id
    LIMIT cardinality(@lease_ids::uuid[])
    FOR UPDATE OF e SKIP LOCKED
), many_lanes AS (
    SELECT e.id, e.priority, e.run_at_ms, octet_length(e.payload) AS payload_bytes FROM executions AS e
    WHERE NOT EXISTS (SELECT 1 FROM due) AND NOT EXISTS (SELECT 1 FROM flow) AND (SELECT cardinality(w.lanes) FROM w) > 1
      AND e.namespace = @namespace AND e.lane = ANY(CAST((SELECT w.lanes FROM w) AS text[]))
      AND e.state = 'waiting' AND e.ready
      AND e.required_capabilities <@ (SELECT w.capabilities FROM w)
    ORDER BY e.priority DESC, e.run_at_ms, e.id
    LIMIT cardinality(@lease_ids::uuid[])
    FOR UPDATE OF e SKIP LOCKED
), ranked AS (
    SELECT c.id, row_number() OVER w AS n, sum(c.payload_bytes) OVER w AS bytes
    FROM (SELECT * FROM one_lane UNION ALL SELECT * FROM many_lanes) AS c
    WINDOW w AS (ORDER BY c.priority DESC, c.run_at_ms, c.id)
), candidates AS (
    SELECT r.id, r.n FROM ranked AS r WHERE r.n = 1 OR r.bytes <= @max_bytes::bigint
), holder AS (
    SELECT 1 AS alive FROM workers AS wk
    WHERE wk.namespace = @namespace AND wk.instance_id = @instance_id
      AND wk.last_heartbeat_ms + wk.ttl_ms > @now::bigint
      AND EXISTS (SELECT 1 FROM candidates)
    FOR KEY SHARE OF wk SKIP LOCKED
), started AS (
    UPDATE executions AS x
    SET state = 'running', attempts = x.attempts + 1, epoch = x.epoch + 1,
        lease_id = (@lease_ids::uuid[])[candidates.n], holder = @instance_id,
        claimed_at_ms = @now::bigint, bound = @bind::boolean,
        deadline_ms = CASE WHEN x.timeout_ms > 0 THEN CAST(@now AS bigint) + x.timeout_ms END,
        expires_at_ms = CASE WHEN x.timeout_ms > 0 THEN least(@expires_at_ms::bigint, CAST(@now AS bigint) + x.timeout_ms)
            ELSE @expires_at_ms::bigint END,
        revoked_at_ms = NULL
    FROM candidates
    -- Found by id. The state is checked in a CASE: as a plain condition the
    -- planner could walk the state index's every waiting entry instead,
    -- comparing ids, which it did on a table not yet analyzed.
    WHERE x.id = candidates.id AND CASE WHEN x.state = 'waiting' THEN true ELSE false END
      AND EXISTS (SELECT 1 FROM holder)
    RETURNING x.id, x.attempts, x.epoch, x.lane, x.payload, x.lease_id, x.metadata, x.expires_at_ms,
              coalesce(x.deadline_ms, 0) AS deadline_ms, x.run_at_ms, candidates.n
), short AS (
    SELECT 1 AS short WHERE (SELECT count(*) FROM started) < cardinality(@lease_ids::uuid[])
)
SELECT
    EXISTS (SELECT 1 FROM w) AS alive,
    EXISTS (SELECT 1 FROM due) AS due,
    EXISTS (SELECT 1 FROM flow) AS flow,
    EXISTS (SELECT 1 FROM ranked AS r WHERE r.n > 1 AND r.bytes > @max_bytes::bigint) AS bounded,
    CAST(coalesce((
        SELECT s.run_at_ms FROM executions AS s
        WHERE EXISTS (SELECT 1 FROM short) AND NOT EXISTS (SELECT 1 FROM flow) AND (SELECT cardinality(w.lanes) FROM w) = 1
          AND s.namespace = @namespace AND s.lane = (SELECT w.lanes[1] FROM w)
          AND s.state = 'waiting' AND NOT s.ready AND s.run_at_ms > @now::bigint
        ORDER BY s.run_at_ms
        LIMIT 1
    ), (
        SELECT s.run_at_ms FROM executions AS s
        WHERE EXISTS (SELECT 1 FROM short) AND NOT EXISTS (SELECT 1 FROM flow) AND (SELECT cardinality(w.lanes) FROM w) > 1
          AND s.namespace = @namespace AND s.lane = ANY(CAST((SELECT w.lanes FROM w) AS text[]))
          AND s.state = 'waiting' AND NOT s.ready AND s.run_at_ms > @now::bigint
        ORDER BY s.run_at_ms
        LIMIT 1
    ), 0) AS bigint) AS next_run_at_ms,
    CAST(coalesce(array_agg(started.id ORDER BY started.n), '{}') AS uuid[]) AS ids,
    CAST(coalesce(array_agg(started.attempts ORDER BY started.n), '{}') AS bigint[]) AS attempts,
    CAST(coalesce(array_agg(started.epoch ORDER BY started.n), '{}') AS bigint[]) AS epochs,
    CAST(coalesce(array_agg(started.lane ORDER BY started.n), '{}') AS text[]) AS lanes,
    CAST(coalesce(array_agg(started.payload ORDER BY started.n), '{}') AS bytea[]) AS payloads,
    CAST(coalesce(array_agg(started.lease_id ORDER BY started.n), '{}') AS uuid[]) AS lease_ids,
    CAST(coalesce(array_agg(coalesce(started.metadata, '') ORDER BY started.n), '{}') AS text[]) AS metadata,
    CAST(coalesce(array_agg(started.expires_at_ms ORDER BY started.n), '{}') AS bigint[]) AS expires,
    CAST(coalesce(array_agg(started.deadline_ms ORDER BY started.n), '{}') AS bigint[]) AS deadlines,
    CAST(coalesce(array_agg(started.run_at_ms ORDER BY started.n), '{}') AS bigint[]) AS run_ats,
    CAST(coalesce((SELECT w.expires_at_ms FROM w), 0) AS bigint) AS holder_expires_at_ms
FROM started;

-- name: ExecutionPromoteDue :execrows
-- ExecutionPromoteDue makes up to 1000 of a namespace's due scheduled
-- executions ready, earliest first; rows another session holds are skipped,
-- not waited for (ids collected first: every plan updates them by primary key).
UPDATE executions SET ready = true
WHERE id = ANY (ARRAY(
    SELECT s.id FROM executions AS s
    WHERE s.namespace = @namespace AND s.state = 'waiting' AND NOT s.ready AND s.run_at_ms <= @now::bigint
    ORDER BY s.run_at_ms
    LIMIT 1000
    FOR UPDATE SKIP LOCKED
));

-- name: LeaseRenew :one
-- LeaseRenew extends the current, unexpired, unrevoked lease of its own
-- (not bound) of an execution, never past its deadline, and returns the new
-- expiry.
UPDATE executions SET expires_at_ms = least(@expires_at_ms::bigint, coalesce(deadline_ms, @expires_at_ms::bigint))
WHERE id = @id AND epoch = @epoch AND lease_id = @lease_id::uuid AND NOT bound
  AND CASE WHEN state = 'running' THEN expires_at_ms > @now::bigint AND revoked_at_ms IS NULL ELSE false END
RETURNING expires_at_ms;

-- name: LeaseHolderExpiry :one
-- LeaseHolderExpiry reads when the current, unrevoked bound lease of an
-- execution expires (its holder's expiry, never past its deadline) while its
-- holder is alive at @now; no row when the lease is lost. It writes nothing:
-- a bound lease is kept alive by its holder's heartbeats.
SELECT least(w.last_heartbeat_ms + w.ttl_ms, x.expires_at_ms)::bigint AS expires_at_ms
FROM executions AS x
JOIN workers AS w ON w.namespace = x.namespace AND w.instance_id = x.holder
WHERE x.id = @id AND x.epoch = @epoch AND x.lease_id = @lease_id::uuid
  AND CASE WHEN x.state = 'running' THEN x.bound AND x.expires_at_ms > @now::bigint AND x.revoked_at_ms IS NULL ELSE false END
  AND w.last_heartbeat_ms + w.ttl_ms > @now::bigint;

-- name: LeaseComplete :one
-- LeaseComplete ends the current, unexpired, unrevoked lease and its
-- execution as completed with the result (the lease stays on the row as
-- its last), in one statement fenced in its WHERE; no row when the lease is
-- lost. When its lane has a cap, the namespace's workers are woken (the end
-- frees room for a claim a cap held back).
WITH completed AS (
    UPDATE executions AS x SET state = 'completed', result = @result, finished_at_ms = @now::bigint
    WHERE x.id = @id AND x.epoch = @epoch AND x.lease_id = @lease_id::uuid
      AND CASE WHEN x.state = 'running' THEN x.expires_at_ms > @now::bigint AND x.revoked_at_ms IS NULL
          AND (NOT x.bound OR EXISTS (
              SELECT 1 FROM workers AS w
              WHERE w.namespace = x.namespace AND w.instance_id = x.holder
                AND w.last_heartbeat_ms + w.ttl_ms > @now::bigint))
          ELSE false END
    RETURNING x.id, x.namespace, x.lane
)
SELECT c.id FROM completed AS c
WHERE CASE WHEN EXISTS (
    SELECT 1 FROM lane_limits AS m
    WHERE m.namespace = c.namespace AND m.lane = c.lane AND (m.max_running > 0 OR m.max_running_per_group > 0)
) THEN roster_wake(c.namespace) = 1 ELSE true END;

-- name: LeaseCompleteMany :many
-- LeaseCompleteMany completes many leases in one statement, each fenced as
-- LeaseComplete is (its lease id and epoch, running, unexpired, unrevoked)
-- and given the result of its own, and returns the leases it
-- completed; the others were lost. Wakes the namespace's workers as
-- LeaseComplete does, once per namespace.
WITH input AS (
    SELECT unnest(@ids::uuid[]) AS id,
           unnest(@epochs::bigint[]) AS epoch,
           unnest(@lease_ids::uuid[]) AS lease_id,
           unnest(@results::bytea[]) AS result
), completed AS (
    UPDATE executions AS x SET state = 'completed', result = input.result, finished_at_ms = @now::bigint
    FROM input
    WHERE x.id = input.id AND x.epoch = input.epoch AND x.lease_id = input.lease_id
      AND CASE WHEN x.state = 'running' THEN x.expires_at_ms > @now::bigint AND x.revoked_at_ms IS NULL
          AND (NOT x.bound OR EXISTS (
              SELECT 1 FROM workers AS w
              WHERE w.namespace = x.namespace AND w.instance_id = x.holder
                AND w.last_heartbeat_ms + w.ttl_ms > @now::bigint))
          ELSE false END
    RETURNING x.id, x.epoch, x.lease_id, x.namespace, x.lane
), woken AS (
    SELECT count(roster_wake(w.namespace)) AS n FROM (
        SELECT DISTINCT c.namespace FROM completed AS c
        WHERE EXISTS (
            SELECT 1 FROM lane_limits AS m
            WHERE m.namespace = c.namespace AND m.lane = c.lane AND (m.max_running > 0 OR m.max_running_per_group > 0)
        )
    ) AS w
)
SELECT c.id, c.epoch, c.lease_id FROM completed AS c CROSS JOIN woken;

-- name: LeaseFail :one
-- LeaseFail ends the current, unexpired, unrevoked lease as failed and
-- records the attempt; the execution waits again while attempts remain
-- (claimable from now plus its backoff: ready at once without one; its
-- namespace's workers are woken), else ends failed, with the reason. One
-- statement; no row when the lease is lost.
WITH failed AS (
    UPDATE executions AS x
    SET state = CASE WHEN x.attempts < x.max_attempts THEN 'waiting' ELSE 'failed' END,
        run_at_ms = CASE WHEN x.attempts < x.max_attempts THEN CAST(@now AS bigint) + CASE
            WHEN x.retry_backoff_ms = 0 THEN 0
            WHEN x.attempts - 1 >= 27 THEN 86400000
            ELSE least(x.retry_backoff_ms << (x.attempts - 1)::int, 86400000) END
          ELSE x.run_at_ms END,
        ready = x.retry_backoff_ms = 0,
        finished_at_ms = CASE WHEN x.attempts < x.max_attempts THEN NULL ELSE CAST(@now AS bigint) END,
        last_error = @last_error
    WHERE x.id = @id AND x.epoch = @epoch AND x.lease_id = @lease_id::uuid
      AND CASE WHEN x.state = 'running' THEN x.expires_at_ms > @now::bigint AND x.revoked_at_ms IS NULL
          AND (NOT x.bound OR EXISTS (
              SELECT 1 FROM workers AS w
              WHERE w.namespace = x.namespace AND w.instance_id = x.holder
                AND w.last_heartbeat_ms + w.ttl_ms > @now::bigint))
          ELSE false END
    RETURNING x.id, x.state, x.attempts, x.epoch, x.lease_id, x.namespace, x.lane, x.holder, x.claimed_at_ms, x.expires_at_ms
), recorded AS (
    INSERT INTO attempts (
        execution_id, attempt_index, epoch, lease_id, namespace, instance_id, state,
        claimed_at_ms, expires_at_ms, ended_at_ms, error
    )
    SELECT f.id, f.attempts, f.epoch, f.lease_id, f.namespace, f.holder, 'failed',
           f.claimed_at_ms, f.expires_at_ms, @now::bigint, @last_error
    FROM failed AS f
)
SELECT failed.id FROM failed
WHERE CASE WHEN failed.state = 'waiting' OR EXISTS (
    SELECT 1 FROM lane_limits AS m
    WHERE m.namespace = failed.namespace AND m.lane = failed.lane AND (m.max_running > 0 OR m.max_running_per_group > 0)
) THEN roster_wake(failed.namespace) = 1 ELSE true END;

-- name: LeaseRelease :one
-- LeaseRelease ends the current, unexpired, unrevoked lease without using up
-- its attempt: the execution waits again, ready as when it was claimed, with
-- its RunAt and one attempt fewer, its epoch unchanged (the released lease
-- stays fenced), the attempt recorded as released (under the index it was
-- claimed with), and the namespace's workers are woken. No row when the
-- lease is lost.
WITH released AS (
    UPDATE executions AS x
    SET state = 'waiting', attempts = x.attempts - 1, ready = true
    WHERE x.id = @id AND x.epoch = @epoch AND x.lease_id = @lease_id::uuid
      AND CASE WHEN x.state = 'running' THEN x.expires_at_ms > @now::bigint AND x.revoked_at_ms IS NULL
          AND (NOT x.bound OR EXISTS (
              SELECT 1 FROM workers AS w
              WHERE w.namespace = x.namespace AND w.instance_id = x.holder
                AND w.last_heartbeat_ms + w.ttl_ms > @now::bigint))
          ELSE false END
    RETURNING x.id, x.namespace, x.attempts, x.epoch, x.lease_id, x.holder, x.claimed_at_ms, x.expires_at_ms
), recorded AS (
    INSERT INTO attempts (
        execution_id, attempt_index, epoch, lease_id, namespace, instance_id, state,
        claimed_at_ms, expires_at_ms, ended_at_ms
    )
    SELECT r.id, r.attempts + 1, r.epoch, r.lease_id, r.namespace, r.holder, 'released',
           r.claimed_at_ms, r.expires_at_ms, @now::bigint
    FROM released AS r
)
SELECT released.id FROM released WHERE roster_wake(released.namespace) = 1;

-- name: LeaseSnooze :one
-- LeaseSnooze ends the current, unexpired, unrevoked lease as LeaseRelease
-- does, the execution waiting until @run_at (ready when it is due at @now,
-- and then the namespace's workers are woken; else scheduled), the attempt
-- recorded as snoozed. No row when the lease is lost.
WITH snoozed AS (
    UPDATE executions AS x
    SET state = 'waiting', attempts = x.attempts - 1, run_at_ms = @run_at::bigint,
        ready = @run_at::bigint <= @now::bigint
    WHERE x.id = @id AND x.epoch = @epoch AND x.lease_id = @lease_id::uuid
      AND CASE WHEN x.state = 'running' THEN x.expires_at_ms > @now::bigint AND x.revoked_at_ms IS NULL
          AND (NOT x.bound OR EXISTS (
              SELECT 1 FROM workers AS w
              WHERE w.namespace = x.namespace AND w.instance_id = x.holder
                AND w.last_heartbeat_ms + w.ttl_ms > @now::bigint))
          ELSE false END
    RETURNING x.id, x.namespace, x.attempts, x.epoch, x.lease_id, x.holder, x.claimed_at_ms, x.expires_at_ms, x.ready
), recorded AS (
    INSERT INTO attempts (
        execution_id, attempt_index, epoch, lease_id, namespace, instance_id, state,
        claimed_at_ms, expires_at_ms, ended_at_ms
    )
    SELECT s.id, s.attempts + 1, s.epoch, s.lease_id, s.namespace, s.holder, 'snoozed',
           s.claimed_at_ms, s.expires_at_ms, @now::bigint
    FROM snoozed AS s
)
SELECT snoozed.id FROM snoozed WHERE CASE WHEN snoozed.ready THEN roster_wake(snoozed.namespace) = 1 ELSE true END;

-- name: LeaseFindHeld :many
-- LeaseFindHeld reads which of @lease_ids one worker holds now, not revoked
-- (a claim whose outcome was unknown, looked up; the leases whose handlers
-- run, checked after a change).
SELECT id, epoch, lease_id FROM executions
WHERE namespace = @namespace AND holder = @holder::text AND state = 'running'
  AND revoked_at_ms IS NULL AND lease_id = ANY(@lease_ids::uuid[]);

-- name: LeaseGetOutcome :one
-- LeaseGetOutcome reads how a lease ended when its holder's own outcome
-- ended it: 'completed' (its execution completed under it), 'failed' or
-- 'snoozed' (its attempt was recorded so); no row otherwise (lost, or still
-- running). For an outcome whose write was retried after an unknown result:
-- the earlier try may have committed it.
SELECT CAST('completed' AS text) AS outcome FROM executions AS x
WHERE x.id = @id AND x.lease_id = @lease_id::uuid AND x.epoch = @epoch AND x.state = 'completed'
UNION ALL
SELECT a.state FROM attempts AS a
WHERE a.execution_id = @id AND a.epoch = @epoch AND a.lease_id = @lease_id::uuid
  AND a.state IN ('failed', 'snoozed')
LIMIT 1;

-- name: WorkerNextRunAt :one
-- WorkerNextRunAt reads, for an alive worker, the earliest RunAt after @now
-- among the scheduled executions of its lanes (0: none); no row when the
-- worker is not alive.
SELECT CAST(coalesce((
    SELECT s.run_at_ms FROM executions AS s
    WHERE cardinality(wk.lanes) = 1 AND s.namespace = wk.namespace AND s.lane = wk.lanes[1]
      AND s.state = 'waiting' AND NOT s.ready AND s.run_at_ms > @now::bigint
    ORDER BY s.run_at_ms
    LIMIT 1
), (
    SELECT s.run_at_ms FROM executions AS s
    WHERE cardinality(wk.lanes) > 1 AND s.namespace = wk.namespace AND s.lane = ANY(wk.lanes)
      AND s.state = 'waiting' AND NOT s.ready AND s.run_at_ms > @now::bigint
    ORDER BY s.run_at_ms
    LIMIT 1
), 0) AS bigint) AS next_run_at_ms
FROM workers AS wk
WHERE wk.namespace = @namespace AND wk.instance_id = @instance_id
  AND wk.last_heartbeat_ms + wk.ttl_ms > @now::bigint;

-- name: LeaseRevokeHeldBy :exec
-- LeaseRevokeHeldBy ends for good, at @now, every running lease of the given
-- (namespace, holder) pairs: the leases expire (and can be reclaimed) and no
-- later call renews, completes or fails them; their holders hear of it
-- (roster_lost, once per namespace).
WITH revoked AS (
    UPDATE executions
    SET expires_at_ms = least(expires_at_ms, @now::bigint), revoked_at_ms = @now::bigint
    WHERE state = 'running' AND revoked_at_ms IS NULL
      AND (namespace, holder) IN (
          SELECT unnest(@namespaces::text[]), unnest(@holders::text[])
      )
    RETURNING namespace
)
SELECT count(roster_lost(n.namespace)) FROM (SELECT DISTINCT namespace FROM revoked) AS n;

-- name: LeaseRevokeLapsedBound :execrows
-- LeaseRevokeLapsedBound ends for good, at @now, up to @batch_size bound
-- leases whose holder's registration lapsed (and was not yet swept), each
-- expiring when its holder did (or at its deadline, when that came first),
-- so that a reclaim finds them (their holders hear of it: roster_lost);
-- leases another session holds are skipped,
-- not waited for. It walks the lapsed workers by expiry (workers_expiry)
-- and, for each, its running leases by holder (executions_holder), never
-- the running work: the lateral subquery (kept apart by OFFSET 0) and the
-- order by expiry hold the plan to that nested loop, which a generic plan's
-- estimate of the lapsed workers (a third of them) would otherwise turn
-- into a hash join over every running execution.
WITH lapsed AS (
    SELECT x.id
    FROM workers AS w
    CROSS JOIN LATERAL (
        SELECT e.id FROM executions AS e
        WHERE e.namespace = w.namespace AND e.holder = w.instance_id AND e.state = 'running'
          AND e.bound AND e.revoked_at_ms IS NULL
        OFFSET 0
        FOR UPDATE SKIP LOCKED
    ) AS x
    WHERE w.last_heartbeat_ms + w.ttl_ms <= @now::bigint
    ORDER BY w.last_heartbeat_ms + w.ttl_ms
    LIMIT @batch_size
)
UPDATE executions AS x
SET expires_at_ms = least(x.expires_at_ms, (
        SELECT w.last_heartbeat_ms + w.ttl_ms FROM workers AS w
        WHERE w.namespace = x.namespace AND w.instance_id = x.holder)),
    revoked_at_ms = @now::bigint
-- By primary key whatever the plan's estimate of the lapsed leases.
WHERE x.id = ANY (ARRAY(SELECT l.id FROM lapsed AS l)) AND x.state = 'running' AND x.revoked_at_ms IS NULL
  AND roster_lost(x.namespace) = 1;

-- name: LeaseRevokeBoundOfLapsed :exec
-- LeaseRevokeBoundOfLapsed ends for good, at @now, the bound leases of one
-- holder whose registration lapsed, each expiring when its holder did: run
-- before a register takes the lapsed row over, so that no lease of the old
-- registration lives on in the new one.
UPDATE executions AS x
SET expires_at_ms = least(x.expires_at_ms, w.last_heartbeat_ms + w.ttl_ms), revoked_at_ms = @now::bigint
FROM workers AS w
WHERE w.namespace = @namespace AND w.instance_id = @instance_id::text
  AND w.last_heartbeat_ms + w.ttl_ms <= @now::bigint
  AND x.namespace = w.namespace AND x.holder = w.instance_id AND x.state = 'running'
  AND x.bound AND x.revoked_at_ms IS NULL;

-- name: LeaseListExpired :many
-- LeaseListExpired pages the running leases expired by @as_of, by (expiry,
-- execution id), of one namespace ("" = every namespace): those whose own
-- expiry passed (from executions_expiry) and the bound ones whose holder
-- lapsed first (from the lapsed workers, probing executions_holder for
-- each: a lateral subquery, as in LeaseRevokeLapsedBound), each once, at the
-- earlier of the two.
SELECT l.id, l.lease_id, l.attempts, l.epoch, l.namespace, l.holder, l.expires_at_ms
FROM (
    SELECT e.id, e.lease_id, e.attempts, e.epoch, e.namespace, e.holder, e.expires_at_ms
    FROM executions AS e
    WHERE e.state = 'running' AND e.expires_at_ms <= @as_of::bigint
      AND (@namespace::text = '' OR e.namespace = @namespace)
      AND (e.expires_at_ms, e.id) > (@after_expires_at_ms::bigint, @after_id::uuid)
      AND NOT (e.bound AND e.revoked_at_ms IS NULL AND EXISTS (
          SELECT 1 FROM workers AS h
          WHERE h.namespace = e.namespace AND h.instance_id = e.holder
            AND h.last_heartbeat_ms + h.ttl_ms < e.expires_at_ms
      ))
    UNION ALL
    (SELECT e.id, e.lease_id, e.attempts, e.epoch, e.namespace, e.holder, w.last_heartbeat_ms + w.ttl_ms
    FROM workers AS w
    CROSS JOIN LATERAL (
        SELECT b.id, b.lease_id, b.attempts, b.epoch, b.namespace, b.holder, b.expires_at_ms FROM executions AS b
        WHERE b.namespace = w.namespace AND b.holder = w.instance_id AND b.state = 'running'
          AND b.bound AND b.revoked_at_ms IS NULL
        OFFSET 0
    ) AS e
    WHERE w.last_heartbeat_ms + w.ttl_ms <= @as_of::bigint
      AND (@namespace::text = '' OR w.namespace = @namespace)
      AND w.last_heartbeat_ms + w.ttl_ms < e.expires_at_ms
      AND (w.last_heartbeat_ms + w.ttl_ms, e.id) > (@after_expires_at_ms::bigint, @after_id::uuid)
    ORDER BY w.last_heartbeat_ms + w.ttl_ms, e.id)
) AS l
ORDER BY l.expires_at_ms, l.id
LIMIT @max_rows;

-- name: LeaseReclaimBatch :many
-- LeaseReclaimBatch ends up to @batch_size expired leases, soonest expiry
-- first (leases another reclaimer holds are skipped, not waited for): each
-- execution waits again while attempts remain (claimable from now plus its
-- backoff; its namespace's workers are woken), else ends failed; either way
-- it counts the reclaim, with LastError "timed out" when the lease ended at
-- its deadline, else "lease expired", and the attempt is recorded as
-- reclaimed with that error, ended now (or, when MarkWorkerDead, a sweep or
-- its holder's lapse revoked it before, at its lease's end).
WITH expired AS (
    SELECT r.id FROM executions AS r
    WHERE r.state = 'running' AND r.expires_at_ms <= @now::bigint
    ORDER BY r.expires_at_ms, r.id
    LIMIT @batch_size
    FOR UPDATE SKIP LOCKED
), requeued AS (
    UPDATE executions AS x
    SET state = CASE WHEN x.attempts < x.max_attempts THEN 'waiting' ELSE 'failed' END,
        run_at_ms = CASE WHEN x.attempts < x.max_attempts THEN CAST(@now AS bigint) + CASE
            WHEN x.retry_backoff_ms = 0 THEN 0
            WHEN x.attempts - 1 >= 27 THEN 86400000
            ELSE least(x.retry_backoff_ms << (x.attempts - 1)::int, 86400000) END
          ELSE x.run_at_ms END,
        ready = x.retry_backoff_ms = 0,
        finished_at_ms = CASE WHEN x.attempts < x.max_attempts THEN NULL ELSE CAST(@now AS bigint) END,
        reclaim_count = x.reclaim_count + 1,
        last_error = CASE WHEN x.deadline_ms IS NOT NULL AND x.expires_at_ms >= x.deadline_ms THEN 'timed out' ELSE 'lease expired' END
    -- By primary key whatever the plan's estimate of the expired leases (a
    -- join with the CTE walked every execution under a generic plan).
    WHERE x.id = ANY (ARRAY(SELECT e.id FROM expired AS e))
    RETURNING x.id, x.state, x.attempts, x.epoch, x.lease_id, x.namespace, x.holder, x.claimed_at_ms,
              x.expires_at_ms, x.revoked_at_ms, x.last_error,
              CASE WHEN x.state = 'waiting' OR EXISTS (
                  SELECT 1 FROM lane_limits AS m
                  WHERE m.namespace = x.namespace AND m.lane = x.lane AND (m.max_running > 0 OR m.max_running_per_group > 0)
              ) THEN roster_wake(x.namespace) END AS woken,
              roster_lost(x.namespace) AS lost
), recorded AS (
    INSERT INTO attempts (
        execution_id, attempt_index, epoch, lease_id, namespace, instance_id, state,
        claimed_at_ms, expires_at_ms, ended_at_ms, revoked_at_ms, error
    )
    SELECT r.id, r.attempts, r.epoch, r.lease_id, r.namespace, r.holder, 'reclaimed',
           r.claimed_at_ms, r.expires_at_ms,
           CASE WHEN r.revoked_at_ms IS NOT NULL THEN greatest(r.claimed_at_ms, least(r.expires_at_ms, @now::bigint))
                ELSE @now::bigint END,
           r.revoked_at_ms, r.last_error
    FROM requeued AS r
)
SELECT requeued.id FROM requeued;

-- name: LeaseLockHolders :exec
-- LeaseLockHolders takes, shared and in key order, the advisory lock of each
-- worker holding one of the running leases of @ids (its worker lock): a
-- settle takes it before it touches any of their executions, as
-- MarkWorkerDead (WorkerLock) and the sweep take it, exclusively, before
-- they delete a worker and revoke its leases, so the two never wait for
-- each other in a cycle (see the lock order at the top of executions.sql).
-- An advisory lock writes nothing: no row lock, no WAL, no MultiXact
-- beside the heartbeats.
SELECT pg_advisory_xact_lock_shared(hashtext(coalesce(current_schema(), '') || chr(31) || h.namespace), hashtext(h.holder))
FROM (
    SELECT DISTINCT x.namespace, x.holder FROM executions AS x
    WHERE x.id = ANY(@ids::uuid[]) AND x.state = 'running'
    ORDER BY x.namespace, x.holder
) AS h;

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
SELECT x.epoch, x.attempts, x.holder::text,
       (CASE WHEN x.state = 'running' AND x.revoked_at_ms IS NOT NULL THEN 'reclaimed' ELSE x.state END)::text,
       x.claimed_at_ms::bigint,
       (CASE WHEN x.state = 'running' AND x.revoked_at_ms IS NOT NULL THEN greatest(x.claimed_at_ms, x.expires_at_ms)
             ELSE coalesce(x.finished_at_ms, 0) END)::bigint,
       (CASE WHEN x.state <> 'running' OR x.revoked_at_ms IS NULL THEN ''
             WHEN x.deadline_ms IS NOT NULL AND x.expires_at_ms >= x.deadline_ms THEN 'timed out'
             ELSE 'lease expired' END)::text
FROM executions AS x
WHERE x.id = @id AND x.state IN ('running', 'completed') AND x.lease_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM attempts AS h WHERE h.execution_id = x.id AND h.epoch = x.epoch)
ORDER BY 1;
