// Package postgres is roster's PostgreSQL engine (github.com/jackc/pgx/v5,
// pgxpool), for a fleet that spans many hosts.
//
// Every write is one READ COMMITTED transaction on a pooled connection; the
// checks that make an operation correct under concurrent writers are in the
// statements that write (conditional UPDATE ... RETURNING, INSERT ... ON
// CONFLICT ... WHERE, FOR UPDATE SKIP LOCKED), and serialization failures
// and deadlocks are retried a bounded number of times. Reads run on the pool.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	pgdb "github.com/rosterdb/roster/db/postgres"
	"github.com/rosterdb/roster/internal/connstr"
	"github.com/rosterdb/roster/internal/engine"
	postgresschema "github.com/rosterdb/roster/schema/postgres"
)

// maxWriteTries bounds how often a write is run again after a serialization
// failure or a deadlock.
const maxWriteTries = 5

// closeWait bounds how long Close waits for the pool to close.
const closeWait = 2 * time.Second

// clockRefresh is how often the offset from the server's clock is measured
// again.
const clockRefresh = 30 * time.Second

// IsURL reports whether path names a PostgreSQL database.
func IsURL(path string) bool {
	return strings.HasPrefix(path, "postgres://") || strings.HasPrefix(path, "postgresql://")
}

// Engine is an open PostgreSQL database.
type Engine struct {
	cfg  engine.Config
	pool *pgxpool.Pool
	sess session
	// contact tells a server that cannot be reached from a busy pool.
	contact *contact
	db      pgdb.DBTX // the pool, as statements sent alone run on it
	q       *pgdb.Queries
	pooled  queries // newQueries(q), built once for reads
	closed  atomic.Bool
	// flowWorkers holds the workers (engine.WorkerKey) whose last claim was
	// a flow claim: their next claim starts as one, without the claim
	// statement's look (a hint only: a flow claim serves any lanes).
	flowWorkers engine.WorkerSet
	// identity is where the engine's connections are (InTx checks a caller's transaction against it).
	identity identity
	// bg ends at Close: background work (the clock) stops at once.
	bg       context.Context
	bgCancel context.CancelFunc

	local      func() time.Time
	offset     atomic.Int64  // server clock - local clock, in nanoseconds
	clockEvery time.Duration // clockRefresh (tests shorten it)
	stop       chan struct{}
	stopOnce   sync.Once
	done       chan struct{}

	logs *engine.LogLimiter
	// The listening connection (listen.go), open while someone subscribes.
	hub         engine.Hub
	listenMu    sync.Mutex
	listener    engine.Loop
	lingering   *time.Timer // stops the listener when nobody subscribed again
	bouncerOnce sync.Once   // says once that LISTEN cannot work behind PgBouncer
}

var (
	_ engine.Engine  = (*Engine)(nil)
	_ engine.Clocked = (*Engine)(nil)
)

// Open connects to the database at rawURL (pgx URL syntax: search_path picks
// the schema, pool_max_conns the pool; roster_pgbouncer=true says PgBouncer
// in transaction pooling mode stands between), migrates it in one
// transaction under an advisory lock (or verifies it), and measures the
// server's clock.
func Open(ctx context.Context, rawURL string, cfg engine.Config) (*Engine, error) {
	e, err := connect(ctx, rawURL, cfg)
	if err != nil {
		return nil, err
	}
	if err := e.start(ctx); err != nil {
		e.pool.Close()
		return nil, redact(err, rawURL)
	}
	go e.keepClock()
	return e, nil
}

