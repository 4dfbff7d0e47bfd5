package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	pgdb "github.com/rosterdb/roster/db/postgres"
	"github.com/rosterdb/roster/internal/engine"
	"github.com/rosterdb/roster/internal/pgtest"
)

// Caps hold at every instant, fleet-wide. roster_flow_claim takes the claim
// locks of the lanes the worker's row listed as limited, then reads each
// lane's limits. A lane that gets its limits between the two (PutLaneLimits
// committing then) is read as limited but was not locked: the claim must
// lock it before it counts what runs there, else a concurrent claim of that
// lane that has started one and not yet committed is not seen, and a second
// one starts. Lane b gets MaxRunning 1 while claim i waits for lane a's
// lock; claim j of lane b starts one of b's two executions and holds its
// lock; then claim i goes on: it must wait for j and take nothing in b.
func TestReviewFlowLockListReadBeforeTheLock(t *testing.T) {
	e := openAt(t, pgtest.Fresh(t))
	ctx := context.Background()
	_, err := e.pool.Exec(ctx, `
		INSERT INTO workers VALUES ('ns', 'i', 'w', '{a,b}', '{x}', 1, 1000000, 1), ('ns', 'j', 'w', '{b}', '{}', 1, 1000000, 1);
		INSERT INTO lane_limits (namespace, lane, max_running, max_running_per_group, rate, rate_period_ms, paused) VALUES ('ns', 'a', 5, 0, 0, 0, false);
		INSERT INTO executions (id, namespace, lane, priority, payload, max_attempts, created_at_ms, run_at_ms, ready, required_capabilities)
			VALUES (gen_random_uuid(), 'ns', 'b', 0, '', 1, 1, 1, true, '{x}'), (gen_random_uuid(), 'ns', 'b', 0, '', 1, 2, 2, true, '{}')`)
	must(t, err)
	p := func(inst string) engine.ClaimParams {
		return engine.ClaimParams{Namespace: "ns", InstanceID: inst, NowMs: 100, ExpiresAtMs: 100000, LeaseIDs: []uuid.UUID{uuid.New()}}
	}
	// Lane a's claim lock, held elsewhere: claim i waits for it once it has
	// read its worker (whose only limited lane is a).
	holder, err := e.pool.Begin(ctx)
	must(t, err)
	defer func() { _ = holder.Rollback(ctx) }()
	_, err = holder.Exec(ctx, `SELECT pg_advisory_xact_lock(roster_lane_key('ns', 'a'))`)
	must(t, err)
	type result struct {
		n   int
		err error
	}
	claimI := make(chan result, 1)
	go func() {
		res, err := e.ExecutionClaim(ctx, p("i"))
		claimI <- result{len(res.Leases), err}
	}()
	waitForLockWait(t, e.pool, 1)

	_, err = e.pool.Exec(ctx, `INSERT INTO lane_limits (namespace, lane, max_running, max_running_per_group, rate, rate_period_ms, paused) VALUES ('ns', 'b', 1, 0, 0, 0, false)`)
	must(t, err)
	j, err := e.pool.Begin(ctx)
	must(t, err)
	defer func() { _ = j.Rollback(ctx) }()
	resJ, err := newQueries(pgdb.New(j)).flowClaim(ctx, p("j"))
	must(t, err)
	if len(resJ.Leases) != 1 {
		t.Fatalf("claim j of lane b took %d, want 1", len(resJ.Leases))
	}

	must(t, holder.Rollback(ctx)) // claim i goes on, and waits for lane b's lock
	select {
	case r := <-claimI:
		claimI <- r // it did not wait: the check below tells whether it took one
	case <-time.After(5 * time.Second):
		t.Fatal("claim i neither waited for lane b's lock nor ended")
	case <-lockWaited(e.pool, 1):
	}
	must(t, j.Commit(ctx))
	r := <-claimI
	must(t, r.err)
	var running int
	must(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM executions WHERE lane = 'b' AND state = 'running'`).Scan(&running))
	if running != 1 {
		t.Fatalf("lane b has MaxRunning 1 and %d running (claim i took %d)", running, r.n)
	}
}

// waitForLockWait waits until n sessions wait for an advisory lock.
func waitForLockWait(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	select {
	case <-lockWaited(pool, n):
	case <-time.After(5 * time.Second):
		t.Fatalf("no %d sessions waiting for an advisory lock after 5 s", n)
	}
}

// lockWaited is closed once n sessions wait for an advisory lock.
func lockWaited(pool *pgxpool.Pool, n int) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 500 {
			var waiting int
			err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`).Scan(&waiting)
			if err != nil || waiting >= n {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return done
}
