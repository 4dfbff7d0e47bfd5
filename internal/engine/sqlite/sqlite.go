// Package sqlite is roster's SQLite engine (modernc.org/sqlite, pure Go).
//
// Every write runs on one writer connection in a BEGIN IMMEDIATE transaction.
// Writes queued at the same moment share one transaction (group commit), each
// isolated in a savepoint, so one failing operation never affects another.
// Reads use a separate read-only pool and never wait for writes; a private
// in-memory database is one connection shared by both.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sqlitedb "github.com/rosterdb/roster/db/sqlite"
	"github.com/rosterdb/roster/internal/engine"
	sqliteschema "github.com/rosterdb/roster/schema/sqlite"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
	sqlite3 "modernc.org/sqlite/lib"
)

// MemoryPath opens a private in-memory database.
const MemoryPath = ":memory:"

// Engine is an open SQLite database.
type Engine struct {
	cfg    engine.Config
	writer *sql.DB // exactly one connection; nil when read-only
	reader *sql.DB // read-only pool; the writer itself for ":memory:"
	// every query, prepared once on the writer and once on the read pool
	wq, rq *sqlitedb.Queries
	reads  queries // newQueries(rq), built once

	queue      chan *writeOp
	kick       chan struct{} // buffered 1: writes were queued
	committing sync.Mutex    // held while a batch of writes is committed
	quit       chan struct{}
	writerDone chan struct{}
	closed     atomic.Bool
	closeOnce  sync.Once
	logs       *engine.LogLimiter // a failing disk fails every commit: log it now and then
	busy       engine.WorkerSet   // whose last claim under the write lock took something: their claims skip the look on the read pool

	// The change check (watch.go), running while someone subscribes.
	path    string
	hub     engine.Hub
	watcher engine.Loop
	// Kept across watches by the watch goroutine (one at a time).
	watchDB    *sql.DB
	watchStmt  *sql.Stmt
	watchLast  int64
	watchLooks atomic.Int64 // how many times the change check looked (tests)
	wal        *walWatcher
	walFailed  bool
}

var _ engine.Engine = (*Engine)(nil)

// Open opens (creating it with mode 0600 if absent, unless read-only) the
// database file at path, or a private in-memory database for MemoryPath, and
// applies every pending migration atomically under SQLite's write lock.
func Open(ctx context.Context, path string, cfg engine.Config) (*Engine, error) {
	e := &Engine{
		cfg:        cfg,
		queue:      make(chan *writeOp, max(cfg.QueueCapacity, 1)),
		kick:       make(chan struct{}, 1),
		quit:       make(chan struct{}),
		writerDone: make(chan struct{}),
		logs:       engine.NewLogLimiter(10 * time.Second),
	}
	if cfg.Migrations == nil {
		e.cfg.Migrations = sqliteschema.FS
	}
	if path != MemoryPath {
		// A private in-memory database has no other connection to hear from.
		e.path = path
		e.hub.OnArmed, e.hub.OnDisarmed = e.startWatching, e.stopWatching
	}
	if err := e.openDBs(path); err != nil {
		return nil, err
	}
	if err := e.start(ctx); err != nil {
		_ = e.closeDBs()
		return nil, err
	}
	if e.writer != nil && e.writer != e.reader {
		// The writer polls for the write lock itself (begin).
		if _, err := e.writer.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", writerPoll.Milliseconds())); err != nil {
			_ = e.closeDBs()
			return nil, fmt.Errorf("roster: open: %w", translate(err))
		}
	}
	if e.writer != nil {
		go e.runWriter()
	} else {
		close(e.writerDone)
	}
	return e, nil
}

