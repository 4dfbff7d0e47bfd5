package postgres

import (
	"context"
	"testing"

	"github.com/google/uuid"
	pgdb "github.com/rosterdb/roster/db/postgres"
	"github.com/rosterdb/roster/internal/engine"
	"github.com/rosterdb/roster/internal/pgtest"
)

// "Idle costs nothing": "a claim that finds nothing claimable is a
// read (on PostgreSQL it takes no transaction id and writes no WAL)", and
// README "Flow control": a lane without limits costs nothing extra. A worker
// whose lane has limits claims through roster_flow_claim; when nothing is
// claimable (its lane is empty) that claim must take no transaction id
// either (as TestIdleClaimTakesNoTransactionID checks for the plain claim).
func TestReviewIdleFlowClaimTakesNoTransactionID(t *testing.T) {
	e := openAt(t, pgtest.Fresh(t))
	ctx := context.Background()
	_, err := e.pool.Exec(ctx, `
		INSERT INTO workers VALUES ('ns', 'i', 'w', '{default}', '{}', 1, 1000000, 1);
		INSERT INTO lane_limits (namespace, lane, max_running, max_running_per_group, rate, rate_period_ms, paused) VALUES ('ns', 'default', 5, 0, 0, 0, false)`)
	must(t, err)
	tx, err := e.pool.Begin(ctx)
	must(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	res, err := newQueries(pgdb.New(tx)).flowClaim(ctx, engine.ClaimParams{
		Namespace: "ns", InstanceID: "i", NowMs: 100, ExpiresAtMs: 1100, LeaseIDs: []uuid.UUID{uuid.New()},
	})
	must(t, err)
	var xid *int64
	must(t, tx.QueryRow(ctx, "SELECT pg_current_xact_id_if_assigned()::text::bigint").Scan(&xid))
	if len(res.Leases) != 0 || xid != nil {
		t.Fatalf("an idle flow claim claimed %d and took transaction id %v", len(res.Leases), *xid)
	}
}
