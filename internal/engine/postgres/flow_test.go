package postgres

import (
	"context"
	"testing"

	"github.com/google/uuid"
	pgdb "github.com/rosterdb/roster/db/postgres"
	"github.com/rosterdb/roster/internal/pgtest"
)

// The statements of a flow claim, and the lane limits', read indexes: a
// claim of a limited lane costs the same beside a million finished
// executions or a thousand other lanes.
func TestFlowQueriesUseIndexes(t *testing.T) {
	e := openAt(t, pgtest.Fresh(t))
	seed(t, e)
	ctx := context.Background()
	_, err := e.pool.Exec(ctx, `
		INSERT INTO lane_limits (namespace, lane, max_running, max_running_per_group, rate, rate_period_ms, paused)
			SELECT 'ns' || (i % 10), 'lane' || i, 4, 1, 10, 1000, false FROM generate_series(1, 2000) AS i;
		INSERT INTO lane_groups (namespace, lane, group_key) SELECT 'ns1', 'lane1', 'g' || i FROM generate_series(1, 2000) AS i;
		ANALYZE;`)
	must(t, err)
	id := uuid.New()
	for name, call := range map[string]func(q *pgdb.Queries) error{
		"LaneLimitsPut": func(q *pgdb.Queries) error {
			return q.LaneLimitsPut(ctx, pgdb.LaneLimitsPutParams{Namespace: "ns1", Lane: "lane1", MaxRunning: 3})
		},
		"LaneLimitsList": func(q *pgdb.Queries) error { _, err := q.LaneLimitsList(ctx, "ns1"); return err },
		"LaneLimitsDelete": func(q *pgdb.Queries) error {
			_, err := q.LaneLimitsDelete(ctx, pgdb.LaneLimitsDeleteParams{Namespace: "ns1", Lane: "lane1"})
			return err
		},
		"LaneGroupsTouch": func(q *pgdb.Queries) error {
			return q.LaneGroupsTouch(ctx, pgdb.LaneGroupsTouchParams{Namespaces: []string{"ns1"}, Lanes: []string{"lane1"}, GroupKeys: []string{"g"}})
		},
		"WorkerGetFlowClaimer": func(q *pgdb.Queries) error {
			_, err := q.WorkerGetFlowClaimer(ctx, pgdb.WorkerGetFlowClaimerParams{Namespace: "ns1", InstanceID: "i1", Now: 5})
			return err
		},
		"LaneLock": func(q *pgdb.Queries) error {
			return q.LaneLock(ctx, pgdb.LaneLockParams{Namespace: "ns1", Lanes: []string{"lane1", "lane2"}})
		},
		"LaneFlowRead": func(q *pgdb.Queries) error {
			_, err := q.LaneFlowRead(ctx, pgdb.LaneFlowReadParams{Namespace: "ns1", Lanes: []string{"lane1", "lane2"}})
			return err
		},
		"LaneGroupsRead": func(q *pgdb.Queries) error {
			_, err := q.LaneGroupsRead(ctx, pgdb.LaneGroupsReadParams{CountRunning: true, Namespace: "ns1", Lane: "lane1"})
			return err
		},
		"ExecutionPickGroups": func(q *pgdb.Queries) error {
			_, err := q.ExecutionPickGroups(ctx, pgdb.ExecutionPickGroupsParams{
				GroupKeys: []string{"", "g1"}, Limits: []int64{2, 2}, Namespace: "ns1", Lane: "lane1", Capabilities: []string{},
			})
			return err
		},
		"ExecutionStartMany": func(q *pgdb.Queries) error {
			_, err := q.ExecutionStartMany(ctx, pgdb.ExecutionStartManyParams{
				InstanceID: "i1", Namespace: "ns1", Ids: []uuid.UUID{id}, LeaseIds: []uuid.UUID{uuid.New()},
			})
			return err
		},
		"LaneGroupsServe": func(q *pgdb.Queries) error {
			return q.LaneGroupsServe(ctx, pgdb.LaneGroupsServeParams{Namespace: "ns1", Lane: "lane1", GroupKeys: []string{"g1"}, ServedSeqs: []int64{3}})
		},
		"LaneRateCount": func(q *pgdb.Queries) error {
			return q.LaneRateCount(ctx, pgdb.LaneRateCountParams{WindowStartMs: 1000, Claims: 2, Namespace: "ns1", Lane: "lane1"})
		},
	} {
		t.Run(name, func(t *testing.T) { assertIndexed(t, e, call) })
	}
}
