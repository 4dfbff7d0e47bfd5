package sqlite

import (
	"context"
	"testing"

	"github.com/google/uuid"
	sqlitedb "github.com/rosterdb/roster/db/sqlite"
	"github.com/rosterdb/roster/internal/engine"
)

// The statements of a flow claim, and the lane limits', read indexes.
func TestFlowQueriesUseIndexes(t *testing.T) {
	e := openMemory(t)
	ctx := context.Background()
	for name, call := range map[string]func(q *sqlitedb.Queries) error{
		"LaneLimitsPut": func(q *sqlitedb.Queries) error {
			return q.LaneLimitsPut(ctx, sqlitedb.LaneLimitsPutParams{Namespace: "n", Lane: "l", MaxRunning: 3})
		},
		"LaneLimitsDelete": func(q *sqlitedb.Queries) error {
			_, err := q.LaneLimitsDelete(ctx, sqlitedb.LaneLimitsDeleteParams{Namespace: "n", Lane: "l"})
			return err
		},
		"LaneGroupTouch": func(q *sqlitedb.Queries) error {
			return q.LaneGroupTouch(ctx, sqlitedb.LaneGroupTouchParams{Namespace: "n", Lane: "l", GroupKey: "g"})
		},
		"LaneFlowExists": func(q *sqlitedb.Queries) error {
			_, err := q.LaneFlowExists(ctx, sqlitedb.LaneFlowExistsParams{Namespace: "n", InstanceID: "i"})
			return err
		},
		"WorkerLanesList": func(q *sqlitedb.Queries) error {
			_, err := q.WorkerLanesList(ctx, sqlitedb.WorkerLanesListParams{Namespace: "n", InstanceID: "i"})
			return err
		},
		"LaneFlowRead": func(q *sqlitedb.Queries) error {
			_, err := q.LaneFlowRead(ctx, sqlitedb.LaneFlowReadParams{Namespace: "n", Lane: "l"})
			return err
		},
		"LaneGroupsRead": func(q *sqlitedb.Queries) error {
			_, err := q.LaneGroupsRead(ctx, sqlitedb.LaneGroupsReadParams{CountRunning: 1, Namespace: "n", Lane: "l"})
			return err
		},
		"ExecutionPickGroups": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionPickGroups(ctx, sqlitedb.ExecutionPickGroupsParams{GroupKeys: `["g","h"]`, Namespace: "n", Lane: "l", Capabilities: "[]", Limit: 4})
			return err
		},
		"ExecutionReadyInGroups": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionReadyInGroups(ctx, sqlitedb.ExecutionReadyInGroupsParams{GroupKeys: `["g","h"]`, Namespace: "n", Lane: "l", Capabilities: "[]"})
			return err
		},
		"LaneGroupServe": func(q *sqlitedb.Queries) error {
			return q.LaneGroupServe(ctx, sqlitedb.LaneGroupServeParams{Namespace: "n", Lane: "l", GroupKey: "g", ServedSeq: 3})
		},
		"LaneRateCount": func(q *sqlitedb.Queries) error {
			return q.LaneRateCount(ctx, sqlitedb.LaneRateCountParams{WindowStartMs: 1000, Claims: 2, Namespace: "n", Lane: "l"})
		},
	} {
		t.Run(name, func(t *testing.T) { assertIndexed(t, e, call) })
	}
	// The listing of limits is in key order, from the primary key (every
	// row when every namespace is asked for: one per limited lane).
	assertIndexed(t, e, func(q *sqlitedb.Queries) error { _, err := q.LaneLimitsList(ctx, "n"); return err }, true)
}

// FlowPick reads every group in one statement and keeps each group's own
// limit of its best (highest priority, earliest RunAt, lowest id), group by
// group in the order asked; FlowReady sees a group's ready work.
func TestFlowPickKeepsEachGroupsLimit(t *testing.T) {
	e := openMemory(t)
	ctx := context.Background()
	var want []uuid.UUID // in the order FlowPick must return them
	must(t, e.Write(ctx, func(ctx context.Context, q engine.Queries) error {
		add := func(group string, priority, runAt int64) uuid.UUID {
			id := uuid.Must(uuid.NewV7())
			must(t, q.ExecutionInsert(ctx, engine.Execution{ID: id, Namespace: "n", Lane: "l", Group: group, Priority: priority, MaxAttempts: 1, CreatedAtMs: 10, RunAtMs: runAt})) // ready: due when created
			return id
		}
		a1 := add("a", 0, 1)
		a0 := add("a", 5, 1)
		add("a", 0, 2)
		b0 := add("b", 1, 1)
		b1 := add("b", 1, 2)
		b2 := add("b", 0, 1)
		add("b", 0, 3)
		add("c", 9, 1)
		want = []uuid.UUID{b0, b1, b2, a0, a1}
		return nil
	}))
	must(t, e.Write(ctx, func(ctx context.Context, q engine.Queries) error {
		x := q.(queries)
		got, err := x.FlowPick(ctx, "n", "l", nil, []string{"b", "a", "none"}, []int64{3, 2, 4})
		must(t, err)
		if len(got) != len(want) {
			t.Fatalf("picked %d, want %d: %+v", len(got), len(want), got)
		}
		for i, c := range got {
			if c.ID != want[i] {
				t.Errorf("pick %d: %s of group %q, want %s", i, c.ID, c.Group, want[i])
			}
		}
		for groups, ready := range map[string]bool{"a": true, "c": true, "none": false, "": false} {
			got, err := x.FlowReady(ctx, "n", "l", nil, []string{groups})
			must(t, err)
			if got != ready {
				t.Errorf("FlowReady(%q) = %v, want %v", groups, got, ready)
			}
		}
		return nil
	}))
}
