package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	pgdb "github.com/rosterdb/roster/db/postgres"
	"github.com/rosterdb/roster/internal/engine"
	"github.com/rosterdb/roster/internal/pgtest"
)

// hookQueries runs a hook after FlowWorker and after FlowStart.
type hookQueries struct {
	queries
	afterWorker, afterStart func()
}

func (h hookQueries) FlowWorker(ctx context.Context, k engine.WorkerKey, nowMs int64) (engine.FlowWorker, error) {
	w, err := h.queries.FlowWorker(ctx, k, nowMs)
	h.afterWorker()
	return w, err
}

func (h hookQueries) FlowStart(ctx context.Context, p engine.ClaimParams, ids []uuid.UUID) ([]engine.ClaimedLease, error) {
	ls, err := h.queries.FlowStart(ctx, p, ids)
	h.afterStart()
	return ls, err
}

// "Caps hold at every instant, fleet-wide". engine.FlowClaim takes
// the claim locks of the lanes FlowWorker listed (its own statement, READ
// COMMITTED), then reads the lanes' limits in a later statement. A lane
// that gets its limits between the two (PutLaneLimits committing then) is
// read as limited but was not locked: a concurrent claim of that lane,
// which does lock it, does not wait, reads what runs without the first
// claim's uncommitted start, and starts another. Lane b gets MaxRunning 1;
// both claims read it, and two of b's executions end up running.
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
	tx, err := e.pool.Begin(ctx)
	must(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	type result struct {
		n   int
		err error
	}
	other := make(chan result, 1)
	h := hookQueries{
		queries: queries{pgdb.New(tx)},
		afterWorker: func() {
			// PutLaneLimits of lane b commits now.
			_, err := e.pool.Exec(ctx, `INSERT INTO lane_limits (namespace, lane, max_running, max_running_per_group, rate, rate_period_ms, paused) VALUES ('ns', 'b', 1, 0, 0, 0, false)`)
			must(t, err)
		},
		afterStart: func() {
			// Another worker of lane b claims while this claim has not committed.
			go func() {
				res, err := e.ExecutionClaim(ctx, p("j"))
				other <- result{len(res.Leases), err}
			}()
			select {
			case r := <-other:
				other <- r
			case <-time.After(2 * time.Second): // it waits for this claim's lock: as it should
			}
		},
	}
	res, err := engine.FlowClaim(ctx, h, p("i"), false)
	must(t, err)
	must(t, tx.Commit(ctx))
	r := <-other
	must(t, r.err)
	var running int
	must(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM executions WHERE lane = 'b' AND state = 'running'`).Scan(&running))
	if running > 1 {
		t.Fatalf("lane b has MaxRunning 1 and %d running (this claim took %d, the other %d)", running, len(res.Leases), r.n)
	}
}
