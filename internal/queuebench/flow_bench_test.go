package queuebench

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rosterdb/roster/service"
)

// Flow control's costs:
//   - a claim in a lane with a cap, a cap per group, a rate and 10 groups
//     against a claim of a lane without limits, taking turns in one database
//     (goal: at most 1.3×; BenchmarkClaimFlow);
//   - a claim of a lane without limits beside none or 1,000 limited lanes
//     holding 10,000 groups (goal: unchanged; BenchmarkClaimBesideLimitedLanes);
//   - a claim of a lane with groups beside 1,000 of its groups that have
//     no work left (goal: unchanged; BenchmarkClaimBesideIdleGroups);
//   - RunWorker's throughput on a lane capped at or above its concurrency
//     against the uncapped lane (goal: at least 0.9×), and on a lane capped
//     at 4 with 64 handlers ready (4 run at once: about 4 / handler time;
//     BenchmarkRunWorkerCapped).
//
// The claims compared take turns in one benchmark (claimsTakingTurns), so
// that their ratio is measured at the same moments of a shared machine.

// BenchmarkClaimFlow times ClaimExecution in a lane with limits and in one
// without, in one database.
func BenchmarkClaimFlow(b *testing.B) {
	for _, e := range engines {
		b.Run(e.name, func(b *testing.B) {
			s := e.open(b)
			worker(b, s, "wp", []string{"plain"})
			worker(b, s, "wl", []string{"limited"})
			create(b, s, 1000+b.N, service.CreateExecutionArgs{Namespace: "ns", Lane: "plain", Now: t0.Add(-time.Second)})
			createInGroups(b, s, "limited", 1000+b.N, 10)
			must(b, s.PutLaneLimits(context.Background(), service.LaneLimits{
				Namespace: "ns", Lane: "limited", MaxRunning: 1_000_000, MaxRunningPerGroup: 1_000_000,
				Rate: 1_000_000_000, RatePeriod: time.Second,
			}))
			analyze(b, s)
			claimsTakingTurns(b, claimer{"plain", s, "wp"}, claimer{"limited", s, "wl"})
		})
	}
}

// claimer is a worker that claims in a benchmark, named for its metric.
type claimer struct {
	name string
	s    db
	inst string
}

// claimsTakingTurns times ClaimExecution of each claimer in turn, b.N times
// each (the lease is completed with the timer stopped), so that every
// claimer meets the same machine and the same moments of a shared one; it
// reports each one's time per claim and the ratio of the last to the first.
func claimsTakingTurns(b *testing.B, cs ...claimer) {
	b.Helper()
	ctx := context.Background()
	took := make([]time.Duration, len(cs))
	b.ResetTimer()
	for range b.N {
		for i, c := range cs {
			start := time.Now()
			l, err := c.s.ClaimExecution(ctx, service.ClaimArgs{Namespace: "ns", InstanceID: c.inst, LeaseTTL: time.Hour, Now: t0})
			took[i] += time.Since(start)
			must(b, err)
			b.StopTimer()
			must(b, c.s.CompleteExecution(ctx, service.CompleteArgs{Lease: l, Now: t0}))
			b.StartTimer()
		}
	}
	for i, c := range cs {
		b.ReportMetric(float64(took[i].Microseconds())/float64(b.N), c.name+"-µs/claim")
	}
	last := cs[len(cs)-1].name
	b.ReportMetric(float64(took[len(cs)-1])/float64(took[0]), last+"/"+cs[0].name)
}

// createInGroups creates n ready executions in lane of "ns", taking turns
// among the groups g0, g1, ... (none: groups is 0).
func createInGroups(b *testing.B, s db, lane string, n, groups int) {
	b.Helper()
	batch := make([]service.CreateExecutionArgs, 0, 10_000)
	for i := range n {
		a := service.CreateExecutionArgs{Namespace: "ns", Lane: lane, Now: t0.Add(-time.Second)}
		if groups > 0 {
			a.Group = fmt.Sprintf("g%d", i%groups)
		}
		if batch = append(batch, a); len(batch) == cap(batch) || i == n-1 {
			_, err := s.CreateExecutions(context.Background(), batch)
			must(b, err)
			batch = batch[:0]
		}
	}
}

