// Package service is roster's public API: a Store that keeps the live state of
// a fleet (workers, executions and their leases, agent processes) in SQL. It
// states the rules of every operation (validation, sentinel errors, state
// machines) and runs them through an engine (internal/engine), which owns the
// database: connections, transactions, migrations and the generated queries.
package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rosterdb/roster/internal/engine"
	"github.com/rosterdb/roster/internal/engines"
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
	now            func() time.Time
	logger         *slog.Logger
	durability     Durability
	readConns      int
	queueCapacity  int
	admission      time.Duration
	busyTimeout    time.Duration
	migrate        bool
	readOnly       bool
	heartbeatLog   bool
	migrations     fs.FS // nil: the engine's own; tests substitute theirs
	clockSet       bool
	localClock     func() time.Time // the local clock an engine compares with its own (tests skew it)
	workerPoll     time.Duration    // RunWorker's poll interval (WithWorkerPoll)
	claimBytes     int64            // the bound on a claim's payloads (0: the engine's 64 MiB; tests lower it)
	statementBytes int              // the bound on a create statement's payloads (0: 64 MiB; tests lower it)
	observer       Observer
	middleware     []Middleware // WithMiddleware, the first outermost
	// Executions created with MaxAttempts 0 or RetryBackoff 0 get these
	// (WithExecutionDefaults).
	defaultMaxAttempts  int
	defaultRetryBackoff time.Duration
}

// engineConfig is what the engine is asked for.
func (c *config) engineConfig() engine.Config {
	return engine.Config{
		Logger:        c.logger,
		SyncFull:      c.durability == DurabilityFull,
		ReadConns:     c.readConns,
		QueueCapacity: c.queueCapacity,
		Admission:     c.admission,
		BusyTimeout:   c.busyTimeout,
		Migrate:       c.migrate,
		ReadOnly:      c.readOnly,
		Migrations:    c.migrations,
		LocalClock:    c.localClock,
		Observer:      c.observer,
	}
}

func defaultConfig() config {
	return config{
		now:                time.Now,
		logger:             slog.New(slog.NewTextHandler(io.Discard, nil)),
		durability:         DurabilityFull,
		readConns:          4,
		queueCapacity:      256,
		admission:          2 * time.Second,
		busyTimeout:        5 * time.Second,
		migrate:            true,
		heartbeatLog:       true,
		defaultMaxAttempts: 1,
		workerPoll:         defaultWorkerPoll,
		observer:           nopObserver{},
	}
}

// WithClock sets the clock used wherever an argument's time is zero. The
// default is time.Now on SQLite and, on PostgreSQL, the database server's
// clock (its offset from the local clock measured at Open and every 30s, the
// quickest of several round trips each time), so
// that every host of a fleet judges liveness by one clock.
func WithClock(now func() time.Time) Option {
	return func(c *config) { c.now, c.clockSet = now, true }
}

// WithWorkerPoll sets how long an idle RunWorker waits for a wake-up (new
// work, a freed cap, a resumed lane, a lease's end) before it looks for
// work anyway; the default is 1 s. It is only the safety net: wake-ups
// reach workers in other processes too (PostgreSQL's LISTEN, SQLite's
// change check). It also spaces RunWorker's check of which of its leases
// are still held, when that is longer than a third of the worker's TTL
// (the check is woken by the same changes). A value of 0 or less keeps the
// default.
func WithWorkerPoll(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.workerPoll = d
		}
	}
}

// WithLogger sets the logger of the Store and its helpers. The default
// discards every record.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithDurability chooses DurabilityFull (the default) or DurabilityNormal.
func WithDurability(d Durability) Option { return func(c *config) { c.durability = d } }

// WithReadConns sets the size of the read-only connection pool (default 4).
func WithReadConns(n int) Option { return func(c *config) { c.readConns = n } }

// WithWriteQueue bounds the queue of writes waiting for the writer (default
// 256) and how long a write may wait for a place in it before it fails with
// ErrOverloaded (default 2s; 0: no wait). On PostgreSQL the admission time
// bounds the wait for a pooled connection: ErrOverloaded while the server
// answers, ErrUnavailable when it cannot be reached.
func WithWriteQueue(capacity int, admission time.Duration) Option {
	return func(c *config) { c.queueCapacity, c.admission = capacity, admission }
}

// WithoutMigrate makes Open verify that the schema is current instead of
// migrating it: an outdated database is refused with ErrSchemaOutdated.
func WithoutMigrate() Option { return func(c *config) { c.migrate = false } }

