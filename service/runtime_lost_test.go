package service

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

// A lease ended through another Store in the lost-lease watcher's gap after
// a check (when its subscription rests) still reaches its handler at once,
// not at the watcher's poll (here TTL/3, 20 minutes). Every slot stays busy
// (work waits behind the running handlers), so the claimer never listens in
// the watcher's place.
func TestRunWorkerLostInTheWatchersGap(t *testing.T) {
	conformanceShared(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		loc := b.fresh(t)
		s, _ := b.open(t, loc, WithClock(time.Now))
		other, _ := b.open(t, loc, WithClock(time.Now))
		// Behind PgBouncer's transaction pooling there is no LISTEN: the
		// watcher's poll (TTL/3) is what finds lost leases, so there the
		// TTL is short.
		ttl := time.Hour
		if b.pooled {
			ttl = 3 * time.Second
		}
		const trials = 8
		for range 2 + 2*trials {
			create(t, other, CreateExecutionArgs{})
		}
		var mu sync.Mutex
		running := map[uuid.UUID]chan struct{}{} // closed when the handler's context ends
		started := make(chan uuid.UUID, 2+2*trials)
		quit := make(chan struct{}) // the handlers left running return at the end
		stop := runWorker(t, s, WorkerArgs{TTL: ttl, Concurrency: 2, Handler: func(hctx context.Context, l Lease) ([]byte, error) {
			ended := make(chan struct{})
			mu.Lock()
			running[l.ExecutionID] = ended
			mu.Unlock()
			started <- l.ExecutionID
			select {
			case <-hctx.Done():
				close(ended)
				return nil, hctx.Err()
			case <-quit:
				return nil, nil
			}
		}})
		defer func() {
			close(quit)
			_ = stop()
		}()
		next := func() (uuid.UUID, chan struct{}) {
			t.Helper()
			select {
			case id := <-started:
				mu.Lock()
				defer mu.Unlock()
				return id, running[id]
			case <-time.After(20 * time.Second):
				t.Fatal("no handler started")
				return uuid.Nil, nil
			}
		}
		ended := func(what string, ch chan struct{}, within time.Duration) {
			t.Helper()
			select {
			case <-ch:
			case <-time.After(within):
				t.Fatalf("%s: the handler ran on after its execution was cancelled through another Store", what)
			}
		}
		a, aEnded := next()
		for i := range trials {
			b, bEnded := next()
			// The first cancel makes the watcher check; the second comes
			// within its gap (0 to 17.5 ms later).
			must(t, other.CancelExecution(ctx, CancelExecutionArgs{ID: a, Reason: "nudge"}))
			ended("the nudge", aEnded, 10*time.Second)
			busyWait(time.Duration(i) * 2500 * time.Microsecond)
			at := time.Now()
			must(t, other.CancelExecution(ctx, CancelExecutionArgs{ID: b, Reason: "in the gap"}))
			ended("the cancel in the gap", bEnded, 5*time.Second)
			t.Logf("trial %d: the cancel reached its handler in %v", i, time.Since(at).Round(time.Millisecond))
			a, aEnded = next() // the slot the nudge freed is claimed again
		}
	})
}
