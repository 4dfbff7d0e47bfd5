package service

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

type heldCounter struct {
	nopObserver
	held atomic.Int64
}

func (h *heldCounter) ClaimHeld(string, int) { h.held.Add(1) }

// "Idle costs nothing": a RunWorker whose only ready work is held
// back by a pause, a cap or a rate must not hammer the database: it claims
// again on a wake, at the poll (1 s here) or at the rate window's end.
func TestReviewFlowIdleWorkerDoesNotSpin(t *testing.T) {
	cases := []struct {
		name   string
		limits LaneLimits
		busy   bool // one execution runs, held by another worker
	}{
		{"paused", LaneLimits{Paused: true}, false},
		{"capped", LaneLimits{MaxRunning: 1}, true},
		{"group-capped", LaneLimits{MaxRunningPerGroup: 1}, true},
		{"rate", LaneLimits{Rate: 1, RatePeriod: 24 * time.Hour}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conformance(t, func(t *testing.T, b backend) {
				ctx := context.Background()
				obs := &heldCounter{}
				s, _ := b.newStore(t, WithClock(time.Now), WithObserver(obs))
				lim := c.limits
				lim.Namespace, lim.Lane = "ns", "default"
				if c.busy {
					_, err := s.RegisterWorker(ctx, RegisterWorkerArgs{Namespace: "ns", WorkerID: "x", InstanceID: "x", Lanes: []string{"default"}, TTL: time.Hour})
					must(t, err)
					_, err = s.CreateExecution(ctx, CreateExecutionArgs{Namespace: "ns", Lane: "default", Group: "g"})
					must(t, err)
					must(t, s.PutLaneLimits(ctx, lim))
					_, err = s.ClaimExecution(ctx, ClaimArgs{Namespace: "ns", InstanceID: "x", LeaseTTL: time.Hour})
					must(t, err)
				} else {
					must(t, s.PutLaneLimits(ctx, lim))
				}
				for range 3 {
					_, err := s.CreateExecution(ctx, CreateExecutionArgs{Namespace: "ns", Lane: "default", Group: "g"})
					must(t, err)
				}
				runWorker(t, s, WorkerArgs{Concurrency: 4, Handler: func(ctx context.Context, l Lease) ([]byte, error) {
					t.Errorf("a held execution started")
					return nil, nil
				}})
				time.Sleep(300 * time.Millisecond)
				before := obs.held.Load()
				time.Sleep(2 * time.Second)
				n := obs.held.Load() - before
				t.Logf("%d held claims in 2 s", n)
				if n > 6 {
					t.Fatalf("an idle worker held back by %s claimed %d times in 2 s", c.name, n)
				}
			})
		})
	}
}