// WithReadOnly opens an existing database for inspection: it never migrates
// (a schema that is not exactly current is ErrSchemaOutdated or
// ErrSchemaTooNew), never creates a file (a missing one is ErrNotFound), and
// every write method returns ErrReadOnly having changed nothing. On SQLite
// the file is opened read-only (mode=ro): neither it nor its -wal is ever
// written, though SQLite may create the -shm (and an empty -wal) it needs to
// read a database in WAL mode.
func WithReadOnly() Option { return func(c *config) { c.readOnly = true } }

// WithHeartbeatEvents(false) stops heartbeats from appending heartbeat events
// to the audit log (the other kinds are always logged). The default is true.
func WithHeartbeatEvents(on bool) Option { return func(c *config) { c.heartbeatLog = on } }

// WithExecutionDefaults sets what an execution created with a zero
// MaxAttempts or a zero RetryBackoff gets instead (default 1 and 0): a fleet
// whose hosts may crash gives its work a few attempts, so that work a dead
// worker held is re-run (crashed work is re-run only while attempts remain).
// maxAttempts is at least 1; retryBackoff 0 or between 1 ms and 24 h.
func WithExecutionDefaults(maxAttempts int, retryBackoff time.Duration) Option {
	return func(c *config) { c.defaultMaxAttempts, c.defaultRetryBackoff = maxAttempts, retryBackoff }
}

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
	case c.observer == nil:
		return invalid("WithObserver", "nil observer")
	case slices.Contains(c.middleware, nil):
		return invalid("WithMiddleware", "nil middleware")
	case c.busyTimeout < 0:
		return invalid("WithBusyTimeout", "negative timeout %v", c.busyTimeout)
	case c.defaultMaxAttempts < 1:
		return invalid("WithExecutionDefaults", "maxAttempts %d is below 1", c.defaultMaxAttempts)
	case c.defaultRetryBackoff < 0 || (c.defaultRetryBackoff > 0 && c.defaultRetryBackoff < time.Millisecond) ||
		c.defaultRetryBackoff > maxRetryBackoff:
		return invalid("WithExecutionDefaults", "retryBackoff %v is neither 0 nor between 1ms and 24h", c.defaultRetryBackoff)
	}
	return nil
}

// Store is a roster database. It is safe for concurrent use.
//
// On SQLite every write runs on one writer connection, in a BEGIN IMMEDIATE
// transaction shared by the writes queued at that moment (group commit), each
// isolated in its own savepoint; reads use a separate read-only pool.
type Store struct {
	cfg    config
	log    *slog.Logger
	eng    engine.Engine
	closed atomic.Bool
	// work is signalled whenever this Store may have made work claimable:
	// a create, a failure or reclaim that requeues, a release, a redrive, a
	// schedule's run, a change of lane limits, and an end of a run while a
	// claim of this Store found its lane at a cap (held).
	work notifier
	// lost is signalled whenever this Store may have ended running leases
	// of others' (a cancel, a mark-dead, a sweep, a reclaim): the workers of
	// this Store check theirs at once (other Stores hear of it from the
	// engine).
	lost notifier
	// schedules is signalled when this Store put or deleted a schedule: its
	// leading RunSweeper looks at the next run again (other Stores hear of
	// it from the engine, or at their next run).
	schedules notifier
	// held says a claim found ready work that a lane's cap, rate or pause
	// held back: the next end of a run signals work (it may free room).
	held atomic.Bool
	// turned holds lanes whose turns this Store recorded (touchTurns): a
	// lane's record is never removed, so its next grouped creates need not
	// write it again.
	turned engine.KeySet[engine.LaneKey]
}

// notifier wakes every waiter once per signal: waiters take the current
// channel, a signal closes it and installs a new one. A waiter that takes
// its channel before looking for work misses no signal sent after it
// looked.
type notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

// wait returns a channel closed at the next signal.
func (n *notifier) wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

// signal wakes the current waiters.
func (n *notifier) signal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch != nil {
		close(n.ch)
	}
	n.ch = make(chan struct{})
}

