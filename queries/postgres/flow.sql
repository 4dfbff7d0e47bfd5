-- Flow control: lane limits, the groups of lanes, and the claim of a lane
-- that has either (engine.FlowClaim runs these in one transaction). A claim
-- of such a lane first takes the lane's claim lock (LaneLock), so that the
-- counts it reads (running executions, the rate window, when each group was
-- last served) hold until it commits: no other claim of that lane runs
-- meanwhile, and a settle only lowers them. The lock is held for the claim's
-- few statements, never longer.

-- name: LaneLimitsPut :exec
-- LaneLimitsPut creates or replaces a lane's limits; the rate window's count
-- is kept (replacing limits does not reset a rate) and the namespace's
-- workers are woken (a resumed lane, or a raised cap, may have work).
WITH put AS (
    INSERT INTO lane_limits (namespace, lane, max_running, max_running_per_group, rate, rate_period_ms, paused)
    VALUES (@namespace, @lane, @max_running, @max_running_per_group, @rate, @rate_period_ms, @paused)
    ON CONFLICT (namespace, lane) DO UPDATE
    SET max_running = excluded.max_running, max_running_per_group = excluded.max_running_per_group,
        rate = excluded.rate, rate_period_ms = excluded.rate_period_ms, paused = excluded.paused
    RETURNING namespace
)
SELECT roster_wake(put.namespace) FROM put;

-- name: LaneLimitsList :many
-- LaneLimitsList reads the limits of a namespace's lanes (empty: every
-- namespace), by namespace and lane.
SELECT namespace, lane, max_running, max_running_per_group, rate, rate_period_ms, paused
FROM lane_limits
WHERE @namespace::text = '' OR namespace = @namespace::text
ORDER BY namespace, lane;

-- name: LaneLimitsDelete :one
-- LaneLimitsDelete removes a lane's limits and wakes the namespace's workers
-- (the lane is no longer paused nor capped); no row when it had none.
WITH deleted AS (
    DELETE FROM lane_limits WHERE namespace = @namespace AND lane = @lane
    RETURNING namespace
)
SELECT roster_wake(deleted.namespace) FROM deleted;

-- name: LaneGroupsTouch :exec
-- LaneGroupsTouch records the groups executions are created in (with the
-- empty group of their lane, for executions without one): from then on the
-- lane's groups take turns.
INSERT INTO lane_groups (namespace, lane, group_key)
SELECT DISTINCT g.namespace, g.lane, g.group_key
FROM (SELECT unnest(@namespaces::text[]) AS namespace, unnest(@lanes::text[]) AS lane, unnest(@group_keys::text[]) AS group_key) AS g
ON CONFLICT DO NOTHING;

-- name: WorkerGetFlowClaimer :one
-- WorkerGetFlowClaimer reads an alive worker's lanes and capabilities for a
-- claim of lanes with limits or groups, and which of its lanes have either
-- (in lane order: the claim locks to take), and whether scheduled
-- executions of the namespace are due (to be made ready first). It locks
-- nothing (ExecutionStartMany locks the worker's row when it starts
-- something): a claim that finds nothing takes no transaction id.
SELECT wk.lanes, wk.capabilities,
       CAST(ARRAY(
           SELECT l.lane FROM unnest(wk.lanes) AS l(lane)
           WHERE EXISTS (SELECT 1 FROM lane_limits AS m WHERE m.namespace = wk.namespace AND m.lane = l.lane)
              OR EXISTS (SELECT 1 FROM lane_groups AS g WHERE g.namespace = wk.namespace AND g.lane = l.lane)
           ORDER BY l.lane
       ) AS text[]) AS flow_lanes,
       EXISTS (
           SELECT 1 FROM executions AS s
           WHERE s.namespace = wk.namespace AND s.state = 'waiting' AND NOT s.ready AND s.run_at_ms <= @now::bigint
       ) AS due
FROM workers AS wk
WHERE wk.namespace = @namespace AND wk.instance_id = @instance_id
  AND wk.last_heartbeat_ms + wk.ttl_ms > @now::bigint;

-- name: LaneLock :exec
-- LaneLock takes the claim lock of each lane given, in lane order (so that
-- two claims never wait for each other in a cycle), until the transaction
-- ends: a transaction advisory lock of one bigint key, a key space apart
-- from the worker locks' pairs of integers.
SELECT count(pg_advisory_xact_lock(k.key)) FROM (
    SELECT hashtextextended(coalesce(current_schema(), '') || chr(31) || @namespace::text || chr(31) || l.lane, 0) AS key
    FROM unnest(@lanes::text[]) AS l(lane)
    ORDER BY l.lane
    OFFSET 0
) AS k;

-- name: LaneFlowRead :many
-- LaneFlowRead reads, for each lane given, its limits (limited: it has a
-- row), how many of its executions run (counted only under a cap), and
-- whether it has groups.
SELECT l.lane::text AS lane,
       CAST(m.lane IS NOT NULL AS boolean) AS limited,
       CAST(coalesce(m.max_running, 0) AS bigint) AS max_running,
       CAST(coalesce(m.max_running_per_group, 0) AS bigint) AS max_running_per_group,
       CAST(coalesce(m.rate, 0) AS bigint) AS rate,
       CAST(coalesce(m.rate_period_ms, 0) AS bigint) AS rate_period_ms,
       CAST(coalesce(m.paused, false) AS boolean) AS paused,
       CAST(coalesce(m.window_start_ms, 0) AS bigint) AS window_start_ms,
       CAST(coalesce(m.window_claims, 0) AS bigint) AS window_claims,
       CAST(CASE WHEN coalesce(m.max_running, 0) > 0 OR coalesce(m.max_running_per_group, 0) > 0 THEN (
           SELECT count(*) FROM executions AS r
           WHERE r.namespace = @namespace AND r.lane = l.lane AND r.state = 'running'
       ) ELSE 0 END AS bigint) AS running,
       EXISTS (SELECT 1 FROM lane_groups AS g WHERE g.namespace = @namespace AND g.lane = l.lane) AS grouped