// start checks the connections, migrates (or verifies) the schema and
// prepares every query.
func (e *Engine) start(ctx context.Context) error {
	if e.cfg.ReadOnly {
		if err := retryBusy(ctx, e.cfg.BusyTimeout, func() error { return e.reader.PingContext(ctx) }); err != nil {
			if sqliteCode(err)&0xff == sqlite3.SQLITE_CANTOPEN {
				return fmt.Errorf("roster: open: %w (read-only, a database in WAL mode needs its -wal and -shm files beside it, or a directory where SQLite may create them)", err)
			}
			return fmt.Errorf("roster: open: %w", err)
		}
		if err := verifyCurrent(ctx, e.reader, e.cfg.Migrations); err != nil {
			return err
		}
	} else {
		// On a brand-new file, a connection switching it to WAL can meet
		// another Open's lock in a way SQLite reports at once as busy
		// (deadlock avoidance): retry within the busy timeout.
		if err := retryBusy(ctx, e.cfg.BusyTimeout, func() error { return e.writer.PingContext(ctx) }); err != nil {
			return fmt.Errorf("roster: open: %w", err)
		}
		// A schema already current needs no migration: verified by a read
		// (which never waits in WAL mode), an Open takes no write lock, so
		// that a process starting beside a busy fleet is never starved of it.
		if err := retryBusy(ctx, e.cfg.BusyTimeout, func() error {
			if verifyCurrent(ctx, e.writer, e.cfg.Migrations) == nil {
				return nil
			}
			return migrateSchema(ctx, e.writer, e.cfg.Migrations, e.cfg.Migrate, e.cfg.Logger)
		}); err != nil {
			return err
		}
		q, err := sqlitedb.Prepare(ctx, e.writer)
		if err != nil {
			return fmt.Errorf("roster: open: %w", err)
		}
		e.wq = q
	}
	if e.reader == e.writer {
		e.rq = e.wq
		e.reads = newQueries(e.rq)
		return nil
	}
	q, err := sqlitedb.Prepare(ctx, e.reader)
	if err != nil {
		return fmt.Errorf("roster: open: %w", err)
	}
	e.rq = q
	e.reads = newQueries(e.rq)
	return nil
}

func (e *Engine) openDBs(path string) error {
	busy := fmt.Sprintf("busy_timeout(%d)", e.cfg.BusyTimeout.Milliseconds())
	if path == MemoryPath {
		// A private in-memory database lives in one connection: readers share it.
		q := url.Values{"_pragma": {busy, "foreign_keys(1)"}, "_txlock": {"immediate"}}
		if e.cfg.ReadOnly {
			q["_pragma"] = append(q["_pragma"], "query_only(1)")
		}
		w, err := sql.Open("sqlite", MemoryPath+"?"+q.Encode())
		if err != nil {
			return fmt.Errorf("roster: open: %w", err)
		}
		oneConnection(w)
		e.reader = w
		if !e.cfg.ReadOnly {
			e.writer = w
		}
		return nil
	}
	name, err := fileURI(path)
	if err != nil {
		return err
	}
	if e.cfg.ReadOnly {
		if _, err := os.Stat(path); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("%w: database file %s does not exist", engine.ErrNotFound, path)
			}
			return fmt.Errorf("roster: open: %w", err)
		}
	} else {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return fmt.Errorf("roster: open: %w", err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("roster: open: %w", err)
		}
		sync := "FULL"
		if !e.cfg.SyncFull {
			sync = "NORMAL"
		}
		wq := url.Values{
			"_pragma": {busy, "journal_mode(WAL)", "synchronous(" + sync + ")", "foreign_keys(1)", "temp_store(MEMORY)"},
			"_txlock": {"immediate"},
		}
		w, err := sql.Open("sqlite", name+"?"+wq.Encode())
		if err != nil {
			return fmt.Errorf("roster: open: %w", err)
		}
		oneConnection(w)
		e.writer = w
	}
	rq := url.Values{"_pragma": {busy, "query_only(1)"}}
	if e.cfg.ReadOnly {
		// Opened read-only by the OS too, a connection can never write the
		// file: not even the checkpoint SQLite runs when the last connection
		// closes, which would copy a crashed writer's -wal into the main file.
		rq.Set("mode", "ro")
	}
	r, err := sql.Open("sqlite", name+"?"+rq.Encode())
	if err != nil {
		if e.writer != nil {
			_ = e.writer.Close()
		}
		return fmt.Errorf("roster: open: %w", err)
	}
	r.SetMaxOpenConns(max(e.cfg.ReadConns, 1))
	r.SetMaxIdleConns(max(e.cfg.ReadConns, 1))
	e.reader = r
	return nil
}

// fileURI turns any path the OS accepts ("//tmp/x.db", "a?b#c.db") into a
// SQLite file: URI, absolute so that no part of it reads as a URI authority.
func fileURI(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("roster: open: %w", err)
	}
	return "file:" + (&url.URL{Path: filepath.ToSlash(abs)}).EscapedPath(), nil
}

func oneConnection(db *sql.DB) {
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
}

