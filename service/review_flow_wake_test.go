package service

import (
	"context"
	"testing"
	"time"
)

// A run's end frees room under a cap; an idle RunWorker held back by that
// cap must start the next execution at once, not at its next poll (here an
// hour, so only a wake-up can start it). The commit under review says "a
// run's end wakes idle workers"; "Work starts in milliseconds,
// across processes" and "A claim that a cap forbids takes other claimable
// work instead ... A cap lowered below what is running stops new claims of
// that lane until the count is under it". Each case ends the one running
// execution of a capped lane in a way that frees the cap's room.
func TestReviewFlowCapEndWakesWorker(t *testing.T) {
	cases := []struct {
		name   string
		limits LaneLimits
		end    func(t *testing.T, o *Store, l Lease) error
	}{
		{"complete-MaxRunning", LaneLimits{MaxRunning: 1}, func(t *testing.T, o *Store, l Lease) error {
			return o.CompleteExecution(context.Background(), CompleteArgs{Lease: l})
		}},
		{"complete-MaxRunningPerGroup", LaneLimits{MaxRunningPerGroup: 1}, func(t *testing.T, o *Store, l Lease) error {
			return o.CompleteExecution(context.Background(), CompleteArgs{Lease: l})
		}},
		{"fail-terminal-MaxRunning", LaneLimits{MaxRunning: 1}, func(t *testing.T, o *Store, l Lease) error {
			return o.FailExecution(context.Background(), FailArgs{Lease: l, Reason: "x"})
		}},
		{"cancel-MaxRunning", LaneLimits{MaxRunning: 1}, func(t *testing.T, o *Store, l Lease) error {
			return o.CancelExecution(context.Background(), CancelExecutionArgs{ID: l.ExecutionID, Reason: "x"})
		}},
		{"markdead-reclaim-MaxRunning", LaneLimits{MaxRunning: 1}, func(t *testing.T, o *Store, l Lease) error {
			// the holder dies and its lease is reclaimed (MaxAttempts 1: the execution fails)
			if err := o.MarkWorkerDead(context.Background(), MarkWorkerDeadArgs{Namespace: "ns", InstanceID: "x", Reason: "x"}); err != nil {
				return err
			}
			n, err := o.ReclaimExpiredLeases(context.Background(), time.Time{}, 0)
			if err == nil && n != 1 {
				t.Fatalf("reclaimed %d", n)
			}
			return err
		}},
		{"release-MaxRunning", LaneLimits{MaxRunning: 1}, func(t *testing.T, o *Store, l Lease) error {
			// the released execution itself is claimable again: either one starting is fine
			return o.ReleaseLease(context.Background(), ReleaseArgs{Lease: l})
		}},
	}
	for _, where := range []string{"same-store", "other-store"} {
		for _, c := range cases {
			t.Run(where+"/"+c.name, func(t *testing.T) {
				run := conformanceShared
				if where == "same-store" {
					run = conformance
				}
				run(t, func(t *testing.T, b backend) {
					if where == "other-store" && b.pooled {
						t.Skip("behind PgBouncer's transaction pooling no LISTEN: a worker hears of another Store's change at its poll")
					}
					ctx := context.Background()
					loc := b.fresh(t)
					s, _ := b.open(t, loc, WithClock(time.Now), WithWorkerPoll(time.Hour))
					o := s
					if where == "other-store" {
						o, _ = b.open(t, loc, WithClock(time.Now), WithWorkerPoll(time.Hour))
					}
					_, err := o.RegisterWorker(ctx, RegisterWorkerArgs{Namespace: "ns", WorkerID: "x", InstanceID: "x", Lanes: []string{"default"}, TTL: time.Hour})
					must(t, err)
					lim := c.limits
					lim.Namespace, lim.Lane = "ns", "default"
					must(t, o.PutLaneLimits(ctx, lim))
					_, err = o.CreateExecution(ctx, CreateExecutionArgs{Namespace: "ns", Lane: "default", Group: "g"})
					must(t, err)
					first, err := o.ClaimExecution(ctx, ClaimArgs{Namespace: "ns", InstanceID: "x", LeaseTTL: time.Hour})
					must(t, err)
					_, err = o.CreateExecution(ctx, CreateExecutionArgs{Namespace: "ns", Lane: "default", Group: "g"})
					must(t, err)
					started := make(chan struct{}, 1)
					runWorker(t, s, WorkerArgs{Handler: func(ctx context.Context, l Lease) ([]byte, error) {
						started <- struct{}{}
						return nil, nil
					}})
					select {
					case <-started:
						t.Fatal("the cap did not hold the second execution back")
					case <-time.After(300 * time.Millisecond):
					}
					at := time.Now()
					must(t, c.end(t, o, first))
					select {
					case <-started:
						t.Logf("started %v after the end", time.Since(at))
					case <-time.After(3 * time.Second):
						t.Fatalf("the idle worker did not start the next execution within 3 s of the end freeing the cap")
					}
				})
			})
		}
	}
}
