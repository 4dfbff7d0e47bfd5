package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/rosterdb/roster/internal/engine"
)

// listenPing is how long the listening connection may stay silent before it
// is pinged: a connection whose peer vanished is noticed within it.
const listenPing = 30 * time.Second

// listenLinger is how long the listening connection stays open after the
// last subscription closed: a worker listens while it is idle, and opening
// the connection for each idle spell would cost a connect each time.
const listenLinger = time.Minute

// NotifiesByKey reports that a subscription hears only its own key's
// notifications.
func (e *Engine) NotifiesByKey() bool { return true }

var _ engine.KeyedNotifier = (*Engine)(nil)

// Subscribe hears the NOTIFYs that roster_wake sends on this schema's
// channel, armed or not (a notification is cheap, and one that came while
// its subscriber was busy stays pending). The first subscription opens one
// listening connection, outside the pool; it is closed listenLinger after
// the last one's Close.
func (e *Engine) Subscribe(namespace string) engine.Subscription {
	s := &pgSub{Subscription: e.hub.Subscribe(namespace), e: e}
	e.startListening()
	return s
}

// pgSub closes the listening connection (after a linger) with the last
// subscription.
type pgSub struct {
	engine.Subscription
	e    *Engine
	once sync.Once
}

func (s *pgSub) Close() {
	s.once.Do(func() {
		s.Subscription.Close()
		if s.e.hub.Len() == 0 {
			s.e.lingerListening()
		}
	})
}

// startListening runs the listener (at each subscription), unless it still
// runs.
func (e *Engine) startListening() {
	e.listenMu.Lock()
	defer e.listenMu.Unlock()
	if e.lingering != nil {
		e.lingering.Stop()
		e.lingering = nil
	}
	if e.closed.Load() || e.listener.Running() {
		return
	}
	if e.sess.bouncer {
		// PgBouncer's transaction pooling delivers no NOTIFY: subscribers
		// are woken by this Store's own changes and poll for the others'.
		e.bouncerOnce.Do(func() {
			e.cfg.Logger.Info("roster: behind PgBouncer (roster_pgbouncer=true) LISTEN cannot work; workers poll for work other processes create")
		})
		return
	}
	e.listener.Start(e.closed.Load, e.listen)
}

// lingerListening stops the listener listenLinger from now unless someone
// subscribes meanwhile (at the last subscription's Close).
func (e *Engine) lingerListening() {
	e.listenMu.Lock()
	defer e.listenMu.Unlock()
	if e.lingering != nil {
		e.lingering.Stop()
	}
	e.lingering = time.AfterFunc(listenLinger, func() {
		if e.hub.Len() == 0 {
			e.stopListening()
		}
	})
}

// stopListening closes the listening connection and waits for its goroutine.
func (e *Engine) stopListening() {
	e.listenMu.Lock()
	defer e.listenMu.Unlock()
	if e.lingering != nil {
		e.lingering.Stop()
		e.lingering = nil
	}
	e.listener.Stop()
}

// The listening connection is also how a worker hears the server come back
// (a restart, a failover's promotion): while it is away it is opened again
// every listenRetry (jittered down by up to half) for the first
// listenRetryFast of the outage, so that a worker whose writes failed, and
// backed off, tries again within a fraction of a second of the server
// answering; after that the tries back off to listenRetryMax, not to load a
// server that stays away. A try costs a connection attempt.
const (
	listenRetry     = 300 * time.Millisecond
	listenRetryFast = time.Minute
	listenRetryMax  = 5 * time.Second
)

// listen keeps one listening connection until ctx ends, opening it again
// after a loss. Subscribers are woken when it is lost (notifications sent
// until it is back are lost with it: they look for work themselves) and
// whenever it opens again (the server answers); not at each try that fails.
func (e *Engine) listen(ctx context.Context) {
	var lost time.Time // when the outage began
	wait := listenRetry
	for ctx.Err() == nil {
		opened := false
		err := e.listenOnce(ctx, func() { opened = true })
		if ctx.Err() != nil {
			return
		}
		if opened || lost.IsZero() {
			lost, wait = time.Now(), listenRetry
			e.hub.Signal("")
		}
		wait = nextListenWait(wait, time.Since(lost), err, opened)
		e.logs.Log(e.cfg.Logger, slog.LevelWarn, "roster: the connection listening for new work was lost; polling until it is back", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait - time.Duration(rand.Int64N(int64(wait/2)))):
		}
	}
}

// nextListenWait is the wait before the next try to listen, after a try
// that ended with err (opened: it had been listening) in an outage that
// began since ago, the last wait having been wait: listenRetry for the
// first listenRetryFast of an outage, then doubling up to listenRetryMax.
// A server that answers but refuses the connection (too many clients, a
// login it rejects) is not helped by tries every fraction of a second:
// those double at once.
func nextListenWait(wait, since time.Duration, err error, opened bool) time.Duration {
	if opened {
		return listenRetry
	}
	if since >= listenRetryFast || refusedConnection(err) {
		return min(2*wait, listenRetryMax)
	}
	return wait
}

// refusedConnection reports whether err is a server's refusal of a new
// connection: too many clients, or a failed login (class 28).
func refusedConnection(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == codeTooManyConnections || strings.HasPrefix(pe.Code, "28"))
}

// listenOnce opens a connection, LISTENs on the schema's channel and relays
// each notification's namespace to the hub until the connection fails or
// ctx ends.
func (e *Engine) listenOnce(ctx context.Context, listening func()) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := pgx.ConnectConfig(cctx, e.pool.Config().ConnConfig.Copy())
	cancel()
	if err != nil {
		return translate(err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	var channel string
	if err := conn.QueryRow(ctx, "SELECT 'roster_' || md5(current_schema())").Scan(&channel); err != nil {
		return fmt.Errorf("roster: listen: %w", translate(err))
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return fmt.Errorf("roster: listen: %w", translate(err))
	}
	listening()
	e.hub.Signal("")
	for {
		wctx, cancel := context.WithTimeout(ctx, listenPing)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			e.hub.Signal(n.Payload)
			continue
		case ctx.Err() != nil:
			return ctx.Err()
		case wctx.Err() == nil:
			return translate(err)
		}
		// Silence for listenPing: make sure the server is still there.
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = conn.Ping(pctx)
		cancel()
		if err != nil {
			return translate(err)
		}
	}
}
