package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"

	sqlitedb "github.com/rosterdb/roster/db/sqlite"
	"github.com/rosterdb/roster/internal/engine"
)

var _ engine.Enlister = (*Engine)(nil)

// InTx runs fn on the caller's own transaction, a *sql.Tx open on this
// engine's database file (through any connection of the caller's, with
// modernc.org/sqlite): the main database of the transaction's connection
// must be this very file (os.SameFile), else ErrInvalidInput and nothing
// written. fn's statements run on tx (each prepared once per call), in its
// order; the caller commits. The single writer does not serialize them: SQLite's own write
// lock does (a transaction begun deferred that read before it writes may
// get SQLITE_BUSY at its first write; begin it immediate). Other
// connections, this engine's change check included, see the commit.
func (e *Engine) InTx(ctx context.Context, tx any, fn func(ctx context.Context, q engine.Queries) error) error {
	if e.closed.Load() {
		return engine.ErrClosed
	}
	if e.writer == nil {
		return engine.ErrReadOnly
	}
	t, ok := tx.(*sql.Tx)
	if !ok || t == nil {
		return fmt.Errorf("%w: tx: a %T is not a *sql.Tx (SQLite takes a database/sql transaction on the Store's file)", engine.ErrInvalidInput, tx)
	}
	if e.path == "" {
		return fmt.Errorf("%w: tx: an in-memory Store's database is reached by no other connection", engine.ErrInvalidInput)
	}
	var file string
	if err := t.QueryRowContext(ctx, "SELECT file FROM pragma_database_list WHERE name = 'main'").Scan(&file); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%w: tx: reading its database file: %w", ctx.Err(), err) // the caller's own end, not a bad tx
		}
		return fmt.Errorf("%w: tx: reading its database file: %v", engine.ErrInvalidInput, err)
	}
	if !sameFile(file, e.path) {
		return fmt.Errorf("%w: tx: its database %q is not the Store's", engine.ErrInvalidInput, file)
	}
	stmts := &txStmts{tx: t, byQuery: map[string]*sql.Stmt{}}
	defer stmts.close()
	return fn(ctx, newQueries(sqlitedb.New(stmts)))
}

// txStmts runs statements on the caller's transaction, each prepared once
// per InTx: a batch inserts row by row, and SQLite parses a statement
// run unprepared every time.
type txStmts struct {
	tx      *sql.Tx
	byQuery map[string]*sql.Stmt
}

func (s *txStmts) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := s.byQuery[query]; ok {
		return st, nil
	}
	st, err := s.tx.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	s.byQuery[query] = st
	return st, nil
}

func (s *txStmts) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, err := s.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

func (s *txStmts) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return s.tx.PrepareContext(ctx, query)
}

func (s *txStmts) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := s.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

func (s *txStmts) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	st, err := s.stmt(ctx, query)
	if err != nil {
		return s.tx.QueryRowContext(ctx, query, args...) // reports the same error
	}
	return st.QueryRowContext(ctx, args...)
}

func (s *txStmts) close() {
	for _, st := range s.byQuery {
		_ = st.Close()
	}
}

// sameFile reports whether two paths name one existing file.
func sameFile(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}