// Open opens the database at path: on SQLite a file (created with mode 0600
// if absent) or ":memory:" (a private in-memory database); on PostgreSQL a
// "postgres://" or "postgresql://" URL (pgx syntax: search_path picks the
// schema, pool_max_conns the pool), for a fleet whose processes run on many
// hosts. It applies every pending migration atomically and under a
// cross-process lock (PostgreSQL: an advisory lock in one transaction), so
// that many processes may Open one new database at once; WithoutMigrate
// only checks that the schema is current, and WithReadOnly never writes.
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
	eng, err := engines.Open(ctx, path, cfg.engineConfig())
	if err != nil {
		return nil, err
	}
	// On a database many hosts share, the engine's clock (PostgreSQL: the
	// server's) judges liveness for the whole fleet, unless WithClock says
	// otherwise.
	if c, ok := eng.(engine.Clocked); ok && !cfg.clockSet {
		cfg.now = c.Clock()
	}
	cfg.logger.Debug("roster: store open", "durability", cfg.durability.String(), "read_only", cfg.readOnly)
	return &Store{cfg: cfg, log: cfg.logger, eng: eng}, nil
}

// Close closes the database. Writes still queued fail with ErrClosed. After
// Close every method returns ErrClosed.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return ErrClosed
	}
	return s.eng.Close()
}

// notClosed is the first step of every method: a closed Store answers
// ErrClosed whatever the arguments. (Check, exported, is the integrity
// check.)
func (s *Store) notClosed() error {
	if s.closed.Load() {
		return ErrClosed
	}
	return nil
}

// now returns t, or the Store's clock when t is zero, truncated to the
// millisecond in UTC.
func (s *Store) now(t time.Time) time.Time {
	if t.IsZero() {
		t = s.cfg.now()
	}
	return t.UTC().Truncate(time.Millisecond)
}

// at validates a time argument and returns it, or the Store's clock when it
// is zero, as Unix milliseconds.
func (s *Store) at(field string, t time.Time) (int64, error) {
	if err := validTime(field, t); err != nil {
		return 0, err
	}
	return s.now(t).UnixMilli(), nil
}

// read runs fn with the engine's read queries.
func (s *Store) read(ctx context.Context, fn func(ctx context.Context, q engine.Queries) error) error {
	if err := s.notClosed(); err != nil {
		return err
	}
	return s.eng.Read(ctx, fn)
}

// snapshot runs fn in one read-only transaction.
func (s *Store) snapshot(ctx context.Context, fn func(ctx context.Context, q engine.Queries) error) error {
	if err := s.notClosed(); err != nil {
		return err
	}
	return s.eng.Snapshot(ctx, fn)
}

// write runs fn in a transaction (or a savepoint of a shared one) and returns
// once it committed (nil) or was rolled back (fn's error).
func (s *Store) write(ctx context.Context, fn func(ctx context.Context, q engine.Queries) error) error {
	if err := s.notClosed(); err != nil {
		return err
	}
	return s.fromWrite(s.eng.Write(ctx, fn))
}

// fromWrite is what a write's error means to a caller: it tells the
// Observer of a refused write, and maps a schema rule that an operation did
// not map itself (a uniqueness rule is ErrConflict, any other rule, a CHECK
// or a trigger that refuses the row, ErrInvalidInput). No driver error
// leaves the Store raw.
func (s *Store) fromWrite(err error) error {
	var ce *engine.ConstraintError
	switch {
	case errors.Is(err, ErrOverloaded):
		s.cfg.observer.Overloaded()
	case !errors.As(err, &ce) || errors.Is(err, ErrConflict) || errors.Is(err, ErrInvalidInput):
	case engine.IsUnique(err):
		return fmt.Errorf("%w: the database refused the write: %w", ErrConflict, err)
	default:
		return fmt.Errorf("%w: the database refused the write: %w", ErrInvalidInput, err)
	}
	return err
}

// writeOne is write for an fn that runs one statement (see
// engine.Engine.WriteOne).
func (s *Store) writeOne(ctx context.Context, fn func(ctx context.Context, q engine.Queries) error) error {
	if err := s.notClosed(); err != nil {
		return err
	}
	return s.fromWrite(s.eng.WriteOne(ctx, fn))
}

// Check looks for damage in the database: the engine's own integrity check
// (SQLite's integrity_check and foreign_key_check) and the consistency rules
// roster's operations keep (no running execution's attempt is recorded as
// ended, no recorded attempt names an execution or epoch that is not there,
// each worker's lane rows match its lanes, the agent counts match the
// agents). It returns one line per problem; none means sound.
func (s *Store) Check(ctx context.Context) ([]string, error) {
	if err := s.notClosed(); err != nil {
		return nil, err
	}
	return s.eng.Check(ctx)
}

// jitter spreads d by ±10% so that a fleet's timers do not align.
func jitter(d time.Duration) time.Duration {
	spread := int64(d) / 5
	if spread <= 0 {
		return d
	}
	return d - time.Duration(spread/2) + time.Duration(rand.Int64N(spread))
}
