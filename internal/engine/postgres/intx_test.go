package postgres

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/lib/pq"
	"github.com/rosterdb/roster/internal/engine"
	"github.com/rosterdb/roster/internal/pgtest"
)

// TestInTxTranslatesEveryDriver: a server error met in a caller's
// database/sql transaction translates as on roster's own connections,
// whichever driver the caller uses: a second row with an execution's id is
// a *engine.ConstraintError naming the primary key, and the driver's own
// error (lib/pq's *pq.Error, pgx's *pgconn.PgError) stays in the chain.
func TestInTxTranslatesEveryDriver(t *testing.T) {
	ctx := context.Background()
	u := pgtest.Fresh(t)
	e := openAt(t, u)
	for _, driver := range []string{"postgres", "pgx"} {
		t.Run(driver, func(t *testing.T) {
			db, err := sql.Open(driver, u)
			must(t, err)
			defer db.Close()
			tx, err := db.BeginTx(ctx, nil)
			must(t, err)
			defer tx.Rollback()
			id, err := uuid.NewV7()
			must(t, err)
			x := engine.Execution{ID: id, Namespace: "ns", Lane: "l", MaxAttempts: 1, CreatedAtMs: 1, RunAtMs: 1}
			err = e.InTx(ctx, tx, func(ctx context.Context, q engine.Queries) error {
				if err := q.ExecutionInsert(ctx, x); err != nil {
					return err
				}
				return q.ExecutionInsert(ctx, x)
			})
			var ce *engine.ConstraintError
			if !errors.As(err, &ce) || ce.Constraint != engine.UniqueExecutionID {
				t.Fatalf("a duplicate id: err = %#v, want the ConstraintError of %s", err, engine.UniqueExecutionID)
			}
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != codeUniqueViolation || pe.ConstraintName != string(engine.UniqueExecutionID) {
				t.Fatalf("no *pgconn.PgError of the violation in the chain: %#v", err)
			}
			if driver == "postgres" {
				var pqe *pq.Error
				if !errors.As(err, &pqe) || pqe.Code != codeUniqueViolation {
					t.Fatalf("lib/pq's error is not in the chain: %#v", err)
				}
			}
		})
	}
}
