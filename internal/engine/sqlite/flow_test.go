package sqlite

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
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
		"LaneTurnTouch": func(q *sqlitedb.Queries) error {
			return q.LaneTurnTouch(ctx, sqlitedb.LaneTurnTouchParams{Namespace: "n", Lane: "l"})
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
		"ExecutionFlowLevel": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionFlowLevel(ctx, sqlitedb.ExecutionFlowLevelParams{Capabilities: "[]", Namespace: "n", Lane: "l", Below: 5})
			return err
		},
		"ExecutionFlowWalk": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionFlowWalk(ctx, sqlitedb.ExecutionFlowWalkParams{PerGroup: 2, Steps: 4, Namespace: "n", Lane: "l", Priority: 0, FromGroup: "g\x00", Capabilities: "[]"})
			return err
		},
		"ExecutionFlowMore": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionFlowMore(ctx, sqlitedb.ExecutionFlowMoreParams{
				Namespace: "n", Lane: "l", Priority: 0, GroupKey: "g", RunAtMs: 5, ID: uuid.Nil.String(), Capabilities: "[]", Limit: 4,
			})
			return err
		},
		"ExecutionReadyInLane": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionReadyInLane(ctx, sqlitedb.ExecutionReadyInLaneParams{Namespace: "n", Lane: "l", Capabilities: "[]"})
			return err
		},
		"LaneTurnServe": func(q *sqlitedb.Queries) error {
			return q.LaneTurnServe(ctx, sqlitedb.LaneTurnServeParams{Namespace: "n", Lane: "l", Priority: 0, Capabilities: "[]", LastGroup: "g"})
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

// A lane's turns, step by step: FlowLevel finds each priority from the
// highest down, with the group served last there to workers of the
// capabilities (FlowServe records it); FlowWalk, at a priority, the groups
// after a key (from the first group when FromStart), each with its best
// execution; FlowMore, a group's next ones; FlowReady, any ready work.
func TestFlowStepsReadTheTurns(t *testing.T) {
	e := openMemory(t)
	ctx := context.Background()
	ids := map[string]uuid.UUID{}
	must(t, e.Write(ctx, func(ctx context.Context, q engine.Queries) error {
		add := func(name, group string, priority, runAt int64) {
			id := uuid.Must(uuid.NewV7())
			ids[name] = id
			must(t, q.ExecutionInsert(ctx, engine.Execution{ID: id, Namespace: "n", Lane: "l", Group: group, Priority: priority, MaxAttempts: 1, CreatedAtMs: 10, RunAtMs: runAt})) // ready: due when created
		}
		add("a1", "a", 0, 1)
		add("a0", "a", 5, 1)
		add("a2", "a", 0, 2)
		add("b0", "b", 0, 1)
		add("b1", "b", 0, 2)
		add("e0", "", 0, 3)
		add("z0", "z", -3, 1)
		return nil
	}))
	must(t, e.Write(ctx, func(ctx context.Context, q engine.Queries) error {
		x := q.(queries)
		must(t, x.FlowServe(ctx, "n", "l", nil, 0, "a"))
		must(t, x.FlowServe(ctx, "n", "l", []string{"gpu"}, 0, "b"))
		for below, want := range map[int64]struct {
			priority int64
			last     string
		}{math.MaxInt64: {5, ""}, 4: {0, "a"}, -1: {-3, ""}} {
			if got, last, found, err := x.FlowLevel(ctx, "n", "l", nil, below); err != nil || !found || got != want.priority || last != want.last {
				t.Errorf("FlowLevel(%d) = %d, %q, %v, %v; want %d, %q", below, got, last, found, err, want.priority, want.last)
			}
		}
		if _, last, _, err := x.FlowLevel(ctx, "n", "l", []string{"gpu"}, 0); err != nil || last != "b" {
			t.Errorf("FlowLevel for the workers of another set of capabilities: last group %q, %v; want b", last, err)
		}
		if _, _, found, err := x.FlowLevel(ctx, "n", "l", nil, -4); err != nil || found {
			t.Errorf("FlowLevel below every priority found one (%v)", err)
		}
		walk := func(after string, fromStart bool, steps int64) []string {
			turns, err := x.FlowWalk(ctx, engine.FlowStep{Namespace: "n", Lane: "l", Priority: 0, After: after, FromStart: fromStart}, steps)
			must(t, err)
			var names []string
			for _, c := range turns {
				for name, id := range ids {
					if id == c.ID {
						names = append(names, name)
					}
				}
			}
			return names
		}
		for _, tc := range []struct {
			after     string
			fromStart bool
			steps     int64
			want      []string
		}{
			{"", true, 1, []string{"e0"}}, {"", true, 5, []string{"e0", "a1", "b0"}}, {"", false, 1, []string{"a1"}},
			{"", false, 5, []string{"a1", "b0"}}, {"a", false, 2, []string{"b0"}}, {"b", false, 3, nil},
		} {
			if got := walk(tc.after, tc.fromStart, tc.steps); !slices.Equal(got, tc.want) {
				t.Errorf("FlowWalk of %d steps after %q (from the start: %v) = %q, want %q", tc.steps, tc.after, tc.fromStart, got, tc.want)
			}
		}
		turns, err := x.FlowWalk(ctx, engine.FlowStep{Namespace: "n", Lane: "l", Priority: 0, After: "", PerGroup: 2}, 1)
		must(t, err)
		first := turns[0].FlowCandidate
		more, err := x.FlowMore(ctx, "n", nil, first, 5)
		must(t, err)
		if len(more) != 1 || more[0].ID != ids["a2"] || more[0].Group != "a" {
			t.Errorf("FlowMore after a1: %+v, want a2", more)
		}
		if ready, err := x.FlowReady(ctx, "n", "l", nil); err != nil || !ready {
			t.Errorf("FlowReady = %v, %v", ready, err)
		}
		if ready, err := x.FlowReady(ctx, "n", "none", nil); err != nil || ready {
			t.Errorf("FlowReady of a lane without work = %v, %v", ready, err)
		}
		return nil
	}))
}

// A claim of one lane reads that lane's ready index in its order, never the
// namespace's (where it would step over every other lane's ready work): with
// the statistics of a namespace whose other lane holds most of the work, the
// planner would otherwise take the namespace's index.
func TestClaimOfOneLaneReadsItsLane(t *testing.T) {
	e := openMemory(t)
	ctx := context.Background()
	must(t, e.Write(ctx, func(ctx context.Context, q engine.Queries) error {
		for i := range 600 {
			lane, group := "busy", fmt.Sprintf("g%d", i%10)
			if i%20 == 0 {
				lane, group = "l", ""
			}
			if err := q.ExecutionInsert(ctx, engine.Execution{ID: uuid.Must(uuid.NewV7()), Namespace: "n", Lane: lane, Group: group, MaxAttempts: 1, CreatedAtMs: 1, RunAtMs: 1}); err != nil {
				return err
			}
		}
		return nil
	}))
	_, err := e.writer.ExecContext(ctx, "ANALYZE")
	must(t, err)
	for name, call := range map[string]func(q *sqlitedb.Queries) error{
		"ExecutionPickOneLane": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionPickOneLane(ctx, sqlitedb.ExecutionPickOneLaneParams{Namespace: "n", Lane: "l", Capabilities: "[]", Limit: 4})
			return err
		},
		"ExecutionFlowLevel": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionFlowLevel(ctx, sqlitedb.ExecutionFlowLevelParams{Capabilities: "[]", Namespace: "n", Lane: "l", Below: math.MaxInt64})
			return err
		},
		"ExecutionFlowWalk": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionFlowWalk(ctx, sqlitedb.ExecutionFlowWalkParams{Steps: 4, Namespace: "n", Lane: "l", FromGroup: "", Capabilities: "[]"})
			return err
		},
		"ExecutionReadyInLane": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionReadyInLane(ctx, sqlitedb.ExecutionReadyInLaneParams{Namespace: "n", Lane: "l", Capabilities: "[]"})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			rec := &planRecorder{conn: e.writer}
			_ = call(sqlitedb.New(rec))
			if plan := rec.plans[0]; !strings.Contains(plan, "INDEX executions_ready (namespace=? AND lane=?") ||
				strings.Contains(plan, "TEMP B-TREE") {
				t.Fatalf("the claim of one lane does not read its lane's ready index in order:\n%s", plan)
			}
		})
	}
}