// connect parses rawURL and opens the pool, without touching the schema.
func connect(ctx context.Context, rawURL string, cfg engine.Config) (*Engine, error) {
	stripped, bouncer, query, err := stripParam(rawURL)
	if err != nil {
		return nil, err
	}
	pcfg, err := pgxpool.ParseConfig(stripped)
	if err != nil {
		return nil, fmt.Errorf("%w: path: %v", engine.ErrInvalidInput, redact(err, rawURL))
	}
	sess, err := configure(pcfg, bouncer, cfg, query)
	if err != nil {
		return nil, err
	}
	ct := &contact{}
	ct.watch(pcfg)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("roster: open: %w", redact(err, rawURL))
	}
	e := &Engine{
		cfg:        cfg,
		pool:       pool,
		sess:       sess,
		contact:    ct,
		db:         sess.dbtx(pool),
		local:      cfg.LocalClock,
		clockEvery: clockRefresh,
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
	}
	e.q = pgdb.New(e.db)
	e.pooled = newQueries(e.q)
	e.bg, e.bgCancel = context.WithCancel(context.Background())
	if e.local == nil {
		e.local = time.Now
	}
	e.logs = engine.NewLogLimiter(10 * time.Second)
	if e.cfg.Migrations == nil {
		e.cfg.Migrations = postgresschema.FS
	}
	pctx, cancel := context.WithTimeout(ctx, e.sess.opTimeout())
	defer cancel()
	if _, err := e.db.Exec(pctx, "SELECT 1"); err != nil {
		pool.Close()
		e.bgCancel()
		return nil, fmt.Errorf("roster: open: %w", redact(translate(err), rawURL))
	}
	return e, nil
}

func (e *Engine) start(ctx context.Context) error {
	var err error
	if e.cfg.ReadOnly || !e.cfg.Migrate {
		// Only read the version: a role that may only read and write
		// roster's tables creates nothing (README: least privilege).
		err = e.verifyCurrent(ctx)
	} else {
		err = e.withMigrator(ctx, func(g *engine.Migrator) error { return g.Up(e.cfg.Migrate, e.cfg.Logger) })
	}
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, e.sess.opTimeout())
	defer cancel()
	return e.measureClock(ctx)
}

// redact removes the password of rawURL from an error's text: it never
// appears in an error, a log record or the CLI's output. Any URL form
// (multi-host, unparsable, a password parameter) is covered by connstr.
func redact(err error, rawURL string) error {
	if err == nil {
		return nil
	}
	msg := connstr.Scrub(err.Error(), rawURL)
	if msg == err.Error() {
		return err
	}
	return redactedError{msg: msg, err: err}
}

// redactedError keeps the sentinel of an error whose text lost a password.
type redactedError struct {
	msg string
	err error
}

func (r redactedError) Error() string { return r.msg }

// Is lets errors.Is see the sentinels of the wrapped error, not its text.
func (r redactedError) Is(target error) bool { return errors.Is(r.err, target) }

// Close stops the clock and the listening connection, and closes the pool.
func (e *Engine) Close() error {
	if e.closed.Swap(true) {
		return engine.ErrClosed
	}
	e.stopListening()
	e.bgCancel()
	e.stopOnce.Do(func() { close(e.stop) })
	<-e.done
	// The pool closes once the calls in flight end (each bounded by
	// opTimeout) and the connections being made are made or time out
	// (connect_timeout): a silent server must not hold Close that long.
	closed := make(chan struct{})
	go func() {
		e.pool.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(closeWait):
		e.cfg.Logger.Warn("roster: close: connections still busy or connecting; they are closed as they end", "waited", closeWait)
	}
	return nil
}

// Read runs fn with queries on the pool, bounded by the client's timeout.
func (e *Engine) Read(ctx context.Context, fn func(ctx context.Context, q engine.Queries) error) error {
	return engine.Guard(ctx, e.closed.Load, func() error {
		ctx, cancel := context.WithTimeout(ctx, e.sess.opTimeout())
		defer cancel()
		return fn(ctx, e.pooled)
	})
}

