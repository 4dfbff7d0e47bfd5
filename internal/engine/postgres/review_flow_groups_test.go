package postgres

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"
	pgdb "github.com/rosterdb/roster/db/postgres"
	"github.com/rosterdb/roster/internal/engine"
	"github.com/rosterdb/roster/internal/pgtest"
)

// Flow control: "A lane without limits costs nothing extra: its
// claim is what it was." A lane that once had an execution with a Group
// (its lane_turns row is never removed, and there is no API to remove
// it) has no limits, yet its worker's claim is refused by the claim
// statement (errFlow) and goes through the flow claim, which takes a
// transaction id even when there is nothing to claim (the contract "Idle costs
// nothing": no transaction id, no WAL).
func TestReviewGroupedLaneWithoutLimitsIdleClaim(t *testing.T) {
	e := openAt(t, pgtest.Fresh(t))
	ctx := context.Background()
	_, err := e.pool.Exec(ctx, `
		INSERT INTO workers VALUES ('ns', 'i', 'w', '{default}', '{}', 1, 1000000, 1);
		INSERT INTO lane_turns (namespace, lane, priority, capabilities) VALUES ('ns', 'default', 0, '{}')`)
	must(t, err)
	p := engine.ClaimParams{Namespace: "ns", InstanceID: "i", NowMs: 100, ExpiresAtMs: 1100, LeaseIDs: []uuid.UUID{uuid.New()}}
	tx, err := e.pool.Begin(ctx)
	must(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	q := newQueries(pgdb.New(tx))
	if _, err := q.executionClaim(ctx, p); !errors.Is(err, errFlow) {
		t.Logf("the claim statement: %v", err)
	} else {
		t.Logf("the claim statement says flow: the claim goes through roster_flow_claim")
	}
	var xid *int64
	must(t, tx.QueryRow(ctx, "SELECT pg_current_xact_id_if_assigned()::text::bigint").Scan(&xid))
	if xid != nil {
		t.Fatalf("the claim statement took transaction id %v", *xid)
	}
	res, err := q.flowClaim(ctx, p)
	must(t, err)
	must(t, tx.QueryRow(ctx, "SELECT pg_current_xact_id_if_assigned()::text::bigint").Scan(&xid))
	if len(res.Leases) != 0 || xid != nil {
		t.Fatalf("an idle claim of a lane without limits (groups only) claimed %d and took transaction id %v", len(res.Leases), *xid)
	}
}
