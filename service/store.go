// Package service is roster's public API: a Store that keeps the live state of
// a fleet (workers, executions and their leases, agent processes) in one
// SQLite database, composing the generated queries of package db into
// transactional operations.
package service

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rosterdb/roster/db"
	"github.com/rosterdb/roster/schema"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
	sqlite3 "modernc.org/sqlite/lib"
)

// Durability chooses how a file database syncs its commits.
type Durability int

const (
	// DurabilityFull (synchronous=FULL): an operation that returned nil
	// survives a power cut. The default.
	DurabilityFull Durability = iota
	// DurabilityNormal (synchronous=NORMAL): an operation that returned nil
	// survives a crash of the process, not necessarily of the machine.
	DurabilityNormal
)

// String returns the SQLite synchronous setting of d.
func (d Durability) String() string {
	switch d {
	case DurabilityFull:
		return "FULL"
	case DurabilityNormal:
		return "NORMAL"
	}
	return fmt.Sprintf("Durability(%d)", int(d))
}

// Option configures Open.
type Option func(*config)

type config struct {
	now           func() time.Time
	logger        *slog.Logger
	durability    Durability
	readConns     int
	queueCapacity int
	admission     time.Duration
	busyTimeout   time.Duration
	migrate       bool
	maxBatch      int
	migrations    fs.FS // tests substitute their own
}

func defaultConfig() config {
	return config{
		now:           time.Now,
		logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		durability:    DurabilityFull,
		readConns:     4,
		queueCapacity: 256,
		admission:     2 * time.Second,
		busyTimeout:   5 * time.Second,
		migrate:       true,
		maxBatch:      128,
		migrations:    schema.FS,
	}
}

// WithClock sets the clock used wherever an argument's time is zero. The
// default is time.Now.
func WithClock(now func() time.Time) Option { return func(c *config) { c.now = now } }

// WithLogger sets the logger of the Store and its helpers. The default
// discards every record.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithDurability chooses DurabilityFull (the default) or DurabilityNormal.
func WithDurability(d Durability) Option { return func(c *config) { c.durability = d } }

// WithReadConns sets the size of the read-only connection pool (default 4).
func WithReadConns(n int) Option { return func(c *config) { c.readConns = n } }

// WithWriteQueue bounds the queue of writes waiting for the writer (default
// 256) and how long a write may wait for a place in it before it fails with
// ErrOverloaded (default 2s).
func WithWriteQueue(capacity int, admission time.Duration) Option {
	return func(c *config) { c.queueCapacity, c.admission = capacity, admission }
}

// WithoutMigrate makes Open verify that the schema is current instead of
// migrating it: an outdated database is refused with ErrSchemaOutdated.
func WithoutMigrate() Option { return func(c *config) { c.migrate = false } }

// WithBusyTimeout sets how long a connection waits for a lock held by another
// process before SQLite reports it busy (default 5s).
func WithBusyTimeout(d time.Duration) Option { return func(c *config) { c.busyTimeout = d } }

func (c *config) validate() error {
	switch {
	case c.now == nil:
		return invalid("WithClock", "nil clock")
	case c.logger == nil:
		return invalid("WithLogger", "nil logger")
	case c.durability != DurabilityFull && c.durability != DurabilityNormal:
		return invalid("WithDurability", "unknown durability %d", int(c.durability))
	case c.readConns < 1:
		return invalid("WithReadConns", "%d is below 1", c.readConns)
	case c.queueCapacity < 1:
		return invalid("WithWriteQueue", "capacity %d is below 1", c.queueCapacity)
	case c.admission < 0:
		return invalid("WithWriteQueue", "negative admission time %v", c.admission)
	case c.busyTimeout < 0:
		return invalid("WithBusyTimeout", "negative timeout %v", c.busyTimeout)
	}
	return nil
}

// Store is a roster database. It is safe for concurrent use.
//
// Every write runs on one writer connection, in a BEGIN IMMEDIATE transaction
// shared by the writes queued at that moment (group commit), each isolated in
// its own savepoint. Reads use a separate read-only pool.
type Store struct {
	cfg    config
	log    *slog.Logger
	writer *sql.DB     // exactly one connection
	reader *sql.DB     // read-only pool; the writer itself for ":memory:"
	wq, rq *db.Queries // every query, prepared on the writer and on the reader pool

	queue      chan *writeOp
	quit       chan struct{}
	writerDone chan struct{}
	closed     atomic.Bool
	closeOnce  sync.Once
}

// writeOp is one operation waiting for the writer.
type writeOp struct {
	ctx  context.Context
	fn   func(ctx context.Context, q *db.Queries) error
	done chan error // buffered: the writer never blocks on a reply
}