FROM unnest(@lanes::text[]) AS l(lane)
LEFT JOIN lane_limits AS m ON m.namespace = @namespace AND m.lane = l.lane
ORDER BY l.lane;

-- name: LaneGroupsRead :many
-- LaneGroupsRead reads a lane's groups, with when each was last served and how many of each group's executions run (counted only when
-- @count_running).
SELECT g.group_key, g.served_seq,
       CAST(CASE WHEN @count_running::boolean THEN (
           SELECT count(*) FROM executions AS r
           WHERE r.namespace = g.namespace AND r.lane = g.lane AND r.group_key = g.group_key AND r.state = 'running'
       ) ELSE 0 END AS bigint) AS running
FROM lane_groups AS g
WHERE g.namespace = @namespace AND g.lane = @lane;

-- name: ExecutionPickGroups :many
-- ExecutionPickGroups finds, for each group given, up to its limit of the
-- group's best ready executions in one lane (highest priority, earliest
-- RunAt, lowest id) whose required capabilities are all in @capabilities,
-- with the size of each payload. It locks nothing: the lane's claim lock
-- keeps other claims away, and the start checks the state again.
SELECT c.id, c.group_key, c.priority, c.run_at_ms, c.payload_bytes
FROM (SELECT unnest(@group_keys::text[]) AS group_key, unnest(@limits::bigint[]) AS lim) AS g
CROSS JOIN LATERAL (
    SELECT e.id, e.group_key, e.priority, e.run_at_ms, CAST(octet_length(e.payload) AS bigint) AS payload_bytes
    FROM executions AS e
    WHERE e.namespace = @namespace AND e.lane = @lane AND e.group_key = g.group_key
      AND e.state = 'waiting' AND e.ready
      AND e.required_capabilities <@ @capabilities::text[]
    ORDER BY e.priority DESC, e.run_at_ms, e.id
    LIMIT g.lim
) AS c;

-- name: ExecutionStartMany :many
-- ExecutionStartMany moves the given waiting executions to running, each
-- under its new lease, attempt and epoch (one still waiting is started; one
-- that is not, cancelled meanwhile, is left out), while their worker is
-- alive: it locks the worker's row FOR KEY SHARE (no lease outlives its
-- worker: a MarkWorkerDead or sweep waits for the claim; SKIP LOCKED: a
-- worker being deleted starts nothing), bound or of their own and expiring
-- as ExecutionClaim's do; each row carries the worker's expiry too.
WITH holder AS (
    SELECT wk.last_heartbeat_ms + wk.ttl_ms AS expires_at_ms FROM workers AS wk
    WHERE wk.namespace = @namespace AND wk.instance_id = @instance_id::text
      AND wk.last_heartbeat_ms + wk.ttl_ms > @now::bigint
    FOR KEY SHARE OF wk SKIP LOCKED
)
UPDATE executions AS x
SET state = 'running', attempts = x.attempts + 1, epoch = x.epoch + 1,
    lease_id = s.lease_id, holder = @instance_id::text, claimed_at_ms = @now::bigint,
    bound = @bind::boolean,
    deadline_ms = CASE WHEN x.timeout_ms > 0 THEN CAST(@now AS bigint) + x.timeout_ms END,
    expires_at_ms = CASE WHEN x.timeout_ms > 0 THEN least(@expires_at_ms::bigint, CAST(@now AS bigint) + x.timeout_ms)
        ELSE @expires_at_ms::bigint END,
    revoked_at_ms = NULL
FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@lease_ids::uuid[]) AS lease_id) AS s
WHERE x.id = s.id AND x.state = 'waiting' AND EXISTS (SELECT 1 FROM holder)
RETURNING x.id, x.attempts, x.epoch, x.lane, x.payload, x.lease_id, CAST(coalesce(x.metadata, '') AS text) AS metadata,
          x.expires_at_ms, CAST(coalesce(x.deadline_ms, 0) AS bigint) AS deadline_ms, x.run_at_ms,
          CAST((SELECT h.expires_at_ms FROM holder AS h) AS bigint) AS holder_expires_at_ms;

-- name: LaneGroupsServe :exec
-- LaneGroupsServe records when each group given was last served.
INSERT INTO lane_groups (namespace, lane, group_key, served_seq)
SELECT @namespace, @lane, g.group_key, g.served_seq
FROM (SELECT unnest(@group_keys::text[]) AS group_key, unnest(@served_seqs::bigint[]) AS served_seq) AS g
ON CONFLICT (namespace, lane, group_key) DO UPDATE SET served_seq = excluded.served_seq;

-- name: LaneRateCount :exec
-- LaneRateCount counts @claims claims in the rate window that began at
-- @window_start_ms (a new window starts its count afresh; a window older
-- than the one counted is never counted).
UPDATE lane_limits
SET window_claims = CASE WHEN window_start_ms = @window_start_ms::bigint THEN window_claims + @claims::bigint ELSE @claims::bigint END,
    window_start_ms = @window_start_ms::bigint
WHERE namespace = @namespace AND lane = @lane AND window_start_ms <= @window_start_ms::bigint;
