-- Flow control: lane limits, the groups of lanes, and the claim of a lane
-- that has either (ExecutionClaimFlow: the function roster_flow_claim of
-- migration 18). A claim of such a lane first takes the lane's claim lock,
-- so that what it reads (running executions, the rate window, the groups
-- the lane served last) holds until it commits: no other claim of that lane
-- runs meanwhile, and a settle only lowers the counts. The lock is held for
-- the one call, never longer.

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

-- name: LaneTurnsTouch :exec
-- LaneTurnsTouch records the lanes executions are created in with a group:
-- from then on each such lane's groups take turns. A lane recorded already
-- is only read (a caller's REPEATABLE READ transaction never meets the row
-- a claim has changed since its snapshot).
INSERT INTO lane_turns (namespace, lane, priority, capabilities)
SELECT DISTINCT l.namespace, l.lane, 0, CAST('{}' AS text[])
FROM (SELECT unnest(@namespaces::text[]) AS namespace, unnest(@lanes::text[]) AS lane) AS l
WHERE NOT EXISTS (SELECT 1 FROM lane_turns AS t WHERE t.namespace = l.namespace AND t.lane = l.lane)
ON CONFLICT DO NOTHING;

-- name: ExecutionClaimFlow :many
-- ExecutionClaimFlow claims for a worker one of whose lanes has limits or
-- groups, in one call (roster_flow_claim, migration 18): a row per
-- execution started, in the order taken, then a row without an id that says
-- what held the claim back and when to look again; no row when the worker is
-- not alive.
SELECT CAST((c.r).id AS uuid) AS id, CAST((c.r).lease_id AS uuid) AS lease_id,
       CAST((c.r).attempts AS bigint) AS attempts, CAST((c.r).epoch AS bigint) AS epoch,
       CAST((c.r).lane AS text) AS lane, CAST((c.r).payload AS bytea) AS payload,
       CAST((c.r).metadata AS text) AS metadata, CAST((c.r).expires_at_ms AS bigint) AS expires_at_ms,
       CAST((c.r).deadline_ms AS bigint) AS deadline_ms, CAST((c.r).run_at_ms AS bigint) AS run_at_ms,
       CAST((c.r).holder_expires_at_ms AS bigint) AS holder_expires_at_ms,
       CAST((c.r).held AS integer) AS held, CAST((c.r).next_run_at_ms AS bigint) AS next_run_at_ms,
       CAST((c.r).flow AS boolean) AS flow
FROM (
    SELECT roster_flow_claim(@namespace::text, @instance_id::text, @now::bigint, @lease_ids::uuid[],
                             @expires_at_ms::bigint, @bind::boolean, @max_bytes::bigint) AS r
    OFFSET 0
) AS c;
