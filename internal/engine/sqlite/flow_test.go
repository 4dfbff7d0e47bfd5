package sqlite

import (
	"context"
	"testing"

	sqlitedb "github.com/rosterdb/roster/db/sqlite"
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
		"ExecutionPickGroup": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionPickGroup(ctx, sqlitedb.ExecutionPickGroupParams{Namespace: "n", Lane: "l", GroupKey: "g", Capabilities: "[]", Limit: 4})
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