// Snapshot runs fn in one REPEATABLE READ, READ ONLY transaction: every
// query sees the same snapshot.
func (e *Engine) Snapshot(ctx context.Context, fn func(ctx context.Context, q engine.Queries) error) error {
	if e.closed.Load() {
		return engine.ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, e.sess.opTimeout())
	defer cancel()
	tx, err := e.sess.begin(ctx, e.pool, txSnapshot)
	if err != nil {
		return fmt.Errorf("roster: begin read: %w", translate(err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	return fn(ctx, newQueries(e.q.WithTx(tx)))
}

// WriteOne runs fn, which issues one statement, on a pooled connection
// without BEGIN and COMMIT: a single statement is atomic by itself. The
// admission time and the retries are Write's.
func (e *Engine) WriteOne(ctx context.Context, fn func(ctx context.Context, q engine.Queries) error) error {
	return e.write(ctx, func(ctx context.Context, q queries) error { return fn(ctx, q) }, false)
}

// Write runs fn in a transaction of its own and returns once it committed
// (nil) or was rolled back (fn's error). A write that cannot get a pooled
// connection within the admission time returns ErrOverloaded. Once begun, a
// write runs to its end even if ctx ends. A serialization failure or a
// deadlock runs fn again, a bounded number of times.
func (e *Engine) Write(ctx context.Context, fn func(ctx context.Context, q engine.Queries) error) error {
	return e.write(ctx, func(ctx context.Context, q queries) error { return fn(ctx, q) }, true)
}

// write is Write (inTx) or WriteOne for the engine's own code, with its
// queries' type.
func (e *Engine) write(ctx context.Context, fn func(ctx context.Context, q queries) error, inTx bool) error {
	return e.onConn(ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
		if !inTx {
			began := time.Now()
			err := fn(ctx, newQueries(pgdb.New(e.sess.dbtx(conn))))
			if e.cfg.Observer != nil && err == nil {
				e.cfg.Observer.Committed(time.Since(began), 1) // autocommit: the statement is the commit
			}
			return err
		}
		tx, err := e.sess.begin(ctx, conn, txWrite)
		if err != nil {
			return fmt.Errorf("roster: begin: %w", translate(err))
		}
		if err := fn(ctx, newQueries(e.q.WithTx(tx))); err != nil {
			_ = tx.Rollback(ctx)
			return err
		}
		committing := time.Now()
		if err := tx.Commit(ctx); err != nil {
			return fmt.Errorf("roster: commit: %w", translate(err))
		}
		if e.cfg.Observer != nil {
			e.cfg.Observer.Committed(time.Since(committing), 1)
		}
		return nil
	})
}

// onConn runs a write on a pooled connection: it waits at most the
// admission time for one (else ErrOverloaded, nothing run; or ErrUnavailable
// when the wait was for a new connection to a server that looks unreachable:
// the last write lost its connection, or connecting has failed for a
// second), runs run to its
// end even if ctx ends (run gets a context without cancellation, bounded by
// the client's timeout, so a silent server fails it with ErrUnavailable),
// and runs it again, a bounded number of times, after a serialization
// failure, a deadlock, or an error that left the server untouched.
func (e *Engine) onConn(ctx context.Context, run func(ctx context.Context, conn *pgxpool.Conn) error) error {
	if e.closed.Load() {
		return engine.ErrClosed
	}
	if e.cfg.ReadOnly {
		return fmt.Errorf("%w: the database was opened read-only", engine.ErrReadOnly)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for try := 1; ; try++ {
		err := e.onConnOnce(ctx, run)
		switch {
		case err == nil:
			return nil
		case !retryable(err) && !safeToRetry(err):
			return err
		case try == maxWriteTries:
			return fmt.Errorf("%w: gave up after %d tries: %w", engine.ErrUnavailable, try, err)
		}
		e.cfg.Logger.Debug("roster: retrying a write", "try", try, "err", err)
		time.Sleep(time.Duration(rand.Int64N(int64(try) * int64(time.Millisecond))))
	}
}

func (e *Engine) onConnOnce(ctx context.Context, run func(ctx context.Context, conn *pgxpool.Conn) error) error {
	// A zero admission time still takes a connection that is free at once
	// (an Acquire whose context has ended looks at none).
	actx, cancel := context.WithTimeout(ctx, max(e.cfg.Admission, minAdmissionWait))
	waiting := time.Now()
	conn, err := e.pool.Acquire(actx)
	cancel()
	if e.cfg.Observer != nil && err == nil {
		e.cfg.Observer.WriteWaited(time.Since(waiting))
	}
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case e.closed.Load():
			return engine.ErrClosed
		case errors.Is(err, context.DeadlineExceeded):
			if st := e.pool.Stat(); st.AcquiredConns() < st.MaxConns() && e.contact.unreachable() {
				// Not every connection was busy: the wait was for a new
				// one, to a server that does not answer.
				return fmt.Errorf("%w: could not connect to the database within %v", engine.ErrUnavailable, e.cfg.Admission)
			}
			return fmt.Errorf("%w: no database connection was free within %v", engine.ErrOverloaded, e.cfg.Admission)
		}
		return fmt.Errorf("roster: acquire: %w", translate(err))
	}
	defer conn.Release()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.sess.opTimeout())
	defer cancel()
	err = run(rctx, conn)
	e.contact.note(err)
	if readOnlyServer(err) {
		// The server this connection reached takes no writes: a standby,
		// reached through an endpoint (a DNS name, a virtual IP, a proxy)
		// that pointed there, or will point elsewhere after a failover.
		// Every pooled connection may be there too, healthy but useless for
		// writing until it ages out: close them all (this one as it is
		// released), so that the next write connects anew.
		e.pool.Reset()
		e.logs.Log(e.cfg.Logger, slog.LevelWarn, "roster: the database server refused a write as read-only (a standby?); reconnecting", "err", err)
	}
	return err
}

