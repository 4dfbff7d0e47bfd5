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

// After a write to the WAL file is heard, the change check looks again every
// watchRecheck for watchRecheckFast, whatever it sees: the system merges the
// reports of writes that follow each other unread, so one report may stand
// for two commits, the second still syncing when the first shows (its frames
// are written, then synced, and only then is the commit published, unheard).
// Then, until it has seen a change, it backs off to watchRecheckMax, for at
// most watchRecheckFor.
const (
	watchRecheck     = time.Millisecond
	watchRecheckFast = 20 * time.Millisecond
	watchRecheckMax  = 50 * time.Millisecond
	watchRecheckFor  = time.Second
)

// Subscribe hears the commits of other connections (this Store's writer
// included, and every other process on the file). Where the system tells of
// writes to the WAL file (Linux: inotify) a commit wakes the change check,
// so an idle worker costs nothing; elsewhere the check polls PRAGMA
// data_version (a read that writes nothing) every watchInterval. It runs only
// while a subscription is armed.
func (e *Engine) Subscribe(namespace string) engine.Subscription {
	return e.hub.Subscribe(namespace)
}

// startWatching runs the change check until stopWatching (the hub calls
// both, around each time some subscription is armed).
func (e *Engine) startWatching() {
	e.watcher.Start(e.closed.Load, func(ctx context.Context) { e.watch(ctx.Done()) })
}

// stopWatching ends the change check and waits for it.
func (e *Engine) stopWatching() { e.watcher.Stop() }

// watch signals the hub whenever PRAGMA data_version, which changes with
// every commit of another connection, has changed: it looks at once (a
// subscriber may have missed a change since the last look), when the WAL file
// is written (and again, with backoff, until the write's commit shows), or
// every watchInterval where writes cannot be heard. A failing check signals
// too (subscribers then look for themselves) and is tried again.
func (e *Engine) watch(stop <-chan struct{}) {
	var writes <-chan struct{}
	if e.wal == nil && !e.walFailed {
		var err error
		if e.wal, err = newWALWatcher(e.path); err != nil {
			e.walFailed = true
			e.logs.Log(e.cfg.Logger, slog.LevelInfo, "roster: cannot hear writes to the WAL file; polling for changes", "err", err)
		}
	}
	if e.wal != nil {
		if err := e.wal.start(); err != nil {
			e.logs.Log(e.cfg.Logger, slog.LevelInfo, "roster: cannot hear writes to the WAL file; polling for changes", "err", err)
		} else {
			defer e.wal.stop()
			writes = e.wal.writes
		}
	}
	var tick <-chan time.Time
	if writes == nil {
		t := time.NewTicker(watchInterval)
		defer t.Stop()
		tick = t.C
	}
	recheck := time.NewTimer(time.Hour)
	recheck.Stop()
	var written time.Time // the last write heard, or the watch's start
	seen := false         // a change was seen since
	delay := watchRecheck
	look := func() {
		if e.checkChange() {
			seen = true
		}
		switch since := time.Since(written); {
		case written.IsZero():
		case since < watchRecheckFast:
			recheck.Reset(watchRecheck)
		case !seen && since < watchRecheckFor:
			recheck.Reset(delay)
			delay = min(2*delay, watchRecheckMax)
		default:
			written = time.Time{}
		}
	}
	heard := func() {
		written, seen, delay = time.Now(), false, watchRecheck
		look()
	}
	// Look at once; where writes are heard, as after a write: a commit whose
	// frames were written before this watch began (unheard) shows only when
	// its sync ends, and nothing is heard then.
	if writes != nil {
		heard()
	} else {
		e.checkChange()
	}
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
			heard()
		case <-recheck.C:
			look()
		}
	}
}

// checkChange reads PRAGMA data_version on the change check's own connection
// (kept open across watches: the version is per connection) and signals the
// hub when it moved since the last look, or when there was none to compare
// with (or the look failed), and reports whether it signalled. Only the
// watch goroutine calls it.
func (e *Engine) checkChange() bool {
	if e.watchStmt == nil {
		var err error
		if e.watchDB, e.watchStmt, err = e.openWatch(); err != nil {
			e.logs.Log(e.cfg.Logger, slog.LevelWarn, "roster: the change check cannot open the database; polling", "err", err)
			e.hub.Signal("")
			return true
		}
		e.watchLast = -1
	}
	e.watchLooks.Add(1)
	var v int64
	if err := e.watchStmt.QueryRow().Scan(&v); err != nil {
		e.logs.Log(e.cfg.Logger, slog.LevelWarn, "roster: the change check failed; polling", "err", translate(err))
		e.hub.Signal("")
		return true
	}
	changed := v != e.watchLast
	if changed {
		e.hub.Signal("")
	}
	e.watchLast = v
	return changed
}

// closeWatch closes the change check's connection and WAL watcher (at
// Close).
func (e *Engine) closeWatch() {
	if e.wal != nil {
		e.wal.close()
	}
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