// BenchmarkClaimBesideLimitedLanes times ClaimExecution of a lane without
// limits in a database without other lanes and in one beside 1,000 limited
// lanes with 10 groups each.
func BenchmarkClaimBesideLimitedLanes(b *testing.B) {
	for _, e := range engines {
		b.Run(e.name, func(b *testing.B) {
			var cs []claimer
			for _, lanes := range []int{0, 1000} {
				s := e.open(b)
				ctx := context.Background()
				worker(b, s, "w", []string{"default"})
				create(b, s, 1000+b.N, service.CreateExecutionArgs{Namespace: "ns", Lane: "default", Now: t0.Add(-time.Second)})
				var batch []service.CreateExecutionArgs
				for l := range lanes {
					lane := fmt.Sprintf("limited%04d", l)
					must(b, s.PutLaneLimits(ctx, service.LaneLimits{Namespace: "ns", Lane: lane, MaxRunning: 4, MaxRunningPerGroup: 1}))
					for g := range 10 {
						batch = append(batch, service.CreateExecutionArgs{Namespace: "ns", Lane: lane, Group: fmt.Sprintf("g%d", g), Now: t0.Add(-time.Second)})
					}
					if len(batch) >= 5000 {
						_, err := s.CreateExecutions(ctx, batch)
						must(b, err)
						batch = batch[:0]
					}
				}
				if len(batch) > 0 {
					_, err := s.CreateExecutions(ctx, batch)
					must(b, err)
				}
				analyze(b, s)
				cs = append(cs, claimer{fmt.Sprintf("limited=%d", lanes), s, "w"})
			}
			claimsTakingTurns(b, cs...)
		})
	}
}

// BenchmarkClaimBesideIdleGroups times ClaimExecution in a lane of 10
// groups with ready work, in a database where the lane had no other group
// and in one where it had 1,000 more whose executions are all finished
// (cancelled): a group without ready work costs a claim nothing.
func BenchmarkClaimBesideIdleGroups(b *testing.B) {
	for _, e := range engines {
		b.Run(e.name, func(b *testing.B) {
			var cs []claimer
			for _, idle := range []int{0, 1000} {
				s := e.open(b)
				ctx := context.Background()
				worker(b, s, "w", []string{"default"})
				gone := make([]service.CreateExecutionArgs, idle)
				for i := range gone {
					gone[i] = service.CreateExecutionArgs{Namespace: "ns", Lane: "default", Group: fmt.Sprintf("idle%d", i), Now: t0.Add(-time.Second)}
				}
				if idle > 0 {
					ids, err := s.CreateExecutions(ctx, gone)
					must(b, err)
					for _, id := range ids {
						must(b, s.CancelExecution(ctx, service.CancelExecutionArgs{ID: id, Now: t0.Add(-time.Second)}))
					}
				}
				createInGroups(b, s, "default", 1000+b.N, 10)
				analyze(b, s)
				cs = append(cs, claimer{fmt.Sprintf("idle=%d", idle), s, "w"})
			}
			claimsTakingTurns(b, cs...)
		})
	}
}

