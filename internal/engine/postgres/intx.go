package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	pgdb "github.com/rosterdb/roster/db/postgres"
	"github.com/rosterdb/roster/internal/engine"
)

var _ engine.Enlister = (*Engine)(nil)

// InTx runs fn on the caller's own transaction: a pgx.Tx, or a *sql.Tx of
// any database/sql driver (pgx's stdlib, lib/pq), whose statements are sent
// with their arrays as text, which every driver passes on. Before anything
// is written it checks that tx reaches this engine's database and schema:
// the same current_database() and current_schema(), and the same
// roster_identity row (not a namesake schema on another server); else
// ErrInvalidInput. These reads cannot fail on a transaction that is open,
// so a refused tx is left as it was. fn's statements wake workers with
// pg_notify, which PostgreSQL delivers when the caller commits (never if
// it rolls back). An error of a statement aborts the caller's
// transaction, as any failed statement does on PostgreSQL: roll it back.
// A server error of another driver (lib/pq) translates as pgx's does (see
// fromDriver).
func (e *Engine) InTx(ctx context.Context, tx any, fn func(ctx context.Context, q engine.Queries) error) error {
	if e.closed.Load() {
		return engine.ErrClosed
	}
	if e.cfg.ReadOnly {
		return engine.ErrReadOnly
	}
	var db pgdb.DBTX
	switch t := tx.(type) {
	case pgx.Tx:
		if t == nil {
			return fmt.Errorf("%w: tx: nil pgx.Tx", engine.ErrInvalidInput)
		}
		db = t
	case *sql.Tx:
		if t == nil {
			return fmt.Errorf("%w: tx: nil *sql.Tx", engine.ErrInvalidInput)
		}
		db = sqlTx{t}
	default:
		return fmt.Errorf("%w: tx: a %T is neither a *sql.Tx nor a pgx.Tx", engine.ErrInvalidInput, tx)
	}
	q := pgdb.New(db)
	if err := e.sameSchema(ctx, q); err != nil {
		return err
	}
	return fn(ctx, newQueries(q))
}

// identity is where an engine's own connections are: its database, schema
// and identity row, read at the first InTx that needs them.
type identity struct {
	mu     sync.Mutex
	known  bool
	db, ns string
	id     uuid.UUID
}

// own reads (once it succeeded) where the engine's own connections are.
func (e *Engine) own(ctx context.Context) (*identity, error) {
	own := &e.identity
	own.mu.Lock()
	defer own.mu.Unlock()
	if own.known {
		return own, nil
	}
	r, err := e.q.IdentityCheck(ctx)
	if err != nil {
		return nil, translate(err)
	}
	if !r.Present {
		return nil, fmt.Errorf("roster: the Store's schema %q has no roster_identity table", r.Schema)
	}
	id, err := e.q.IdentityGet(ctx)
	if err != nil {
		return nil, translate(err)
	}
	own.db, own.ns, own.id, own.known = r.Database, r.Schema, id, true
	return own, nil
}

// sameSchema checks that q (the caller's transaction) reaches this engine's
// database and schema.
func (e *Engine) sameSchema(ctx context.Context, q *pgdb.Queries) error {
	own, err := e.own(ctx)
	if err != nil {
		return err
	}
	theirs, err := q.IdentityCheck(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return translate(err) // the caller's own end (its error in the chain), not a bad tx
		}
		return fmt.Errorf("%w: tx: reading where it is: %v", engine.ErrInvalidInput, translate(err))
	}
	if theirs.Database != own.db || theirs.Schema != own.ns || !theirs.Present {
		return fmt.Errorf("%w: tx: it is on database %q, schema %q, not the Store's (database %q, schema %q)",
			engine.ErrInvalidInput, theirs.Database, theirs.Schema, own.db, own.ns)
	}
	id, err := q.IdentityGet(ctx)
	if err != nil {
		return translate(err)
	}
	if id != own.id {
		return fmt.Errorf("%w: tx: database %q, schema %q is a namesake of the Store's on another server",
			engine.ErrInvalidInput, theirs.Database, theirs.Schema)
	}
	return nil
}

// sqlTx runs the generated pgx code on a database/sql transaction: arrays
// and uuids go as PostgreSQL text (every driver passes a string on, and the
// statements cast each parameter), rows come back through database/sql's
// scanning (the statements run this way return scalars only).
type sqlTx struct{ tx *sql.Tx }

// textTypes encodes arrays as PostgreSQL text.
var textTypes = pgtype.NewMap()

// args turns the generated code's arguments into values every database/sql
// driver takes.
func (sqlTx) args(args []any) ([]any, error) {
	out := make([]any, len(args))
	for i, a := range args {
		var oid uint32
		switch v := a.(type) {
		case uuid.UUID:
			out[i] = v.String()
			continue
		case []uuid.UUID:
			oid = pgtype.UUIDArrayOID
		case []string:
			oid = pgtype.TextArrayOID
		case []int64:
			oid = pgtype.Int8ArrayOID
		case []int32:
			oid = pgtype.Int4ArrayOID
		case []bool:
			oid = pgtype.BoolArrayOID
		case [][]byte:
			oid = pgtype.ByteaArrayOID
		default:
			out[i] = a
			continue
		}
		buf, err := textTypes.Encode(oid, pgtype.TextFormatCode, a, nil)
		if err != nil {
			return nil, fmt.Errorf("roster: encode parameter %d (%T) as text: %w", i+1, a, err)
		}
		out[i] = string(buf)
	}
	return out, nil
}

