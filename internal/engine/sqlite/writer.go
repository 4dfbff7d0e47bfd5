package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/rosterdb/roster/internal/engine"
	sqlite3 "modernc.org/sqlite/lib"
)

// maxBatch bounds the writes one group-commit transaction takes.
const maxBatch = 128

// writeOp is one operation waiting for the writer. fn runs in the writer's
// transaction (tx), inside a savepoint of its own when it shares it.
type writeOp struct {
	ctx    context.Context
	queued time.Time
	fn     func(ctx context.Context, tx *sql.Tx, q queries) error
	done   chan error // buffered: the writer never blocks on a reply
}

// write is Write for an fn that needs the transaction itself (savepoints).
func (e *Engine) write(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx, q queries) error) error {
	if e.closed.Load() {
		return engine.ErrClosed
	}
	if e.writer == nil {
		return fmt.Errorf("%w: the database was opened read-only", engine.ErrReadOnly)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	op := &writeOp{ctx: ctx, queued: time.Now(), fn: fn, done: make(chan error, 1)}
	if len(e.queue) == 0 && e.committing.TryLock() {
		// No write waits and none is being committed: commit this one here.
		// Handing it to the writer goroutine and its answer back would only
		// add two hand-offs to a lone write's way.
		return e.commitHere(op)
	}
	select {
	case e.queue <- op:
		e.kickWriter()
	default:
		t := time.NewTimer(e.cfg.Admission)
		select {
		case e.queue <- op:
			t.Stop()
			e.kickWriter()
		case <-t.C:
			return fmt.Errorf("%w: the write queue (%d) stayed full for %v", engine.ErrOverloaded, cap(e.queue), e.cfg.Admission)
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-e.quit:
			t.Stop()
			return engine.ErrClosed
		}
	}
	select {
	case err := <-op.done:
		return err
	case <-e.writerDone:
		select {
		case err := <-op.done:
			return err
		default:
			return engine.ErrClosed
		}
	}
}

// commitHere commits op on the caller's goroutine, under the commit lock the
// caller took; it lets the lock go however the commit ends, a panic of op's
// fn included (the transaction is rolled back first: see commit). Writes
// queued meanwhile kicked the writer goroutine, which waits for the lock.
func (e *Engine) commitHere(op *writeOp) error {
	defer e.committing.Unlock()
	if e.closed.Load() {
		return engine.ErrClosed
	}
	e.commit([]*writeOp{op})
	return <-op.done
}

// QueueLen reports how many writes wait for the writer (tests).
func (e *Engine) QueueLen() int { return len(e.queue) }

// kickWriter tells the writer goroutine that writes are queued.
func (e *Engine) kickWriter() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// runWriter is the writer goroutine: when kicked, it takes every write
// queued at the moment (up to maxBatch at a time) and commits them in one
// transaction. It dequeues only while it holds the commit lock, so a write
// counts as queued (QueueLen, the admission bound) until its commit begins.
// A lone write that finds no write queued and none being committed is
// committed by its caller instead (write).
func (e *Engine) runWriter() {
	defer close(e.writerDone)
	batch := make([]*writeOp, 0, maxBatch)
	for {
		select {
		case <-e.quit:
			// Wait for a caller's commit, then fail what is queued; the
			// lock stays held: every later write queues and is failed.
			e.committing.Lock()
			e.failQueued()
			return
		case <-e.kick:
		}
		e.committing.Lock()
		for {
			batch = batch[:0]
		fill:
			for len(batch) < maxBatch {
				select {
				case op := <-e.queue:
					batch = append(batch, op)
				default:
					break fill
				}
			}
			if len(batch) == 0 {
				break
			}
			e.commit(batch)
			clear(batch)
		}
		e.committing.Unlock()
	}
}

// failQueued answers every write still queued at Close with ErrClosed.
func (e *Engine) failQueued() {
	for {
		select {
		case op := <-e.queue:
			op.done <- engine.ErrClosed
		default:
			return
		}
	}
}

// commit runs a batch of writes in one BEGIN IMMEDIATE transaction, each in a
// savepoint, and answers each one once the outcome is durable.
func (e *Engine) commit(batch []*writeOp) {
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
	if o := e.cfg.Observer; o != nil {
		began := time.Now()
		for i, op := range batch {
			if results[i] == nil {
				o.WriteWaited(began.Sub(op.queued))
			}
		}
	}
	bg := context.Background()
	tx, err := e.begin()
	if err != nil {
		reply(e.driverError("begin", err))
		return
	}
	defer func() {
		// A write's fn panicked: roll back, so that the write lock is not
		// held for good by a caller that recovers, and go on panicking.
		if r := recover(); r != nil {
			_ = tx.Rollback()
			panic(r)
		}
	}()
	q := newQueries(e.wq.WithTx(tx))
	// A lone write needs no savepoint: rolling back the transaction undoes it.
	savepoints := live > 1
	ran := false
	// step runs a savepoint statement; its failure ends the transaction for
	// every write of the batch. After a write's own error (cause), SQLite
	// may have rolled the whole transaction back by itself (a full disk, an
	// I/O error): the savepoint is gone, and the cause says why.
	step := func(stmt string, cause error) bool {
		if !savepoints {
			return true
		}
		if _, err := tx.ExecContext(bg, stmt); err != nil {
			_ = tx.Rollback()
			reply(e.driverError(stmt, rolledBack(cause, err)))
			return false
		}
		return true
	}
	for i, op := range batch {
		if results[i] != nil {
			continue
		}
		if !step("SAVEPOINT op", nil) {
			return
		}
		if err := op.fn(context.WithoutCancel(op.ctx), tx, q); err != nil {
			results[i] = err
			if !step("ROLLBACK TO op", err) {
				return
			}
		} else {
			ran = true
		}
		if !step("RELEASE op", nil) {
			return
		}
	}
	if !ran {
		_ = tx.Rollback()
		reply(nil)
		return
	}
	committing := time.Now()
	if err := tx.Commit(); err != nil {
		reply(e.driverError("commit", err))
		return
	}
	if o := e.cfg.Observer; o != nil {
		o.Committed(time.Since(committing), live)
	}
	reply(nil)
}

// writerPoll bounds the writer's own wait for the write lock in one try; it
// polls again after a jittered pause of about as long.
const writerPoll = time.Millisecond

// begin starts the writer's BEGIN IMMEDIATE transaction, waiting for the
// write lock up to the busy timeout. SQLite's busy handler polls a held lock
// at intervals that grow to 100 ms: against other processes writing back to
// back, whose lock is free only for moments between their transactions, a
// writer polling that rarely can starve for seconds. The writer's connection
// waits writerPoll per try instead (PRAGMA busy_timeout at Open), and begin
// tries again about every millisecond.
func (e *Engine) begin() (*sql.Tx, error) {
	deadline := time.Now().Add(e.cfg.BusyTimeout)
	for {
		tx, err := e.writer.BeginTx(context.Background(), nil)
		if err == nil || sqliteCode(err)&0xff != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			return tx, err
		}
		time.Sleep(writerPoll/2 + time.Duration(rand.Int64N(int64(writerPoll))))
	}
}

// rolledBack is the error of a savepoint statement (err) that failed after
// a write's own error (cause, nil when none): when SQLite rolled the
// transaction back by itself, the cause's sentinel (ErrStorage on a full
// disk) says why; else the statement's error, which then means the storage
// failed.
func rolledBack(cause, err error) error {
	if cause != nil && engine.Transient(cause) {
		return cause
	}
	if err = translate(err); engine.Transient(err) {
		return err
	}
	return fmt.Errorf("%w: the transaction was rolled back: %w", engine.ErrStorage, err)
}