// Open opens (creating it with mode 0600 if absent) the database at path, or a
// private in-memory database for ":memory:", and applies every pending
// migration atomically under SQLite's write lock, so that many processes may
// Open one new file at once.
func Open(ctx context.Context, path string, opts ...Option) (*Store, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if path == "" {
		return nil, invalid("path", "must not be empty")
	}
	s := &Store{
		cfg:        cfg,
		log:        cfg.logger,
		queue:      make(chan *writeOp, cfg.queueCapacity),
		quit:       make(chan struct{}),
		writerDone: make(chan struct{}),
	}
	if err := s.openDBs(path); err != nil {
		return nil, err
	}
	// On a brand-new file, a connection switching it to WAL can meet another
	// Open's lock in a way SQLite reports at once as busy, without waiting
	// (deadlock avoidance): retry within the busy timeout.
	if err := retryBusy(ctx, cfg.busyTimeout, func() error { return s.writer.PingContext(ctx) }); err != nil {
		_ = s.closeDBs()
		return nil, fmt.Errorf("roster: open %s: %w", path, err)
	}
	if err := retryBusy(ctx, cfg.busyTimeout, func() error {
		return migrateSchema(ctx, s.writer, cfg.migrations, cfg.migrate, s.log)
	}); err != nil {
		_ = s.closeDBs()
		return nil, err
	}
	s.prepare(ctx)
	go s.runWriter()
	s.log.Debug("roster: store open", "path", path, "durability", cfg.durability.String())
	return s, nil
}

func (s *Store) openDBs(path string) error {
	busy := fmt.Sprintf("busy_timeout(%d)", s.cfg.busyTimeout.Milliseconds())
	if path == ":memory:" {
		// A private in-memory database lives in one connection: readers share it.
		q := url.Values{"_pragma": {busy, "foreign_keys(1)"}, "_txlock": {"immediate"}}
		w, err := sql.Open("sqlite", ":memory:?"+q.Encode())
		if err != nil {
			return fmt.Errorf("roster: open: %w", err)
		}
		w.SetMaxOpenConns(1)
		w.SetMaxIdleConns(1)
		w.SetConnMaxLifetime(0)
		w.SetConnMaxIdleTime(0)
		s.writer, s.reader = w, w
		return nil
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("roster: open %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("roster: open %s: %w", path, err)
	}
	name := "file:" + (&url.URL{Path: path}).EscapedPath()
	wq := url.Values{
		"_pragma": {busy, "journal_mode(WAL)", "synchronous(" + s.cfg.durability.String() + ")", "foreign_keys(1)"},
		"_txlock": {"immediate"},
	}
	w, err := sql.Open("sqlite", name+"?"+wq.Encode())
	if err != nil {
		return fmt.Errorf("roster: open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	rq := url.Values{"_pragma": {busy, "query_only(1)"}}
	r, err := sql.Open("sqlite", name+"?"+rq.Encode())
	if err != nil {
		_ = w.Close()
		return fmt.Errorf("roster: open %s: %w", path, err)
	}
	r.SetMaxOpenConns(s.cfg.readConns)
	r.SetMaxIdleConns(s.cfg.readConns)
	s.writer, s.reader = w, r
	return nil
}

// prepare compiles every query once for the writer and once for the read pool
// (where each connection prepares it again on first use). Should the schema
// lack a table a query needs (only with substituted migrations), the queries
// run unprepared instead: slower, not different.
func (s *Store) prepare(ctx context.Context) {
	prepared := func(conn *sql.DB) *db.Queries {
		q, err := db.Prepare(ctx, conn)
		if err != nil {
			s.log.Warn("roster: running queries unprepared", "err", err)
			return db.New(conn)
		}
		return q
	}
	s.wq = prepared(s.writer)
	s.rq = s.wq
	if s.reader != s.writer {
		s.rq = prepared(s.reader)
	}
}

func (s *Store) closeDBs() error {
	var err error
	if s.wq != nil {
		err = s.wq.Close()
	}
	if s.rq != nil && s.rq != s.wq {
		err = errors.Join(err, s.rq.Close())
	}
	err = errors.Join(err, s.writer.Close())
	if s.reader != s.writer {
		err = errors.Join(err, s.reader.Close())
	}
	return err
}

// Close stops the writer, fails every queued write with ErrClosed and closes
// the database. After Close every method returns ErrClosed.
func (s *Store) Close() error {
	err := ErrClosed
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		close(s.quit)
		<-s.writerDone
		err = s.closeDBs()
	})
	return err
}

// retryBusy runs fn until it returns anything but SQLITE_BUSY, or until the
// timeout has passed, backing off between tries.
func retryBusy(ctx context.Context, timeout time.Duration, fn func() error) error {
	deadline := time.Now().Add(timeout)
	backoff := time.Millisecond
	for {
		err := fn()
		if err == nil || sqliteCode(err)&0xff != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff + time.Duration(rand.Int64N(int64(backoff)))):
		}
		backoff = min(2*backoff, 50*time.Millisecond)
	}
}