// BenchmarkRunWorkerCapped runs executions through RunWorkers of 64
// handlers (each takes 2 ms): on a lane without a cap against one with a cap
// of 64, in one database, each lane's worker running b.N/4 executions in
// turn four times (so that both meet the same moments of a shared machine),
// reporting each lane's executions per second and their ratio; and on a
// lane with a cap of 4, reporting executions per second and the most that
// ran at once.
func BenchmarkRunWorkerCapped(b *testing.B) {
	const concurrency, handlerTime, rounds = 64, 2 * time.Millisecond, 4
	for _, e := range engines {
		b.Run(e.name+"/cap=64", func(b *testing.B) {
			s := e.open(b)
			must(b, s.PutLaneLimits(context.Background(), service.LaneLimits{Namespace: "ns", Lane: "capped", MaxRunning: concurrency}))
			per := max(b.N/rounds, 1)
			for _, lane := range []string{"free", "capped"} {
				// What the workers take beyond their quota before they stop too.
				create(b, s, rounds*(per+2*concurrency), service.CreateExecutionArgs{Namespace: "ns", Lane: lane})
			}
			analyze(b, s)
			var took [2]time.Duration
			b.ResetTimer()
			for range rounds {
				for i, lane := range []string{"free", "capped"} {
					d, _ := runCapped(b, s, lane, concurrency, handlerTime, per)
					took[i] += d
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(rounds*per)/took[0].Seconds(), "free-jobs/s")
			b.ReportMetric(float64(rounds*per)/took[1].Seconds(), "capped-jobs/s")
			b.ReportMetric(took[0].Seconds()/took[1].Seconds(), "capped/free")
		})
		b.Run(e.name+"/cap=4", func(b *testing.B) {
			s := e.open(b)
			must(b, s.PutLaneLimits(context.Background(), service.LaneLimits{Namespace: "ns", Lane: "capped", MaxRunning: 4}))
			create(b, s, b.N+2*concurrency, service.CreateExecutionArgs{Namespace: "ns", Lane: "capped"})
			analyze(b, s)
			b.ResetTimer()
			d, most := runCapped(b, s, "capped", concurrency, handlerTime, b.N)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/d.Seconds(), "jobs/s")
			b.ReportMetric(float64(most), "most-running")
		})
	}
}

// runCapped runs a RunWorker of concurrency handlers (each takes
// handlerTime) on lane until n executions ran, and stops it: how long the n
// took from its Ready, and the most that ran at once.
func runCapped(b *testing.B, s db, lane string, concurrency int, handlerTime time.Duration, n int) (time.Duration, int64) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var done, running, most atomic.Int64
	finished := make(chan struct{})
	ready := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		_ = s.RunWorker(ctx, service.WorkerArgs{
			Namespace: "ns", WorkerID: "w", InstanceID: "w-" + lane, Lanes: []string{lane}, TTL: time.Minute,
			Concurrency: concurrency, Ready: func() { close(ready) },
			Handler: func(context.Context, service.Lease) ([]byte, error) {
				now := running.Add(1)
				for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
				}
				time.Sleep(handlerTime)
				running.Add(-1)
				if done.Add(1) == int64(n) {
					close(finished)
				}
				return nil, nil
			},
		})
	}()
	<-ready
	start := time.Now()
	select {
	case <-finished:
	case <-time.After(10 * time.Minute):
		b.Fatalf("%d of %d ran", done.Load(), n)
	}
	took := time.Since(start)
	cancel()
	<-stopped
	return took, most.Load()
}

// BenchmarkClaimEveryGroupCapped times a claim that finds nothing in a lane
// of 400 groups, each with ready work at 11 priorities and each at its cap
// of one running: the claim passes over every group at every priority.
func BenchmarkClaimEveryGroupCapped(b *testing.B) {
	const groups, priorities = 400, 11
	for _, e := range engines {
		b.Run(e.name, func(b *testing.B) {
			s := e.open(b)
			ctx := context.Background()
			worker(b, s, "w", []string{"default"})
			must(b, s.PutLaneLimits(ctx, service.LaneLimits{Namespace: "ns", Lane: "default", MaxRunningPerGroup: 1}))
			var batch []service.CreateExecutionArgs
			for g := range groups {
				for p := range priorities + 1 { // one more at the top priority: the one that runs
					batch = append(batch, service.CreateExecutionArgs{
						Namespace: "ns", Lane: "default", Group: fmt.Sprintf("g%03d", g), Priority: min(p, priorities-1), Now: t0.Add(-time.Second),
					})
				}
			}
			_, err := s.CreateExecutions(ctx, batch)
			must(b, err)
			for range groups {
				_, err := s.ClaimExecution(ctx, service.ClaimArgs{Namespace: "ns", InstanceID: "w", LeaseTTL: time.Hour, Now: t0})
				must(b, err)
			}
			analyze(b, s)
			b.ResetTimer()
			for range b.N {
				_, err := s.ClaimExecution(ctx, service.ClaimArgs{Namespace: "ns", InstanceID: "w", LeaseTTL: time.Hour, Now: t0})
				if !errors.Is(err, service.ErrNoWork) {
					b.Fatalf("a claim with every group at its cap: %v", err)
				}
			}
		})
	}
}