// minAdmissionWait is the least a write waits for a pooled connection.
const minAdmissionWait = time.Millisecond

// Check runs the consistency rules of the operations (PostgreSQL checks its
// own pages).
func (e *Engine) Check(ctx context.Context) ([]string, error) {
	if e.closed.Load() {
		return nil, engine.ErrClosed
	}
	return engine.ConsistencyProblems(ctx, []engine.ConsistencyCheck{
		{Problem: "running executions whose attempt is recorded as ended", Count: e.q.ExecutionCheckRunning},
		{Problem: "recorded attempts of a missing execution or of an epoch it never reached", Count: e.q.AttemptCheckEpoch},
		{Problem: "agent states whose kept count is wrong", Count: e.q.AgentCheckCounts},
	}, translate)
}

// Clock returns the fleet's clock: the local clock moved by the last measured
// offset from the database server's.
func (e *Engine) Clock() func() time.Time {
	return func() time.Time { return e.local().Add(time.Duration(e.offset.Load())) }
}

// clockSamples is how many round trips one measurement of the server's
// clock takes; the quickest decides.
const clockSamples = 5

// measureClock measures the server's clock against the local one: several
// round trips, each read at the midpoint of its round trip, and the offset
// of the quickest kept (a round trip delayed one way, by a busy server, a
// retransmission or a descheduled client, errs by up to half its time; the
// quickest errs least).
func (e *Engine) measureClock(ctx context.Context) error {
	best, bestRTT := time.Duration(0), time.Duration(-1)
	for range clockSamples {
		before := e.local()
		var serverUs int64
		if err := e.db.QueryRow(ctx, "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint").Scan(&serverUs); err != nil {
			return fmt.Errorf("roster: reading the server's clock: %w", translate(err))
		}
		after := e.local()
		rtt := after.Sub(before)
		if bestRTT < 0 || rtt < bestRTT {
			best, bestRTT = time.UnixMicro(serverUs).Sub(before.Add(rtt/2)), rtt
		}
	}
	e.offset.Store(int64(best))
	return nil
}

// keepClock measures the offset again every clockRefresh until Close, which
// also ends a measurement under way.
func (e *Engine) keepClock() {
	defer close(e.done)
	t := time.NewTicker(e.clockEvery)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(e.bg, min(clockRefresh/2, e.sess.opTimeout()))
			if err := e.measureClock(ctx); err != nil {
				e.cfg.Logger.Warn("roster: measuring the server's clock failed; keeping the last offset", "err", err)
			}
			cancel()
		}
	}
}

// Pool returns the connection pool (tests and benchmarks).
func (e *Engine) Pool() *pgxpool.Pool { return e.pool }
