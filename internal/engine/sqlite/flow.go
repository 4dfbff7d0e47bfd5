package sqlite

import (
	"context"
	"slices"

	"github.com/google/uuid"
	sqlitedb "github.com/rosterdb/roster/db/sqlite"
	"github.com/rosterdb/roster/internal/engine"
)

// Flow control: lane limits and the statements of engine.FlowClaim
// (queries/sqlite/flow.sql), run in the writer's transaction: the single
// writer is every lane's claim lock.

var _ engine.FlowQueries = queries{}

func (x queries) LaneLimitsPut(ctx context.Context, l engine.LaneLimits) error {
	return translate(x.q.LaneLimitsPut(ctx, sqlitedb.LaneLimitsPutParams{
		Namespace: l.Namespace, Lane: l.Lane, MaxRunning: l.MaxRunning, MaxRunningPerGroup: l.MaxPerGroup,
		Rate: l.Rate, RatePeriodMs: l.RatePeriodMs, Paused: sqliteBool(l.Paused),
	}))
}

func (x queries) LaneLimitsList(ctx context.Context, namespace string) ([]engine.LaneLimits, error) {
	rows, err := x.q.LaneLimitsList(ctx, namespace)
	return engine.Rows(len(rows), err, translate, func(i int) engine.LaneLimits {
		r := rows[i]
		return engine.LaneLimits{
			Namespace: r.Namespace, Lane: r.Lane, MaxRunning: r.MaxRunning, MaxPerGroup: r.MaxRunningPerGroup,
			Rate: r.Rate, RatePeriodMs: r.RatePeriodMs, Paused: r.Paused != 0,
		}
	})
}

func (x queries) LaneLimitsDelete(ctx context.Context, namespace, lane string) error {
	n, err := x.q.LaneLimitsDelete(ctx, sqlitedb.LaneLimitsDeleteParams{Namespace: namespace, Lane: lane})
	if err == nil && n == 0 {
		return engine.ErrNoRows
	}
	return translate(err)
}

func (x queries) LaneGroupsTouch(ctx context.Context, es []engine.Execution) error {
	for _, k := range engine.GroupsOf(es) {
		if err := x.q.LaneGroupTouch(ctx, sqlitedb.LaneGroupTouchParams{Namespace: k.Namespace, Lane: k.Lane, GroupKey: k.Group}); err != nil {
			return translate(err)
		}
	}
	return nil
}

func (x queries) FlowWorker(ctx context.Context, k engine.WorkerKey, nowMs int64) (engine.FlowWorker, error) {
	w, err := x.q.WorkerGetClaimer(ctx, sqlitedb.WorkerGetClaimerParams{Namespace: k.Namespace, InstanceID: k.InstanceID, Now: nowMs})
	if err != nil {
		return engine.FlowWorker{}, translate(err)
	}
	caps, err := parseJSONArray(w.Capabilities)
	if err != nil {
		return engine.FlowWorker{}, err
	}
	switch {
	case w.FirstLane == "":
		return engine.FlowWorker{Capabilities: caps}, nil
	case w.FirstLane == w.LastLane: // one lane: no need to list them
		return engine.FlowWorker{Lanes: []string{w.FirstLane}, Capabilities: caps}, nil
	}
	lanes, err := x.q.WorkerLanesList(ctx, sqlitedb.WorkerLanesListParams{Namespace: k.Namespace, InstanceID: k.InstanceID})
	return engine.FlowWorker{Lanes: lanes, Capabilities: caps}, translate(err)
}

func (x queries) FlowLanes(ctx context.Context, namespace string, lanes []string) ([]engine.FlowLane, error) {
	out := make([]engine.FlowLane, 0, len(lanes))
	for _, lane := range lanes {
		r, err := x.q.LaneFlowRead(ctx, sqlitedb.LaneFlowReadParams{Namespace: namespace, Lane: lane})
		if err != nil {
			return nil, translate(err)
		}
		out = append(out, engine.FlowLane{
			Lane: lane, Limited: r.Limited != 0, Grouped: r.Grouped != 0, Paused: r.Paused != 0,
			MaxRunning: r.MaxRunning, MaxPerGroup: r.MaxRunningPerGroup, Rate: r.Rate, RatePeriodMs: r.RatePeriodMs,
			WindowStartMs: r.WindowStartMs, WindowCount: r.WindowClaims, Running: r.Running,
		})
	}
	return out, nil
}

// FlowPromote does nothing: the claim made due executions ready before it
// looked at the lanes (FlowWorker never says Due).
func (x queries) FlowPromote(context.Context, string, int64) error { return nil }