func (e *Engine) closeDBs() error {
	var err error
	if e.wq != nil {
		err = e.wq.Close()
	}
	if e.rq != nil && e.rq != e.wq {
		err = errors.Join(err, e.rq.Close())
	}
	if e.writer != nil {
		err = errors.Join(err, e.writer.Close())
	}
	if e.reader != e.writer {
		err = errors.Join(err, e.reader.Close())
	}
	return err
}

// Close stops the writer, fails every queued write with ErrClosed and closes
// the database.
func (e *Engine) Close() error {
	err := engine.ErrClosed
	e.closeOnce.Do(func() {
		e.closed.Store(true)
		e.stopWatching()
		e.closeWatch()
		close(e.quit)
		<-e.writerDone
		err = e.closeDBs()
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

// Read runs fn on the read-only pool.
func (e *Engine) Read(ctx context.Context, fn func(ctx context.Context, q engine.Queries) error) error {
	return e.readWith(ctx, func(ctx context.Context, q queries) error { return fn(ctx, q) })
}

// readWith is Read for the engine's own code, with its queries' type.
func (e *Engine) readWith(ctx context.Context, fn func(ctx context.Context, q queries) error) error {
	return engine.Guard(ctx, e.closed.Load, func() error { return fn(ctx, e.reads) })
}

// Snapshot runs fn in one read transaction on the read pool: under WAL, every
// query sees the database as of its first read.
func (e *Engine) Snapshot(ctx context.Context, fn func(ctx context.Context, q engine.Queries) error) error {
	if e.closed.Load() {
		return engine.ErrClosed
	}
	tx, err := e.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: e.reader != e.writer})
	if err != nil {
		return fmt.Errorf("roster: begin read: %w", translate(err))
	}
	defer func() { _ = tx.Rollback() }()
	return fn(ctx, newQueries(e.rq.WithTx(tx)))
}

// Write runs fn in the writer's transaction, inside a savepoint of its own
// when it shares the transaction, and returns once that transaction has
// committed (nil) or fn's work was rolled back (fn's error). A write that
// cannot be queued within the admission time returns ErrOverloaded. Once
// queued, a write is waited for even if ctx ends: it either runs or is
// skipped (returning ctx's error) before it starts.
func (e *Engine) Write(ctx context.Context, fn func(ctx context.Context, q engine.Queries) error) error {
	return e.write(ctx, func(ctx context.Context, _ *sql.Tx, q queries) error { return fn(ctx, q) })
}

// WriteOne is Write: the single writer's group commit already shares one
// transaction among the writes queued together.
func (e *Engine) WriteOne(ctx context.Context, fn func(ctx context.Context, q engine.Queries) error) error {
	return e.Write(ctx, fn)
}

// Check runs SQLite's integrity and foreign key checks, then the
// consistency rules of the operations.
func (e *Engine) Check(ctx context.Context) ([]string, error) {
	if e.closed.Load() {
		return nil, engine.ErrClosed
	}
	var problems []string
	for _, pragma := range []string{"PRAGMA integrity_check", "PRAGMA foreign_key_check"} {
		rows, err := e.reader.QueryContext(ctx, pragma)
		if err != nil {
			return nil, fmt.Errorf("roster: check: %w", translate(err))
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				rows.Close()
				return nil, fmt.Errorf("roster: check: %w", err)
			}
			line := fmt.Sprint(vals...)
			if pragma == "PRAGMA integrity_check" && line == "ok" {
				continue
			}
			problems = append(problems, strings.TrimPrefix(pragma, "PRAGMA ")+": "+line)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("roster: check: %w", translate(err))
		}
	}
	more, err := engine.ConsistencyProblems(ctx, []engine.ConsistencyCheck{
		{Problem: "running executions whose attempt is recorded as ended", Count: e.rq.ExecutionCheckRunning},
		{Problem: "recorded attempts of a missing execution or of an epoch it never reached", Count: e.rq.AttemptCheckEpoch},
		{Problem: "workers whose lane rows differ from their lanes", Count: e.rq.WorkerCheckLanes},
		{Problem: "agent states whose kept count is wrong", Count: e.rq.AgentCheckCounts},
	}, translate)
	return append(problems, more...), err
}

// driverError wraps an unexpected driver error with the step that failed and
// logs it (rate-limited): these are I/O failures, not caller mistakes.
func (e *Engine) driverError(step string, err error) error {
	if !engine.Transient(err) {
		err = translate(err)
	}
	err = fmt.Errorf("roster: %s: %w", step, err)
	e.logs.Log(e.cfg.Logger, slog.LevelError, "roster: writer transaction failed", "step", step, "err", err)
	return err
}
