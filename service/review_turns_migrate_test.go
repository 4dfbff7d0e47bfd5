package service

import (
	"context"
	"database/sql"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Migration 18 down keeps the group of every execution of a lane with
// turns, finished ones included: migration 17's claim takes a grouped
// lane's work only from the groups that have a lane_groups row, and a failed
// execution redriven by RetryExecution must be among them. (Found by review:
// the down migration rebuilt lane_groups from waiting and running work only.)
func TestReviewTurnsMigrateDownKeepsGroupsOfFinishedWork(t *testing.T) {
	conformanceShared(t, func(t *testing.T, b backend) {
		if b.migrated {
			t.Skip("the fixture grants the app role its tables once (README: ALTER DEFAULT PRIVILEGES); a table made again is not granted")
		}
		ctx := context.Background()
		loc := b.fresh(t)
		s, _ := b.open(t, loc)
		worker(t, s, "ns", "i", []string{"default"}, nil)
		g := create(t, s, CreateExecutionArgs{Group: "g"})
		l := claim(t, s, "i", t0)
		if l.ExecutionID != g {
			t.Fatalf("claimed %s, want g's %s", l.ExecutionID, g)
		}
		must(t, s.FailExecution(ctx, FailArgs{Lease: l, Reason: "boom", Now: t0})) // MaxAttempts 1: failed
		create(t, s, CreateExecutionArgs{Group: "a"})                              // live work of another group
		must(t, s.Close())
		must(t, MigrateDown(ctx, b.direct(t, loc), 1))
		n := queryInt(t, b, loc, `SELECT count(*) FROM lane_groups WHERE namespace = 'ns' AND lane = 'default' AND group_key = 'g'`)
		if n != 1 {
			t.Fatalf("after migration 18 down, lane_groups has %d rows for group g of failed execution %s, want 1", n, g)
		}
	})
}

// queryInt runs a query of one integer on the database at loc, outside any
// Store.
func queryInt(t *testing.T, b backend, loc, query string) int64 {
	t.Helper()
	ctx := context.Background()
	var n int64
	if b.postgres {
		conn, err := pgx.Connect(ctx, b.direct(t, loc))
		must(t, err)
		defer func() { _ = conn.Close(ctx) }()
		must(t, conn.QueryRow(ctx, query).Scan(&n))
		return n
	}
	db, err := sql.Open("sqlite", "file:"+loc+"?_pragma=busy_timeout(5000)")
	must(t, err)
	defer func() { _ = db.Close() }()
	must(t, db.QueryRowContext(ctx, query).Scan(&n))
	return n
}