func (x queries) FlowGroups(ctx context.Context, namespace, lane string, countRunning bool) ([]engine.FlowGroup, error) {
	rows, err := x.q.LaneGroupsRead(ctx, sqlitedb.LaneGroupsReadParams{CountRunning: sqliteBool(countRunning), Namespace: namespace, Lane: lane})
	return engine.Rows(len(rows), err, translate, func(i int) engine.FlowGroup {
		return engine.FlowGroup{Group: rows[i].GroupKey, ServedSeq: rows[i].ServedSeq, Running: rows[i].Running}
	})
}

// FlowPick reads every group's candidates in one statement, at most the
// largest limit of each, and keeps each group's own limit of them, best
// first, group by group in the order of groups.
func (x queries) FlowPick(ctx context.Context, namespace, lane string, capabilities, groups []string, limits []int64) ([]engine.FlowCandidate, error) {
	if len(groups) == 0 {
		return nil, nil
	}
	rows, err := x.q.ExecutionPickGroups(ctx, sqlitedb.ExecutionPickGroupsParams{
		GroupKeys: jsonArray(groups), Namespace: namespace, Lane: lane, Capabilities: jsonArray(capabilities), Limit: slices.Max(limits),
	})
	if err != nil {
		return nil, translate(err)
	}
	byGroup := make(map[string][]engine.FlowCandidate, len(groups))
	for _, r := range rows {
		byGroup[r.GroupKey] = append(byGroup[r.GroupKey], engine.FlowCandidate{
			ID: r.ID, Lane: lane, Group: r.GroupKey, Priority: r.Priority, RunAtMs: r.RunAtMs, Bytes: r.PayloadBytes,
		})
	}
	out := make([]engine.FlowCandidate, 0, len(rows))
	for i, g := range groups {
		cs := byGroup[g]
		slices.SortFunc(cs, engine.ClaimCompare)
		out = append(out, cs[:min(int64(len(cs)), limits[i])]...)
	}
	return out, nil
}

func (x queries) FlowReady(ctx context.Context, namespace, lane string, capabilities, groups []string) (bool, error) {
	ready, err := x.q.ExecutionReadyInGroups(ctx, sqlitedb.ExecutionReadyInGroupsParams{
		GroupKeys: jsonArray(groups), Namespace: namespace, Lane: lane, Capabilities: jsonArray(capabilities),
	})
	return ready, translate(err)
}

func (x queries) FlowStart(ctx context.Context, p engine.ClaimParams, ids []uuid.UUID) ([]engine.ClaimedLease, error) {
	holderMs := int64(engine.NeverMs)
	if p.Bound { // the worker's expiry, that of the leases bound to it
		w, err := x.q.WorkerGetClaimer(ctx, sqlitedb.WorkerGetClaimerParams{Namespace: p.Namespace, InstanceID: p.InstanceID, Now: p.NowMs})
		if err != nil {
			return nil, translate(err)
		}
		holderMs = w.ExpiresAtMs
	}
	var leases []engine.ClaimedLease
	for i, id := range ids {
		leaseID := p.LeaseIDs[i]
		started, err := x.start(ctx, p, id, leaseID, holderMs)
		if err != nil {
			if err = translate(err); err == engine.ErrNoRows {
				continue // no longer waiting
			}
			return nil, err
		}
		leases = append(leases, started)
	}
	return leases, nil
}

func (x queries) FlowServe(ctx context.Context, namespace, lane string, groups []string, seqs []int64) error {
	for i, g := range groups {
		if err := x.q.LaneGroupServe(ctx, sqlitedb.LaneGroupServeParams{Namespace: namespace, Lane: lane, GroupKey: g, ServedSeq: seqs[i]}); err != nil {
			return translate(err)
		}
	}
	return nil
}

func (x queries) FlowCount(ctx context.Context, namespace, lane string, windowStartMs, claims int64) error {
	return translate(x.q.LaneRateCount(ctx, sqlitedb.LaneRateCountParams{WindowStartMs: windowStartMs, Claims: claims, Namespace: namespace, Lane: lane}))
}

// flow tells whether one of the worker's lanes has limits or groups.
func (x queries) flow(ctx context.Context, p engine.ClaimParams) (bool, error) {
	flow, err := x.q.LaneFlowExists(ctx, sqlitedb.LaneFlowExistsParams{Namespace: p.Namespace, InstanceID: p.InstanceID})
	return flow, translate(err)
}
