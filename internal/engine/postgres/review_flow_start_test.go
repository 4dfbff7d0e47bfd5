package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/rosterdb/roster/internal/engine"
	"github.com/rosterdb/roster/internal/pgtest"
)

// An execution roster_flow_claim picked that another worker claims and
// snoozes before the start (waiting again, not ready, RunAt in the future,
// a new epoch) is not started: it is no longer claimable. The claim takes
// nothing and says to look again now (other work may be ready). Lane b has
// no limits (other workers claim it as they always did); worker i's lane a
// has limits, so i claims both lanes through roster_flow_claim.
func TestReviewFlowStartsNothingSnoozedAfterThePick(t *testing.T) {
	e := openAt(t, pgtest.Fresh(t))
	ctx := context.Background()
	x := uuid.New()
	_, err := e.pool.Exec(ctx, `
		INSERT INTO workers VALUES ('ns', 'i', 'w', '{a,b}', '{}', 1, 1000000, 1);
		INSERT INTO lane_limits (namespace, lane, max_running, max_running_per_group, rate, rate_period_ms, paused) VALUES ('ns', 'a', 5, 0, 0, 0, false);
		INSERT INTO executions (id, namespace, lane, priority, payload, max_attempts, created_at_ms, run_at_ms, ready, required_capabilities)
			VALUES ('`+x.String()+`', 'ns', 'b', 0, '', 5, 1, 1, true, '{}')`)
	must(t, err)
	// Another worker's claim-then-snooze of x, not yet committed: it holds x's row.
	other, err := e.pool.Begin(ctx)
	must(t, err)
	defer func() { _ = other.Rollback(ctx) }()
	_, err = other.Exec(ctx, `UPDATE executions SET attempts = attempts + 1, epoch = epoch + 1, ready = false, run_at_ms = 900000 WHERE id = $1`, x)
	must(t, err)

	type result struct {
		res engine.ClaimResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := e.ExecutionClaim(ctx, engine.ClaimParams{Namespace: "ns", InstanceID: "i", NowMs: 100, ExpiresAtMs: 100000, LeaseIDs: []uuid.UUID{uuid.New()}})
		done <- result{res, err}
	}()
	// The claim has picked x and waits for its row in the start.
	deadline := time.Now().Add(5 * time.Second)
	for {
		var n int
		must(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'transactionid' AND NOT granted`).Scan(&n))
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the claim never waited for x's row")
		}
		time.Sleep(10 * time.Millisecond)
	}
	must(t, other.Commit(ctx))
	r := <-done
	must(t, r.err)
	var state string
	var ready bool
	must(t, e.pool.QueryRow(ctx, `SELECT state, ready FROM executions WHERE id = $1`, x).Scan(&state, &ready))
	if len(r.res.Leases) != 0 || state != "waiting" || ready {
		t.Fatalf("the flow claim started x, snoozed to RunAt 900000 (now 100) after its pick: %d leases, state %s ready %v", len(r.res.Leases), state, ready)
	}
	if r.res.NextRunAtMs != 100 {
		t.Fatalf("NextRunAtMs = %d, want 100 (now: what it took was taken by another, look again)", r.res.NextRunAtMs)
	}
}
