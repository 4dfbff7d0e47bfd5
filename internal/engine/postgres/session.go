package postgres

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rosterdb/roster/internal/engine"
)

// What roster sets on every connection, whatever the database's or the
// role's defaults (README "Whatever the server's defaults"). The URL may set
// the timeouts otherwise; the isolation level it cannot.
const (
	// Every roster statement is a short seek or a bounded batch: one that
	// runs for half a minute is stuck.
	defaultStatementTimeout = 30 * time.Second
	// A row lock held for seconds is held by something stuck (an operator's
	// LOCK, a client gone silent mid-transaction).
	defaultLockTimeout = 10 * time.Second
	// roster never leaves a transaction idle: one idle this long belongs to
	// a client that vanished, and its locks are released.
	defaultIdleInTransaction = 60 * time.Second
	// Dialling and the startup exchange, unless the URL's connect_timeout
	// says otherwise.
	defaultConnectTimeout = 10 * time.Second
	// TCP keepalives, both ways, and how long sent data may stay
	// unacknowledged: a peer that vanished is noticed within about 15 s
	// even when no statement is running.
	keepAliveIdle     = 5 * time.Second
	keepAliveInterval = 5 * time.Second
	keepAliveCount    = 3
	tcpUserTimeout    = 15 * time.Second
	// opGrace is how long after the statement timeout the client gives up
	// on a silent server by itself (the server cancels first when it can).
	opGrace = 2 * time.Second
)

// pgbouncerParam is roster's own URL parameter (stripped before pgx reads
// the URL): roster_pgbouncer=true says a pooler in transaction pooling mode
// (PgBouncer) stands between roster and the server. roster detects nothing
// by itself.
const pgbouncerParam = "roster_pgbouncer"

// bouncerStartupParams are the startup parameters PgBouncer tracks itself
// and accepts from a client; it refuses any other (unless configured to
// ignore it, and then it is lost). Behind PgBouncer every other setting is
// applied in each transaction instead.
var bouncerStartupParams = []string{"application_name", "client_encoding", "datestyle", "timezone", "standard_conforming_strings"}

// session is how the engine makes each transaction run under roster's
// settings: on a direct connection they are startup parameters, set once;
// behind PgBouncer every transaction (and every statement sent alone, which
// becomes a pipeline) starts by setting them locally.
type session struct {
	bouncer bool
	// local: the settings applied in each transaction behind PgBouncer, as
	// one statement (empty on a direct connection).
	local string
	// readOnly: every transaction is READ ONLY.
	readOnly bool
	// statementTimeout in force (0: none was asked, the client bound uses
	// the default).
	statementTimeout time.Duration
}

