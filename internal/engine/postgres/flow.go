package postgres

import (
	"context"

	"github.com/google/uuid"
	pgdb "github.com/rosterdb/roster/db/postgres"
	"github.com/rosterdb/roster/internal/engine"
)

// Flow control: lane limits and the statements of engine.FlowClaim
// (queries/postgres/flow.sql).

var _ engine.FlowQueries = queries{}

func (x queries) LaneLimitsPut(ctx context.Context, l engine.LaneLimits) error {
	return translate(x.q.LaneLimitsPut(ctx, pgdb.LaneLimitsPutParams{
		Namespace: l.Namespace, Lane: l.Lane, MaxRunning: l.MaxRunning, MaxRunningPerGroup: l.MaxPerGroup,
		Rate: l.Rate, RatePeriodMs: l.RatePeriodMs, Paused: l.Paused,
	}))
}

func (x queries) LaneLimitsList(ctx context.Context, namespace string) ([]engine.LaneLimits, error) {
	rows, err := x.q.LaneLimitsList(ctx, namespace)
	return engine.Rows(len(rows), err, translate, func(i int) engine.LaneLimits {
		r := rows[i]
		return engine.LaneLimits{
			Namespace: r.Namespace, Lane: r.Lane, MaxRunning: r.MaxRunning, MaxPerGroup: r.MaxRunningPerGroup,
			Rate: r.Rate, RatePeriodMs: r.RatePeriodMs, Paused: r.Paused,
		}
	})
}

func (x queries) LaneLimitsDelete(ctx context.Context, namespace, lane string) error {
	_, err := x.q.LaneLimitsDelete(ctx, pgdb.LaneLimitsDeleteParams{Namespace: namespace, Lane: lane})
	return translate(err)
}

func (x queries) LaneGroupsTouch(ctx context.Context, es []engine.Execution) error {
	var p pgdb.LaneGroupsTouchParams
	for _, k := range engine.GroupsOf(es) {
		p.Namespaces = append(p.Namespaces, k.Namespace)
		p.Lanes = append(p.Lanes, k.Lane)
		p.GroupKeys = append(p.GroupKeys, k.Group)
	}
	if len(p.Namespaces) == 0 {
		return nil
	}
	return translate(x.q.LaneGroupsTouch(ctx, p))
}

func (x queries) FlowWorker(ctx context.Context, k engine.WorkerKey, nowMs int64) (engine.FlowWorker, error) {
	r, err := x.q.WorkerGetFlowClaimer(ctx, pgdb.WorkerGetFlowClaimerParams{Namespace: k.Namespace, InstanceID: k.InstanceID, Now: nowMs})
	return engine.FlowWorker{Lanes: r.Lanes, Capabilities: r.Capabilities, Locks: r.FlowLanes, Due: r.Due}, translate(err)
}

func (x queries) FlowPromote(ctx context.Context, namespace string, nowMs int64) error {
	_, err := x.q.ExecutionPromoteDue(ctx, pgdb.ExecutionPromoteDueParams{Namespace: namespace, Now: nowMs})
	return translate(err)
}

func (x queries) FlowLanes(ctx context.Context, namespace string, lanes []string) ([]engine.FlowLane, error) {
	rows, err := x.q.LaneFlowRead(ctx, pgdb.LaneFlowReadParams{Namespace: namespace, Lanes: lanes})
	return engine.Rows(len(rows), err, translate, func(i int) engine.FlowLane {
		r := rows[i]
		return engine.FlowLane{
			Lane: r.Lane, Limited: r.Limited, Grouped: r.Grouped, Paused: r.Paused,
			MaxRunning: r.MaxRunning, MaxPerGroup: r.MaxRunningPerGroup, Rate: r.Rate, RatePeriodMs: r.RatePeriodMs,
			WindowStartMs: r.WindowStartMs, WindowCount: r.WindowClaims, Running: r.Running,
		}
	})
}

func (x queries) LaneLock(ctx context.Context, namespace string, lanes []string) error {
	return translate(x.q.LaneLock(ctx, pgdb.LaneLockParams{Namespace: namespace, Lanes: lanes}))
}