// now returns t, or the Store's clock when t is zero, truncated to the
// millisecond in UTC.
func (s *Store) now(t time.Time) time.Time {
	if t.IsZero() {
		t = s.cfg.now()
	}
	return t.UTC().Truncate(time.Millisecond)
}

// read runs fn on the read-only pool; fn passes ctx to its queries.
func (s *Store) read(ctx context.Context, fn func(q *db.Queries) error) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	err := fn(s.rq)
	if err != nil && s.closed.Load() {
		return ErrClosed
	}
	return err
}

// write runs fn in the writer's transaction, inside a savepoint of its own, and
// returns once that transaction has committed (nil) or fn's work was rolled
// back (fn's error). A write that cannot be queued within the admission time
// returns ErrOverloaded. Once queued, a write is waited for even if ctx ends:
// it either runs or is skipped (returning ctx's error) before it starts.
func (s *Store) write(ctx context.Context, fn func(ctx context.Context, q *db.Queries) error) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	op := &writeOp{ctx: ctx, fn: fn, done: make(chan error, 1)}
	select {
	case s.queue <- op:
	default:
		t := time.NewTimer(s.cfg.admission)
		select {
		case s.queue <- op:
			t.Stop()
		case <-t.C:
			return fmt.Errorf("%w: the write queue (%d) stayed full for %v", ErrOverloaded, cap(s.queue), s.cfg.admission)
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-s.quit:
			t.Stop()
			return ErrClosed
		}
	}
	select {
	case err := <-op.done:
		return err
	case <-s.writerDone:
		select {
		case err := <-op.done:
			return err
		default:
			return ErrClosed
		}
	}
}

// runWriter is the single writer goroutine: it takes every write queued at the
// moment (up to maxBatch) and commits them in one transaction.
func (s *Store) runWriter() {
	defer close(s.writerDone)
	batch := make([]*writeOp, 0, s.cfg.maxBatch)
	for {
		select {
		case <-s.quit:
			s.failQueued()
			return
		case op := <-s.queue:
			batch = append(batch[:0], op)
		fill:
			for len(batch) < s.cfg.maxBatch {
				select {
				case op := <-s.queue:
					batch = append(batch, op)
				default:
					break fill
				}
			}
			s.commit(batch)
			clear(batch)
		}
	}
}

// failQueued answers every write still queued at Close with ErrClosed.
func (s *Store) failQueued() {
	for {
		select {
		case op := <-s.queue:
			op.done <- ErrClosed
		default:
			return
		}
	}
}

// commit runs a batch of writes in one BEGIN IMMEDIATE transaction, each in a
// savepoint, and answers each one once the outcome is durable.
func (s *Store) commit(batch []*writeOp) {
	results := make([]error, len(batch))
	live := 0
	for i, op := range batch {
		if err := op.ctx.Err(); err != nil {
			results[i] = err
			continue
		}
		live++
	}
	reply := func(fatal error) {
		for i, op := range batch {
			if fatal != nil && results[i] == nil {
				results[i] = fatal
			}
			op.done <- results[i]
		}
	}
	if live == 0 {
		reply(nil)
		return
	}
	bg := context.Background()
	tx, err := s.writer.BeginTx(bg, nil)
	if err != nil {
		reply(s.driverError("begin", err))
		return
	}
	q := s.wq.WithTx(tx)
	// A lone write needs no savepoint: rolling back the transaction undoes it.
	savepoints := live > 1
	ran := false
	for i, op := range batch {
		if results[i] != nil {
			continue
		}
		if savepoints {
			if _, err := tx.ExecContext(bg, "SAVEPOINT op"); err != nil {
				_ = tx.Rollback()
				reply(s.driverError("savepoint", err))
				return
			}
		}
		err := op.fn(context.WithoutCancel(op.ctx), q)
		if err == nil {
			ran = true
		} else {
			results[i] = err
			if savepoints {
				if _, rerr := tx.ExecContext(bg, "ROLLBACK TO op"); rerr != nil {
					_ = tx.Rollback()
					reply(s.driverError("rollback to savepoint", rerr))
					return
				}
			}
		}
		if savepoints {
			if _, err := tx.ExecContext(bg, "RELEASE op"); err != nil {
				_ = tx.Rollback()
				reply(s.driverError("release savepoint", err))
				return
			}
		}
	}
	if !ran {
		_ = tx.Rollback()
		reply(nil)
		return
	}
	if err := tx.Commit(); err != nil {
		reply(s.driverError("commit", err))
		return
	}
	reply(nil)
}

// driverError wraps an unexpected driver error with the step that failed and
// logs it: these are I/O failures, not caller mistakes.
func (s *Store) driverError(step string, err error) error {
	s.log.Error("roster: writer transaction failed", "step", step, "err", err)
	return fmt.Errorf("roster: %s: %w", step, err)
}