func (t sqlTx) Exec(ctx context.Context, query string, args ...any) (pgconn.CommandTag, error) {
	a, err := t.args(args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	res, err := t.tx.ExecContext(ctx, query, a...)
	if err != nil {
		return pgconn.CommandTag{}, driverErr(ctx, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	return pgconn.NewCommandTag(fmt.Sprintf("SELECT %d", n)), nil
}

func (t sqlTx) Query(ctx context.Context, query string, args ...any) (pgx.Rows, error) {
	a, err := t.args(args)
	if err != nil {
		return nil, err
	}
	rows, err := t.tx.QueryContext(ctx, query, a...)
	if err != nil {
		return nil, driverErr(ctx, err)
	}
	return &sqlRows{rows: rows, ctx: ctx}, nil
}

func (t sqlTx) QueryRow(ctx context.Context, query string, args ...any) pgx.Row {
	a, err := t.args(args)
	if err != nil {
		return errRow{err}
	}
	return sqlRow{t.tx.QueryRowContext(ctx, query, a...), ctx}
}

// sqlRow is a *sql.Row as a pgx.Row: no row is pgx.ErrNoRows.
type sqlRow struct {
	row *sql.Row
	ctx context.Context
}

func (r sqlRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return pgx.ErrNoRows
	}
	return driverErr(r.ctx, err)
}

// errRow is a pgx.Row that failed before it was sent.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// sqlRows is *sql.Rows as pgx.Rows, for the generated code's loop (Next,
// Scan, Err, Close). The embedded interface (nil) stands for the methods a
// later pgx may add, which that loop never calls.
type sqlRows struct {
	pgx.Rows
	rows *sql.Rows
	ctx  context.Context
	err  error
}

// TypeMap is the map this package encodes text with (pgx 5.11 and later ask
// for one).
func (r *sqlRows) TypeMap() *pgtype.Map { return textTypes }

func (r *sqlRows) Close()                                       { r.err = errors.Join(r.err, r.rows.Close()) }
func (r *sqlRows) Err() error                                   { return driverErr(r.ctx, errors.Join(r.err, r.rows.Err())) }
func (r *sqlRows) CommandTag() pgconn.CommandTag                { return pgconn.CommandTag{} }
func (r *sqlRows) FieldDescriptions() []pgconn.FieldDescription { return nil }
func (r *sqlRows) Next() bool                                   { return r.rows.Next() }
func (r *sqlRows) Scan(dest ...any) error                       { return driverErr(r.ctx, r.rows.Scan(dest...)) }
func (r *sqlRows) RawValues() [][]byte                          { return nil }
func (r *sqlRows) Conn() *pgx.Conn                              { return nil }

func (r *sqlRows) Values() ([]any, error) {
	cols, err := r.rows.Columns()
	if err != nil {
		return nil, err
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := r.rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	return vals, nil
}

var _ driver.Valuer = pgtype.Text{} // the generated code's nullable text passes through database/sql

// sqlStater is a server error of a database/sql driver other than pgx's
// stdlib (which returns *pgconn.PgError itself): lib/pq's *pq.Error
// reports its SQLSTATE this way.
type sqlStater interface{ SQLState() string }

// driverError is another driver's server error as translate reads pgx's:
// it unwraps both to a *pgconn.PgError with the same SQLSTATE, message and
// constraint (so it maps to the same roster error) and to the driver's own
// error (so the caller's errors.As of its driver's type still finds it).
type driverError struct {
	pg  *pgconn.PgError
	err error
}

func (e *driverError) Error() string   { return e.err.Error() }
func (e *driverError) Unwrap() []error { return []error{e.pg, e.err} }

// pgErrorFields are the exported string fields of a driver's error struct
// that name the same thing as a pgconn.PgError field (lib/pq's *pq.Error
// has them all).
var pgErrorFields = []struct {
	name string
	dst  func(*pgconn.PgError) *string
}{
	{"Message", func(p *pgconn.PgError) *string { return &p.Message }},
	{"Detail", func(p *pgconn.PgError) *string { return &p.Detail }},
	{"Constraint", func(p *pgconn.PgError) *string { return &p.ConstraintName }},
	{"Table", func(p *pgconn.PgError) *string { return &p.TableName }},
	{"Column", func(p *pgconn.PgError) *string { return &p.ColumnName }},
}

// driverErr is an error of the caller's driver as translate reads pgx's:
// one met after ctx ended is the caller's own cancellation or deadline,
// with ctx's error first in the chain (a driver such as lib/pq answers a
// cancel with the server's 57014, which from roster's own connections means
// a statement timeout: not that); else see fromDriver.
func driverErr(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("%w: %w", ctx.Err(), err)
	}
	return fromDriver(err)
}

// fromDriver makes an error of a caller's database/sql driver readable by
// translate: a server error that reports its SQLSTATE becomes a
// driverError; anything else (pgx's own errors, a broken connection) is
// returned as it is.
func fromDriver(err error) error {
	var pe *pgconn.PgError
	var st sqlStater
	if err == nil || errors.As(err, &pe) || !errors.As(err, &st) {
		return err
	}
	pg := &pgconn.PgError{Code: st.SQLState(), Message: err.Error()}
	if v := reflect.Indirect(reflect.ValueOf(st)); v.Kind() == reflect.Struct {
		for _, f := range pgErrorFields {
			if fv := v.FieldByName(f.name); fv.IsValid() && fv.Kind() == reflect.String && fv.String() != "" {
				*f.dst(pg) = fv.String()
			}
		}
	}
	return &driverError{pg: pg, err: err}
}
