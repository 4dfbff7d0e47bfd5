package service

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
)

// Review: a lapse that a claim (not a heartbeat) notices. The Store's clock
// jumps past the registration's expiry and new work arrives at once: the
// claimer's claim gets ErrNotRegistered, the heart registers again, and the
// register revokes the old registration's bound leases
// (LeaseRevokeBoundOfLapsed). The handler of such a lease must end: the README
// "A lapse is not a lost lease": "a bound lease ends with the registration
// it is bound to, so its handler is cancelled and its execution reclaimed";
// "A lease is only ever run by its holder, and only while it holds"; "A lost
// lease reaches its handler at once". The runner instead records the new
// registration's expiry as every bound lease's (regExpires), the keeper's
// watch sees a live expiry, and on PostgreSQL the revoke sends no
// roster_lost: the handler runs on with a lease that is listed expired and
// reclaimable.
func TestReviewBoundRelapseByClaimCancelsBoundHandlers(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, clock := b.newStore(t)
		var first atomic.Value // uuid.UUID of the blocking execution
		var calls atomic.Int32 // the first handler call blocks; the rest return
		started := make(chan struct{})
		var ended atomic.Int64 // unix nano when the blocking handler's ctx ended
		stop := runWorker(t, s, WorkerArgs{TTL: 30 * time.Second, Concurrency: 2,
			Handler: func(hctx context.Context, l Lease) ([]byte, error) {
				if calls.Add(1) != 1 {
					return nil, nil
				}
				first.Store(l.ExecutionID)
				close(started)
				<-hctx.Done()
				ended.Store(time.Now().UnixNano())
				return nil, nil
			}})
		create(t, s, CreateExecutionArgs{})
		select {
		case <-started:
		case <-time.After(30 * time.Second):
			t.Fatal("the first execution's handler did not start within 30s")
		}
		before, err := s.GetWorker(ctx, "ns", "i")
		must(t, err)
		clock.Advance(31 * time.Second)     // the registration lapsed by the Store's clock
		create(t, s, CreateExecutionArgs{}) // the claimer wakes, finds it lapsed
		eventually(t, "the worker to register again", func() bool {
			w, err := s.GetWorker(ctx, "ns", "i")
			return err == nil && w.RegisteredAt.After(before.RegisteredAt)
		})
		reg := time.Now()
		id := first.Load().(uuid.UUID)
		p, err := s.ListExpiredLeases(ctx, ListExpiredLeasesArgs{AsOf: clock.Now()})
		must(t, err)
		listed := false
		for _, l := range p.Leases {
			listed = listed || l.ExecutionID == id
		}
		if !listed {
			t.Fatalf("the old registration's bound lease is not listed expired: %+v", p.Leases)
		}
		deadline := time.Now().Add(3 * time.Second)
		for ended.Load() == 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if ended.Load() == 0 {
			t.Fatalf("3s after the re-registration revoked its bound lease (listed expired, reclaimable), the handler still runs: %+v", getExecution(t, s, id))
		}
		t.Logf("handler ended %v after the re-registration", time.Unix(0, ended.Load()).Sub(reg))
		_ = stop()
	})
}
