package service

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/rosterdb/roster/internal/engine"
)

// CreateExecutionsTx creates 1 to 10,000 executions inside the caller's own
// transaction tx, so that they exist exactly when it commits: the
// application's rows and its work are written together or not at all. The
// rules of CreateExecutions hold: every item is validated first (the first
// bad one is ErrInvalidInput naming its index, nothing written), unique keys
// are honoured (an item whose key is held gets the holder's id), Metadata is
// stored, and the Create middleware wraps the call.
//
// tx is a *sql.Tx (database/sql, any driver: PostgreSQL through pgx's stdlib
// or lib/pq; SQLite through modernc.org/sqlite on the Store's file) or, on
// PostgreSQL, a pgx.Tx (github.com/jackc/pgx/v5); another type is
// ErrInvalidInput. It must reach the Store's database and schema (SQLite:
// the same file; PostgreSQL: the same database, current schema and roster
// schema, checked before anything is written): a transaction on another is
// ErrInvalidInput, with nothing written. Idle workers wake when tx commits,
// never before (PostgreSQL: the NOTIFY sent inside tx; SQLite: the change
// check of every Store on the file). The caller commits or rolls back; on
// PostgreSQL an error of a statement of the create aborts tx, as any
// failed statement does. Whatever tx's driver, its errors map to roster's
// as the Store's own do (a lock not taken within the caller's lock_timeout
// is ErrUnavailable, an aborted tx ErrInvalidInput), and the driver's own
// error stays in the chain for the caller's errors.As (lib/pq's *pq.Error,
// pgx's *pgconn.PgError, modernc.org/sqlite's *sqlite.Error). On SQLite begin tx with `_txlock=immediate` in the
// URL (or write first): a deferred transaction that read before it writes
// can meet SQLITE_BUSY at its first write.
func (s *Store) CreateExecutionsTx(ctx context.Context, tx any, items []CreateExecutionArgs) ([]uuid.UUID, error) {
	if err := s.notClosed(); err != nil {
		return nil, err
	}
	if tx == nil {
		return nil, invalid("tx", "must not be nil")
	}
	if _, ok := s.eng.(engine.Enlister); !ok {
		return nil, invalid("tx", "this Store's engine cannot write in a caller's transaction")
	}
	create := func(ctx context.Context, items []CreateExecutionArgs) ([]uuid.UUID, error) {
		return s.createExecutionsTx(ctx, tx, items)
	}
	if len(s.cfg.middleware) == 0 {
		return create(ctx, items)
	}
	return s.createMiddleware(ctx, items, create)
}

// createExecutionsTx is CreateExecutionsTx once its middleware ran.
func (s *Store) createExecutionsTx(ctx context.Context, tx any, items []CreateExecutionArgs) ([]uuid.UUID, error) {
	rows, until, keyed, err := s.batchRows(items)
	if err != nil {
		return nil, err
	}
	var ids []uuid.UUID
	err = s.eng.(engine.Enlister).InTx(ctx, tx, func(ctx context.Context, q engine.Queries) error {
		if err := q.LaneTurnsTouch(ctx, rows); err != nil { // the lanes' turns with the rows
			return err
		}
		if keyed {
			var err error
			ids, err = s.createUniqueIn(ctx, q, rows, until)
			return err
		}
		insert, _ := s.insertBatch(rows)
		if err := insert(ctx, q); err != nil {
			return err
		}
		ids = make([]uuid.UUID, len(rows))
		for i, row := range rows {
			ids[i] = row.ID
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("roster: create in the caller's transaction: %w", s.fromWrite(err))
	}
	return ids, nil
}
