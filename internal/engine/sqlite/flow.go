package sqlite

import (
	"context"
	"slices"
	"strings"

	"github.com/google/uuid"
	sqlitedb "github.com/rosterdb/roster/db/sqlite"
	"github.com/rosterdb/roster/internal/engine"
)

// Flow control: lane limits and the statements of engine.FlowClaim
// (queries/sqlite/flow.sql), run in the writer's transaction: the single
// writer is every lane's claim lock.

var _ engine.FlowQueries = queries{}

func (x queries) LaneLimitsDelete(ctx context.Context, namespace, lane string) error {
	n, err := x.q.LaneLimitsDelete(ctx, sqlitedb.LaneLimitsDeleteParams{Namespace: namespace, Lane: lane})
	if err == nil && n == 0 {
		return engine.ErrNoRows
	}
	return translate(err)
}

func (x queries) LaneTurnsTouch(ctx context.Context, es []engine.Execution) error {
	for _, k := range engine.GroupedLanes(es) {
		if err := x.q.LaneTurnTouch(ctx, sqlitedb.LaneTurnTouchParams{Namespace: k.Namespace, Lane: k.Lane}); err != nil {
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

func (x queries) FlowPick(ctx context.Context, namespace, lane string, capabilities []string, n int64) ([]engine.FlowCandidate, error) {
	rows, err := x.q.ExecutionPickOneLane(ctx, sqlitedb.ExecutionPickOneLaneParams{
		Namespace: namespace, Lane: lane, Capabilities: jsonArray(capabilities), Limit: n,
	})
	return engine.Rows(len(rows), err, translate, func(i int) engine.FlowCandidate {
		r := rows[i]
		return engine.FlowCandidate{ID: r.ID, Lane: lane, Priority: r.Priority, RunAtMs: r.RunAtMs, Bytes: r.PayloadBytes}
	})
}

func (x queries) FlowLevel(ctx context.Context, namespace, lane string, capabilities []string, below int64) (int64, string, bool, error) {
	r, err := x.q.ExecutionFlowLevel(ctx, sqlitedb.ExecutionFlowLevelParams{
		Capabilities: jsonArray(capabilities), Namespace: namespace, Lane: lane, Below: below,
	})
	found, err := engine.Found(translate(err))
	return r.Priority, r.LastGroup, found, err
}

// FlowWalk reads the steps from an inclusive bound: the least key after
// s.After is s.After followed by a NUL byte, since keys hold no control
// character and SQLite compares text byte by byte.
func (x queries) FlowWalk(ctx context.Context, s engine.FlowStep, steps int64) ([]engine.FlowTurn, error) {
	from := ""
	if !s.FromStart {
		from = s.After + "\x00"
	}
	rows, err := x.q.ExecutionFlowWalk(ctx, sqlitedb.ExecutionFlowWalkParams{
		PerGroup: s.PerGroup, Steps: steps, Namespace: s.Namespace, Lane: s.Lane, Priority: s.Priority,
		FromGroup: from, Capabilities: jsonArray(s.Capabilities),
	})
	turns, err := engine.Rows(len(rows), err, translate, func(i int) engine.FlowTurn {
		r := rows[i]
		return engine.FlowTurn{
			FlowCandidate: engine.FlowCandidate{ID: r.ID, Lane: s.Lane, Group: r.GroupKey, Priority: s.Priority, RunAtMs: r.RunAtMs, Bytes: r.PayloadBytes},
			Running:       r.Running,
		}
	})
	slices.SortFunc(turns, func(a, b engine.FlowTurn) int { return strings.Compare(a.Group, b.Group) })
	return turns, err
}

func (x queries) FlowMore(ctx context.Context, namespace string, capabilities []string, after engine.FlowCandidate, n int64) ([]engine.FlowCandidate, error) {
	rows, err := x.q.ExecutionFlowMore(ctx, sqlitedb.ExecutionFlowMoreParams{
		Namespace: namespace, Lane: after.Lane, Priority: after.Priority, GroupKey: after.Group,
		RunAtMs: after.RunAtMs, ID: after.ID.String(), Capabilities: jsonArray(capabilities), Limit: n,
	})
	return engine.Rows(len(rows), err, translate, func(i int) engine.FlowCandidate {
		r := rows[i]
		return engine.FlowCandidate{ID: r.ID, Lane: after.Lane, Group: after.Group, Priority: after.Priority, RunAtMs: r.RunAtMs, Bytes: r.PayloadBytes}
	})
}

func (x queries) FlowReady(ctx context.Context, namespace, lane string, capabilities []string) (bool, error) {
	ready, err := x.q.ExecutionReadyInLane(ctx, sqlitedb.ExecutionReadyInLaneParams{
		Namespace: namespace, Lane: lane, Capabilities: jsonArray(capabilities),
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

func (x queries) FlowServe(ctx context.Context, namespace, lane string, capabilities []string, priority int64, group string) error {
	return translate(x.q.LaneTurnServe(ctx, sqlitedb.LaneTurnServeParams{
		Namespace: namespace, Lane: lane, Priority: priority, Capabilities: jsonArray(capabilities), LastGroup: group,
	}))
}

func (x queries) FlowCount(ctx context.Context, namespace, lane string, windowStartMs, claims int64) error {
	return translate(x.q.LaneRateCount(ctx, sqlitedb.LaneRateCountParams{WindowStartMs: windowStartMs, Claims: claims, Namespace: namespace, Lane: lane}))
}

// flow tells whether one of the worker's lanes has limits or groups.
func (x queries) flow(ctx context.Context, p engine.ClaimParams) (bool, error) {
	flow, err := x.q.LaneFlowExists(ctx, sqlitedb.LaneFlowExistsParams{Namespace: p.Namespace, InstanceID: p.InstanceID})
	return flow, translate(err)
}
