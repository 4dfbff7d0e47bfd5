package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/rosterdb/roster/internal/engine"
)

// watchInterval is how often the change check polls where the system cannot
// tell of writes to the WAL file: it bounds how long a worker in another
// process takes to notice new work.
const watchInterval = 4 * time.Millisecond

// watchRecheck is how soon after a write to the WAL file the change check
// looks again: the write that woke it may come just before its commit shows.
const watchRecheck = 2 * time.Millisecond

// Subscribe hears the commits of other connections (this Store's writer
// included, and every other process on the file). Where the system tells of
// writes to the WAL file (Linux: inotify) a commit wakes the change check,
// so an idle worker costs nothing; elsewhere the check polls PRAGMA
// data_version (a read that writes nothing) every watchInterval. It runs only
// while a subscription is open.
func (e *Engine) Subscribe(namespace string) engine.Subscription {
	return e.hub.Subscribe(namespace)
}

// startWatching runs the change check until stopWatching (the hub calls
// both, around each time someone listens).
func (e *Engine) startWatching() {
	e.watchMu.Lock()
	defer e.watchMu.Unlock()
	if e.closed.Load() || e.watchStop != nil {
		return
	}
	stop, done := make(chan struct{}), make(chan struct{})
	e.watchStop, e.watchDone = stop, done
	go func() {
		defer close(done)
		e.watch(stop)
	}()
}

// stopWatching ends the change check and waits for it.
func (e *Engine) stopWatching() {
	e.watchMu.Lock()
	defer e.watchMu.Unlock()
	if e.watchStop == nil {
		return
	}
	close(e.watchStop)
	<-e.watchDone
	e.watchStop, e.watchDone = nil, nil
}

// watch signals the hub whenever PRAGMA data_version, which changes with
// every commit of another connection, has changed: it looks at once (a
// subscriber may have missed a change since the last look), when the WAL file
// is written (and again watchRecheck later), or every watchInterval where
// writes cannot be heard. A failing check signals too (subscribers then look
// for themselves) and is tried again.
func (e *Engine) watch(stop <-chan struct{}) {
	writes, closeWrites, err := watchWAL(e.path)
	if err != nil {
		e.logs.Log(e.cfg.Logger, slog.LevelInfo, "roster: cannot hear writes to the WAL file; polling for changes", "err", err)
	}
	if closeWrites != nil {
		defer closeWrites()
	}
	e.checkChange()
	var tick <-chan time.Time
	if writes == nil {
		t := time.NewTicker(watchInterval)
		defer t.Stop()
		tick = t.C
	}
	recheck := time.NewTimer(time.Hour)
	recheck.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick:
			e.checkChange()
		case _, ok := <-writes:
			if !ok {
				writes = nil
				t := time.NewTicker(watchInterval)
				defer t.Stop()
				tick = t.C
				continue
			}
			e.checkChange()
			recheck.Reset(watchRecheck)
		case <-recheck.C:
			e.checkChange()
		}
	}
}

// checkChange reads PRAGMA data_version on the change check's own connection
// (kept open across watches: the version is per connection) and signals the
// hub when it moved since the last look, or when there was none to compare
// with. Only the watch goroutine calls it.
func (e *Engine) checkChange() {
	if e.watchStmt == nil {
		var err error
		if e.watchDB, e.watchStmt, err = e.openWatch(); err != nil {
			e.logs.Log(e.cfg.Logger, slog.LevelWarn, "roster: the change check cannot open the database; polling", "err", err)
			e.hub.Signal("")
			return
		}
		e.watchLast = -1
	}
	var v int64
	if err := e.watchStmt.QueryRow().Scan(&v); err != nil {
		e.logs.Log(e.cfg.Logger, slog.LevelWarn, "roster: the change check failed; polling", "err", translate(err))
		e.hub.Signal("")
		return
	}
	if v != e.watchLast {
		e.hub.Signal("")
	}
	e.watchLast = v
}

// closeWatch closes the change check's connection (at Close).
func (e *Engine) closeWatch() {
	if e.watchStmt != nil {
		_ = e.watchStmt.Close()
	}
	if e.watchDB != nil {
		_ = e.watchDB.Close()
	}
}

// openWatch opens the change check's own connection (one, kept open: data
// version is per connection) and prepares its query.
func (e *Engine) openWatch() (*sql.DB, *sql.Stmt, error) {
	name, err := fileURI(e.path)
	if err != nil {
		return nil, nil, err
	}
	q := url.Values{"_pragma": {fmt.Sprintf("busy_timeout(%d)", e.cfg.BusyTimeout.Milliseconds()), "query_only(1)"}}
	db, err := sql.Open("sqlite", name+"?"+q.Encode())
	if err != nil {
		return nil, nil, err
	}
	oneConnection(db)
	stmt, err := db.PrepareContext(context.Background(), "PRAGMA data_version")
	if err != nil {
		_ = db.Close()
		return nil, nil, translate(err)
	}
	return db, stmt, nil
}
