package service

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
)

// Review: the README, "A lost lease reaches its handler at once": "When a lease
// ends by a cancel, a mark-dead, a sweep, a reclaim or its Timeout while its
// handler runs, the handler's context ends within milliseconds when the
// change is made through any Store on the same database" — the worker's own
// Store included. A bound lease has no renewals to find it lost; the
// worker's TTL is 30 s so that neither a heartbeat nor the lost-lease
// watcher's poll (TTL/3) comes within the 1 s allowed here.
func TestReviewBoundLostReachesHandlerThroughSameStore(t *testing.T) {
	for _, c := range []struct {
		name string
		end  func(t *testing.T, s *Store, clock *fakeClock, id uuid.UUID)
	}{
		{"cancel", func(t *testing.T, s *Store, _ *fakeClock, id uuid.UUID) {
			must(t, s.CancelExecution(context.Background(), CancelExecutionArgs{ID: id, Reason: "stop"}))
		}},
		{"mark-dead", func(t *testing.T, s *Store, _ *fakeClock, _ uuid.UUID) {
			must(t, s.MarkWorkerDead(context.Background(), MarkWorkerDeadArgs{Namespace: "ns", InstanceID: "i", Reason: "gone"}))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			conformance(t, func(t *testing.T, b backend) {
				s, clock := b.newStore(t)
				started := make(chan uuid.UUID, 1)
				var ended atomic.Int64
				stop := runWorker(t, s, WorkerArgs{TTL: 30 * time.Second,
					Handler: func(hctx context.Context, l Lease) ([]byte, error) {
						started <- l.ExecutionID
						<-hctx.Done()
						ended.Store(time.Now().UnixNano())
						return nil, nil
					}})
				create(t, s, CreateExecutionArgs{})
				id := <-started
				time.Sleep(50 * time.Millisecond)
				at := time.Now()
				c.end(t, s, clock, id)
				for ended.Load() == 0 && time.Since(at) < time.Second {
					time.Sleep(2 * time.Millisecond)
				}
				if ended.Load() == 0 {
					t.Fatalf("%s through the worker's own Store: the bound lease's handler still runs 1s later", c.name)
				}
				t.Logf("handler ended %v after the %s", time.Unix(0, ended.Load()).Sub(at), c.name)
				_ = stop()
			})
		})
	}
}
