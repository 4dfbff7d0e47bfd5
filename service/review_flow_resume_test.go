package service

import (
	"context"
	"testing"
	"time"
)

// Pause: "PutLaneLimits with Paused: false or DeleteLaneLimits
// resumes it and wakes idle workers as new work does" (in every process).
// RunWorker polls once an hour here: only a wake-up can start the handler.
func TestReviewFlowResumeWakes(t *testing.T) {
	for _, where := range []string{"same-store", "other-store"} {
		for _, how := range []string{"put", "delete", "raise-cap"} {
			t.Run(where+"/"+how, func(t *testing.T) {
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
					lim := LaneLimits{Namespace: "ns", Lane: "default", Paused: true}
					if how == "raise-cap" {
						lim = LaneLimits{Namespace: "ns", Lane: "default", MaxRunning: 1}
						_, err := o.RegisterWorker(ctx, RegisterWorkerArgs{Namespace: "ns", WorkerID: "x", InstanceID: "x", Lanes: []string{"default"}, TTL: time.Hour})
						must(t, err)
						_, err = o.CreateExecution(ctx, CreateExecutionArgs{Namespace: "ns", Lane: "default"})
						must(t, err)
						must(t, o.PutLaneLimits(ctx, lim))
						_, err = o.ClaimExecution(ctx, ClaimArgs{Namespace: "ns", InstanceID: "x", LeaseTTL: time.Hour})
						must(t, err)
					} else {
						must(t, o.PutLaneLimits(ctx, lim))
					}
					_, err := o.CreateExecution(ctx, CreateExecutionArgs{Namespace: "ns", Lane: "default"})
					must(t, err)
					started := make(chan struct{}, 1)
					runWorker(t, s, WorkerArgs{Handler: func(ctx context.Context, l Lease) ([]byte, error) {
						started <- struct{}{}
						return nil, nil
					}})
					select {
					case <-started:
						t.Fatal("held work started")
					case <-time.After(300 * time.Millisecond):
					}
					at := time.Now()
					switch how {
					case "put":
						must(t, o.PutLaneLimits(ctx, LaneLimits{Namespace: "ns", Lane: "default"}))
					case "delete":
						must(t, o.DeleteLaneLimits(ctx, "ns", "default"))
					case "raise-cap":
						must(t, o.PutLaneLimits(ctx, LaneLimits{Namespace: "ns", Lane: "default", MaxRunning: 2}))
					}
					select {
					case <-started:
						t.Logf("started %v after", time.Since(at))
					case <-time.After(3 * time.Second):
						t.Fatal("the idle worker did not start within 3 s of the lane's resume")
					}
				})
			})
		}
	}
}
