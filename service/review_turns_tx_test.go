package service

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// CreateExecutionsTx in the application's REPEATABLE READ transaction, which
// has taken its snapshot, enqueues grouped work in a lane that a worker
// claimed from meanwhile. (Found by review: the claim had rewritten the
// lane's turn, and the enqueue's INSERT ... ON CONFLICT DO NOTHING into
// lane_turns met that newer row version, which its snapshot could not see:
// SQLSTATE 40001. The enqueue now only reads a lane recorded already.)
func TestReviewTurnsEnqueueTxRepeatableReadAfterClaim(t *testing.T) {
	conformanceShared(t, func(t *testing.T, b backend) {
		if !b.postgres {
			t.Skip("PostgreSQL isolation levels")
		}
		ctx := context.Background()
		loc := b.fresh(t)
		s, _ := b.open(t, loc)
		worker(t, s, "ns", "i", []string{"default"}, nil)
		create(t, s, CreateExecutionArgs{Group: "a"})
		create(t, s, CreateExecutionArgs{Group: "a"})

		conn, err := pgx.Connect(ctx, appURL(t, b, loc))
		must(t, err)
		t.Cleanup(func() { _ = conn.Close(context.Background()) })
		tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
		must(t, err)
		defer tx.Rollback(ctx)
		_, err = tx.Exec(ctx, "SELECT 1") // the application's own work: the snapshot is taken
		must(t, err)

		claim(t, s, "i", t0) // another process claims from the lane (group a)

		_, err = s.CreateExecutionsTx(ctx, tx, []CreateExecutionArgs{{Namespace: "ns", Lane: "default", Group: "b"}})
		if err != nil {
			t.Fatalf("CreateExecutionsTx of group b in a REPEATABLE READ transaction after a claim of group a: %v", err)
		}
		must(t, tx.Commit(ctx))
	})
}
