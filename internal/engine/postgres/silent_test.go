package postgres

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rosterdb/roster/internal/engine"
	"github.com/rosterdb/roster/internal/pgtest"
)

// within runs f and fails t unless it returns within limit; it returns f's
// error.
func within(t *testing.T, what string, limit time.Duration, f func() error) error {
	t.Helper()
	began := time.Now()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		t.Logf("%s returned after %v: %v", what, time.Since(began).Round(time.Millisecond), err)
		return err
	case <-time.After(limit):
		t.Errorf("%s still waits %v after the network went silent", what, limit)
		return engine.ErrUnavailable
	}
}

// A half-open connection is noticed within seconds, and never hangs a
// heartbeat, a renewal or Close: behind a proxy that stops forwarding
// mid-run (the server silent, every connection half-open, new ones never
// answered), writes, reads and snapshots on pooled connections fail with
// ErrUnavailable within the statement timeout and a grace, a write that
// needs a new connection fails with ErrUnavailable within the admission time
// (not ErrOverloaded: the pool was not busy), and Close returns at once,
// though the clock was being measured.
func TestSilentServer(t *testing.T) {
	t.Parallel()
	loc, proxy := pgtest.NewProxy(t, pgtest.Fresh(t)+"&statement_timeout=1000&pool_max_conns=3")
	ctx := context.Background()
	e, err := connect(ctx, loc, testConfig())
	must(t, err)
	must(t, e.start(ctx))
	e.clockEvery = 20 * time.Millisecond // a measurement is under way when the network goes silent
	go e.keepClock()
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = e.Close()
		}
	})
	heartbeat := func() error {
		return e.WriteOne(ctx, func(ctx context.Context, q engine.Queries) error {
			_, err := q.WorkerHeartbeat(ctx, engine.WorkerKey{Namespace: "ns", InstanceID: "i"}, 1, true)
			if errors.Is(err, engine.ErrNoRows) {
				return nil
			}
			return err
		})
	}
	must(t, heartbeat())
	time.Sleep(50 * time.Millisecond)

	proxy.Freeze()
	bound := e.sess.opTimeout() + 2*time.Second // 1 s + grace + slack
	var wg sync.WaitGroup
	for what, call := range map[string]func() error{
		"a heartbeat (a write)": heartbeat,
		"a read": func() error {
			return e.Read(ctx, func(ctx context.Context, q engine.Queries) error {
				_, err := q.WorkerGet(ctx, engine.WorkerKey{Namespace: "ns", InstanceID: "i"})
				return err
			})
		},
		"a snapshot": func() error {
			return e.Snapshot(ctx, func(ctx context.Context, q engine.Queries) error {
				_, err := q.Stats(ctx, 1)
				return err
			})
		},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := within(t, what, bound, call); !errors.Is(err, engine.ErrUnavailable) {
				t.Errorf("%s: %v, want ErrUnavailable", what, err)
			}
		}()
	}
	wg.Wait()
	// Every pooled connection is gone now: the next write waits for a new
	// one, which never answers.
	if err := within(t, "a write needing a new connection", bound, heartbeat); !errors.Is(err, engine.ErrUnavailable) {
		t.Errorf("a write needing a new connection: %v, want ErrUnavailable", err)
	}
	closed = true
	if err := within(t, "Close", 3*time.Second, e.Close); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// With the network cut, Open fails with ErrUnavailable within the
// default connect timeout (10 s) when the URL sets none, instead of
// waiting for as long as its caller's context lets it.
func TestOpenWithTheNetworkCut(t *testing.T) {
	t.Parallel()
	loc, proxy := pgtest.NewProxy(t, pgtest.Fresh(t))
	proxy.Freeze()
	err := within(t, "Open", defaultConnectTimeout+3*time.Second, func() error {
		e, err := Open(context.Background(), loc, testConfig())
		if err == nil {
			_ = e.Close()
		}
		return err
	})
	if !errors.Is(err, engine.ErrUnavailable) {
		t.Fatalf("Open with the network cut: %v, want ErrUnavailable", err)
	}
}
