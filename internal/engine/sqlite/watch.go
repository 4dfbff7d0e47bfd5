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

// watchInterval is how often the change check runs while someone listens:
// it bounds how long a worker in another process takes to notice new work.
const watchInterval = 4 * time.Millisecond

// Subscribe hears the commits of other connections (this Store's writer
// included, and every other process on the file) through PRAGMA
// data_version, checked on a connection of its own: a read that writes
// nothing. The check runs only while a subscription is open.
func (e *Engine) Subscribe(namespace string) engine.Subscription {
	return e.hub.Subscribe(namespace)
}

// startWatching runs the change check until stopWatching (the hub calls both).
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

// watch polls PRAGMA data_version, which changes whenever another connection
// commits, and signals the hub when it does. A failing check signals too
// (subscribers then look for themselves) and is tried again.
func (e *Engine) watch(stop <-chan struct{}) {
	t := time.NewTicker(watchInterval)
	defer t.Stop()
	var db *sql.DB
	var version *sql.Stmt
	defer func() {
		if version != nil {
			_ = version.Close()
		}
		if db != nil {
			_ = db.Close()
		}
	}()
	last := int64(-1)
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if version == nil {
			var err error
			if db, version, err = e.openWatch(); err != nil {
				e.logs.Log(e.cfg.Logger, slog.LevelWarn, "roster: the change check cannot open the database; polling", "err", err)
				e.hub.Signal("")
				continue
			}
		}
		var v int64
		if err := version.QueryRow().Scan(&v); err != nil {
			e.logs.Log(e.cfg.Logger, slog.LevelWarn, "roster: the change check failed; polling", "err", translate(err))
			e.hub.Signal("")
			continue
		}
		if last >= 0 && v != last {
			e.hub.Signal("")
		}
		last = v
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