func (x queries) FlowGroups(ctx context.Context, namespace, lane string, countRunning bool) ([]engine.FlowGroup, error) {
	rows, err := x.q.LaneGroupsRead(ctx, pgdb.LaneGroupsReadParams{CountRunning: countRunning, Namespace: namespace, Lane: lane})
	return engine.Rows(len(rows), err, translate, func(i int) engine.FlowGroup {
		return engine.FlowGroup{Group: rows[i].GroupKey, ServedSeq: rows[i].ServedSeq, Running: rows[i].Running}
	})
}

func (x queries) FlowPick(ctx context.Context, namespace, lane string, capabilities, groups []string, limits []int64) ([]engine.FlowCandidate, error) {
	rows, err := x.q.ExecutionPickGroups(ctx, pgdb.ExecutionPickGroupsParams{
		GroupKeys: groups, Limits: limits, Namespace: namespace, Lane: lane, Capabilities: array(capabilities),
	})
	return engine.Rows(len(rows), err, translate, func(i int) engine.FlowCandidate {
		r := rows[i]
		return engine.FlowCandidate{ID: r.ID, Lane: lane, Group: r.GroupKey, Priority: r.Priority, RunAtMs: r.RunAtMs, Bytes: r.PayloadBytes}
	})
}

// FlowReady picks one of each group's best and tells whether any came.
func (x queries) FlowReady(ctx context.Context, namespace, lane string, capabilities, groups []string) (bool, error) {
	limits := make([]int64, len(groups))
	for i := range limits {
		limits[i] = 1
	}
	picked, err := x.FlowPick(ctx, namespace, lane, capabilities, groups, limits)
	return len(picked) > 0, err
}

// FlowStart starts the executions in one statement and returns their
// leases in the order of ids.
func (x queries) FlowStart(ctx context.Context, p engine.ClaimParams, ids []uuid.UUID) ([]engine.ClaimedLease, error) {
	rows, err := x.q.ExecutionStartMany(ctx, pgdb.ExecutionStartManyParams{
		InstanceID: p.InstanceID, Namespace: p.Namespace, Now: p.NowMs, ExpiresAtMs: p.StoredExpiresAtMs(), Bind: p.Bound,
		Ids: ids, LeaseIds: p.LeaseIDs[:len(ids)],
	})
	if err != nil {
		return nil, translate(err)
	}
	byID := make(map[uuid.UUID]pgdb.ExecutionStartManyRow, len(rows))
	for _, r := range rows {
		byID[r.ID] = r
	}
	var leases []engine.ClaimedLease
	for _, id := range ids {
		r, ok := byID[id]
		if !ok {
			continue
		}
		leases = append(leases, engine.ClaimedLease{
			ExecutionID: id, LeaseID: r.LeaseID.UUID, AttemptIndex: r.Attempts, Epoch: r.Epoch,
			Namespace: p.Namespace, Lane: r.Lane, Payload: r.Payload,
			ExpiresAtMs: p.LeaseExpiresAtMs(r.ExpiresAtMs.Int64, r.HolderExpiresAtMs), DeadlineMs: r.DeadlineMs,
			Metadata: r.Metadata, RunAtMs: r.RunAtMs,
		})
	}
	return leases, nil
}

func (x queries) FlowServe(ctx context.Context, namespace, lane string, groups []string, seqs []int64) error {
	return translate(x.q.LaneGroupsServe(ctx, pgdb.LaneGroupsServeParams{Namespace: namespace, Lane: lane, GroupKeys: groups, ServedSeqs: seqs}))
}

func (x queries) FlowCount(ctx context.Context, namespace, lane string, windowStartMs, claims int64) error {
	return translate(x.q.LaneRateCount(ctx, pgdb.LaneRateCountParams{WindowStartMs: windowStartMs, Claims: claims, Namespace: namespace, Lane: lane}))
}

// flowClaim claims for a worker one of whose lanes has limits or groups, in
// a transaction of its own (engine.FlowClaim): the lane locks it takes last
// until its commit.
func (e *Engine) flowClaim(ctx context.Context, p engine.ClaimParams) (engine.ClaimResult, error) {
	var res engine.ClaimResult
	err := e.write(ctx, func(ctx context.Context, q queries) error {
		var err error
		res, err = engine.FlowClaim(ctx, q, p, false)
		return err
	}, true)
	return res, err
}

// Locks says LaneLock takes transaction advisory locks.
func (x queries) Locks() bool { return true }