// configure applies roster's settings to pcfg (parsed from the URL without
// roster's own parameter) and returns how transactions keep them.
func configure(pcfg *pgxpool.Config, bouncer bool, cfg engine.Config, urlQuery url.Values) (session, error) {
	cc := pcfg.ConnConfig
	params := cc.RuntimeParams
	setDefault := func(k, v string) {
		if _, set := params[k]; !set {
			params[k] = v
		}
	}
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	// roster's statements are short index seeks: JIT compilation would only
	// add milliseconds to each (a claim's loose scan has a high estimated
	// cost). The URL may still set jit.
	setDefault("jit", "off")
	setDefault("statement_timeout", ms(defaultStatementTimeout))
	setDefault("lock_timeout", ms(defaultLockTimeout))
	setDefault("idle_in_transaction_session_timeout", ms(defaultIdleInTransaction))
	setDefault("tcp_keepalives_idle", strconv.Itoa(int(keepAliveIdle.Seconds())))
	setDefault("tcp_keepalives_interval", strconv.Itoa(int(keepAliveInterval.Seconds())))
	setDefault("tcp_keepalives_count", strconv.Itoa(keepAliveCount))
	setDefault("tcp_user_timeout", ms(tcpUserTimeout))
	// Every write is correct under READ COMMITTED, with its check in the
	// statement that writes; a default of SERIALIZABLE would only make
	// statements fail. Not even the URL may change it.
	params["default_transaction_isolation"] = "read committed"
	if !cfg.SyncFull {
		params["synchronous_commit"] = "off"
	}
	if cfg.ReadOnly {
		params["default_transaction_read_only"] = "on"
	}
	s := session{bouncer: bouncer, readOnly: cfg.ReadOnly}
	st, err := pgDuration(params["statement_timeout"])
	if err != nil {
		return s, fmt.Errorf("%w: path: statement_timeout: %v", engine.ErrInvalidInput, err)
	}
	s.statementTimeout = st

	if !urlQuery.Has("connect_timeout") && cc.ConnectTimeout == 0 {
		cc.ConnectTimeout = defaultConnectTimeout
	}
	dialer := &net.Dialer{
		Timeout: cc.ConnectTimeout,
		KeepAliveConfig: net.KeepAliveConfig{
			Enable: true, Idle: keepAliveIdle, Interval: keepAliveInterval, Count: keepAliveCount,
		},
		Control: setUserTimeout,
	}
	cc.DialFunc = dialer.DialContext

	pcfg.AfterConnect = func(_ context.Context, conn *pgx.Conn) error {
		m := conn.TypeMap()
		registerUUID(m)
		if bouncer {
			// Sent without a description, parameters are typed by their
			// Go type: say which PostgreSQL type roster's UUIDs are.
			m.RegisterDefaultPgType(uuid.UUID{}, "uuid")
			m.RegisterDefaultPgType([]uuid.UUID{}, "_uuid")
		}
		return nil
	}
	if !bouncer {
		// Every statement is prepared once per connection and its plan
		// kept: they are index seeks whose best plan does not depend on the
		// values bound. Left to itself PostgreSQL plans the claim anew at
		// every call (a custom plan for its LIMIT looks cheaper than the
		// generic one), which cost a fifth of the server's CPU per job. The
		// URL may still set it.
		setDefault("plan_cache_mode", "force_generic_plan")
		return s, nil
	}
	// Behind PgBouncer: no session state across transactions. Prepared
	// statements do not survive from one transaction to the next (PgBouncer
	// before 1.21), so statements are sent unnamed, each with its
	// parameters; and the settings move from the startup packet into each
	// transaction.
	if !urlQuery.Has("default_query_exec_mode") {
		cc.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	var keys []string
	for k := range params {
		if !slices.Contains(bouncerStartupParams, strings.ToLower(k)) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var sets []string
	for _, k := range keys {
		v := params[k]
		delete(params, k)
		switch k {
		case "default_transaction_isolation", "default_transaction_read_only":
			continue // in each BEGIN (SET TRANSACTION for a statement alone)
		}
		sets = append(sets, fmt.Sprintf("pg_catalog.set_config(%s, %s, true)", quoteLiteral(k), quoteLiteral(v)))
	}
	if len(sets) > 0 {
		s.local = "SELECT " + strings.Join(sets, ", ")
	}
	return s, nil
}

// pgDuration parses a PostgreSQL time setting as statement_timeout takes it
// (a number of milliseconds, or a number with a unit).
func pgDuration(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, nil
	}
	i := strings.IndexFunc(v, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := v, "ms"
	if i >= 0 {
		num, unit = v[:i], strings.TrimSpace(v[i:])
	}
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("not a duration: %q", v)
	}
	scale := map[string]time.Duration{
		"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second, "min": time.Minute,
		"h": time.Hour, "d": 24 * time.Hour,
	}[unit]
	if scale == 0 {
		return 0, fmt.Errorf("not a duration: %q", v)
	}
	return time.Duration(n * float64(scale)), nil
}

// quoteLiteral quotes s as an SQL string literal, whatever
// standard_conforming_strings says.
func quoteLiteral(s string) string {
	if strings.Contains(s, `\`) {
		return "E'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", "''") + "'"
	}
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// opTimeout bounds each engine call on the client's side, for a server that
// went silent (a half-open connection, a proxy that stopped forwarding): the
// statement timeout, plus a grace for the server's own cancellation to
// arrive first.
func (s session) opTimeout() time.Duration {
	st := s.statementTimeout
	if st <= 0 {
		st = defaultStatementTimeout
	}
	return st + opGrace
}

// txKind is the kind of transaction begin starts.
type txKind int

const (
	txWrite    txKind = iota // READ COMMITTED
	txSnapshot               // REPEATABLE READ, READ ONLY
	txMigrate                // READ COMMITTED, without timeouts: a migration may build indexes
)

// beginSQL is the statement that begins a transaction of kind k, with
// roster's settings: one round trip, as a plain BEGIN.
func (s session) beginSQL(k txKind) string {
	q := "BEGIN ISOLATION LEVEL READ COMMITTED"
	switch {
	case k == txSnapshot:
		q = "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"
	case s.readOnly:
		q += ", READ ONLY"
	}
	if s.local != "" {
		q += "; " + s.local
	}
	if k == txMigrate {
		q += "; SET LOCAL statement_timeout = 0; SET LOCAL lock_timeout = 0"
	}
	return q
}

// begin starts a transaction of kind k on db.
func (s session) begin(ctx context.Context, db interface {
	BeginTx(context.Context, pgx.TxOptions) (pgx.Tx, error)
}, k txKind) (pgx.Tx, error) {
	return db.BeginTx(ctx, pgx.TxOptions{BeginQuery: s.beginSQL(k)})
}

// prelude is what a statement sent alone is preceded by behind PgBouncer, in
// the same pipeline (one implicit transaction, one round trip): the
// isolation level, then the settings.
func (s session) prelude() []string {
	if !s.bouncer {
		return nil
	}
	p := []string{"SET TRANSACTION ISOLATION LEVEL READ COMMITTED"}
	if s.readOnly {
		p[0] += ", READ ONLY"
	}
	if s.local != "" {
		p = append(p, s.local)
	}
	return p
}

// batcher sends a batch of statements in one pipeline: a pool, a pooled
// connection.
type batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// dbtx is what the generated queries run on outside a transaction of
// roster's: db itself on a direct connection; behind PgBouncer, a pipeline
// of the prelude and the statement.
func (s session) dbtx(db interface {
	batcher
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
	Query(context.Context, string, ...any) (pgx.Rows, error)
	QueryRow(context.Context, string, ...any) pgx.Row
}) interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
	Query(context.Context, string, ...any) (pgx.Rows, error)
	QueryRow(context.Context, string, ...any) pgx.Row
} {
	if !s.bouncer {
		return db
	}
	return preluded{db: db, prelude: s.prelude()}
}

// preluded runs each statement in a pipeline after the prelude.
type preluded struct {
	db      batcher
	prelude []string
}

// send queues the prelude and the statement, and reads the prelude's
// results; the statement's are next.
func (p preluded) send(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	b := &pgx.Batch{}
	for _, q := range p.prelude {
		b.Queue(q)
	}
	b.Queue(sql, args...)
	br := p.db.SendBatch(ctx, b)
	for range p.prelude {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return nil, err
		}
	}
	return br, nil
}

func (p preluded) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	br, err := p.send(ctx, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

func (p preluded) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	br, err := p.send(ctx, sql, args)
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

func (p preluded) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := p.Query(ctx, sql, args...)
	return batchRow{rows: rows, err: err}
}

// batchRows are a pipelined statement's rows: once read to their end (or
// closed) the pipeline is closed too, and its error (the implicit
// transaction's commit) is theirs.
type batchRows struct {
	pgx.Rows
	br     pgx.BatchResults
	closed bool
	err    error
}

func (r *batchRows) finish() {
	if r.closed {
		return
	}
	r.closed = true
	r.Rows.Close()
	r.err = r.Rows.Err()
	if err := r.br.Close(); r.err == nil {
		r.err = err
	}
}

func (r *batchRows) Next() bool {
	if r.closed {
		return false
	}
	if r.Rows.Next() {
		return true
	}
	r.finish()
	return false
}

func (r *batchRows) Close() { r.finish() }

func (r *batchRows) Err() error {
	if r.closed {
		return r.err
	}
	return r.Rows.Err()
}

// batchRow is QueryRow's answer on a pipeline, as pgx's own: the first row,
// or pgx.ErrNoRows.
type batchRow struct {
	rows pgx.Rows
	err  error
}

func (r batchRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

// stripParam removes roster's own parameter from rawURL's query, and
// reports whether it was set to true.
func stripParam(rawURL string) (string, bool, url.Values, error) {
	base, query, _ := strings.Cut(rawURL, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return rawURL, false, nil, nil // pgx reports it
	}
	on := false
	if q.Has(pgbouncerParam) {
		on, err = strconv.ParseBool(q.Get(pgbouncerParam))
		if err != nil {
			return "", false, nil, fmt.Errorf("%w: path: %s must be true or false", engine.ErrInvalidInput, pgbouncerParam)
		}
		q.Del(pgbouncerParam)
	}
	if len(q) == 0 {
		return base, on, q, nil
	}
	return base + "?" + q.Encode(), on, q, nil
}
