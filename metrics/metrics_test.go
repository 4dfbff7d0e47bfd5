package metrics

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rosterdb/roster/service"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestCollector(t *testing.T) {
	ctx := context.Background()
	c := New()
	now := t0.Add(time.Minute)
	s, err := service.Open(ctx, ":memory:", service.WithObserver(c), service.WithClock(func() time.Time { return now }))
	must(t, err)
	defer s.Close()
	c.Watch(s)

	reg := prometheus.NewPedanticRegistry()
	must(t, reg.Register(c))

	_, err = s.RegisterWorker(ctx, service.RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "i", Lanes: []string{"l"}, TTL: time.Hour, Now: t0})
	must(t, err)
	_, err = s.RegisterWorker(ctx, service.RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "gone", TTL: time.Second, Now: t0})
	must(t, err)
	for range 4 {
		_, err := s.CreateExecution(ctx, service.CreateExecutionArgs{Namespace: "ns", Lane: "l", Now: t0})
		must(t, err)
	}
	_, err = s.CreateExecution(ctx, service.CreateExecutionArgs{Namespace: "ns", Lane: "l", Now: t0, RunAt: t0.Add(time.Hour)})
	must(t, err)
	leases, err := s.ClaimExecutions(ctx, service.ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: 30 * time.Second, Now: t0}, 3)
	must(t, err)
	must(t, s.CompleteExecution(ctx, service.CompleteArgs{Lease: leases[0], Now: t0}))
	must(t, s.FailExecution(ctx, service.FailArgs{Lease: leases[1], Reason: "x", Now: t0}))
	// A lost lease: completing the same lease twice.
	if err := s.CompleteExecution(ctx, service.CompleteArgs{Lease: leases[0], Now: t0}); err == nil {
		t.Fatal("a second completion succeeded")
	}
	a := service.Agent{ID: "a", State: service.AgentRunning, Provider: "p", OwnerActor: "o", OwnerPeerClass: "c",
		OwnerWriteNamespace: "ns", SpawnFingerprint: "f", SpawnedAt: t0, StateChangedAt: t0}
	must(t, s.InsertAgent(ctx, a))

	// At t0+1m: "gone" lapsed; leases[2] (30 s) expired; one ready since t0 (the
	// failed one had one attempt);
	// one scheduled; one running.
	expected := `
# HELP roster_workers Registered workers, alive or lapsed (not yet swept).
# TYPE roster_workers gauge
roster_workers{namespace="ns",state="alive"} 1
roster_workers{namespace="ns",state="lapsed"} 1
# HELP roster_expired_leases Running leases past their expiry.
# TYPE roster_expired_leases gauge
roster_expired_leases{namespace="ns"} 1
# HELP roster_executions Live executions: ready (claimable), scheduled (RunAt ahead) or running.
# TYPE roster_executions gauge
roster_executions{lane="l",namespace="ns",state="ready"} 1
roster_executions{lane="l",namespace="ns",state="running"} 1
roster_executions{lane="l",namespace="ns",state="scheduled"} 1
# HELP roster_oldest_ready_age_seconds Age of the oldest ready execution's RunAt.
# TYPE roster_oldest_ready_age_seconds gauge
roster_oldest_ready_age_seconds{lane="l",namespace="ns"} 60
# HELP roster_agents Agents per state.
# TYPE roster_agents gauge
roster_agents{state="running"} 1
roster_agents{state="spawned"} 0
roster_agents{state="suspended"} 0
roster_agents{state="terminal"} 0
`
	must(t, testutil.GatherAndCompare(reg, strings.NewReader(expected),
		"roster_workers", "roster_expired_leases", "roster_executions", "roster_oldest_ready_age_seconds", "roster_agents"))

	n, err := s.ReclaimExpiredLeases(ctx, now, 0)
	must(t, err)
	swept, err := s.SweepExpiredWorkers(ctx, now)
	must(t, err)
	for name, tc := range map[string]struct {
		c    prometheus.Counter
		want float64
	}{
		"claims": {c.claims.WithLabelValues("ns", "l"), 3}, "completions": {c.completions.WithLabelValues("ns", "l"), 1},
		"failures":    {c.failures.WithLabelValues("ns", "l"), 1},
		"leases lost": {c.leasesLost, 1}, "reclaims": {c.reclaims, float64(n)}, "swept": {c.swept, float64(swept)},
	} {
		if got := testutil.ToFloat64(tc.c); got != tc.want || tc.want == 0 {
			t.Errorf("%s = %v, want %v (nonzero)", name, got, tc.want)
		}
	}
	if testutil.CollectAndCount(c.commit) != 1 || testutil.CollectAndCount(c.writeWait) != 1 {
		t.Fatal("the histograms are not exported")
	}
	if got := histogramCount(t, reg, "roster_commit_seconds"); got == 0 {
		t.Fatal("no commit was observed")
	}
	if got := histogramCount(t, reg, "roster_write_queue_wait_seconds"); got == 0 {
		t.Fatal("no write wait was observed")
	}
	// Lint: the metrics follow Prometheus's naming rules.
	problems, err := testutil.GatherAndLint(reg)
	must(t, err)
	if len(problems) > 0 {
		t.Fatalf("lint: %+v", problems)
	}
}

func histogramCount(t *testing.T, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	must(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	t.Fatalf("%s not gathered", name)
	return 0
}

// Overloads are counted.
func TestCollectorCountsOverloads(t *testing.T) {
	c := New()
	c.Overloaded()
	if testutil.ToFloat64(c.overloads) != 1 {
		t.Fatal("overload not counted")
	}
}

// Importing service alone pulls no metrics dependency.
func TestServiceDoesNotImportPrometheus(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/rosterdb/roster/service").CombinedOutput()
	must(t, err)
	if strings.Contains(string(out), "prometheus") {
		t.Fatal("package service depends on prometheus")
	}
}

// Leadership and schedules are counted; the leader's lease is a gauge; a
// lane emptied reads 0 instead of dropping out; without Watch a Collector
// exports no fleet gauge.
func TestCollectorFleet(t *testing.T) {
	ctx := context.Background()
	c := New()
	now := t0
	s, err := service.Open(ctx, ":memory:", service.WithObserver(c), service.WithClock(func() time.Time { return now }))
	must(t, err)
	defer s.Close()
	reg := prometheus.NewPedanticRegistry()
	must(t, reg.Register(c))

	id, err := s.CreateExecution(ctx, service.CreateExecutionArgs{Namespace: "ns", Lane: "l"})
	must(t, err)
	if n, err := testutil.GatherAndCount(reg, "roster_executions", "roster_workers"); err != nil || n != 0 {
		t.Fatalf("fleet gauges without Watch: %d (%v)", n, err)
	}
	c.Watch(s)
	must(t, s.PutSchedule(ctx, service.Schedule{Namespace: "ns", Name: "m", Every: time.Minute, Template: service.CreateExecutionArgs{Lane: "s"}}))
	first := make(chan time.Time, 1)
	first <- now
	sctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.RunSweeper(sctx, service.SweeperArgs{Interval: time.Minute, InstanceID: "me",
			After: func(time.Duration) <-chan time.Time { return first }})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for testutil.ToFloat64(c.scheduleRuns) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the leader's run created no schedule run")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := testutil.ToFloat64(c.leaderChanges); got != 1 {
		t.Fatalf("leader changes %v, want 1", got)
	}
	// Lane l is reported, then emptied by a cancel.
	_, err = testutil.GatherAndCount(reg)
	must(t, err)
	must(t, s.CancelExecution(ctx, service.CancelExecutionArgs{ID: id}))
	expected := `
# HELP roster_executions Live executions: ready (claimable), scheduled (RunAt ahead) or running.
# TYPE roster_executions gauge
roster_executions{lane="l",namespace="ns",state="ready"} 0
roster_executions{lane="l",namespace="ns",state="running"} 0
roster_executions{lane="l",namespace="ns",state="scheduled"} 0
roster_executions{lane="s",namespace="ns",state="ready"} 1
roster_executions{lane="s",namespace="ns",state="running"} 0
roster_executions{lane="s",namespace="ns",state="scheduled"} 0
# HELP roster_leader_lease_seconds Seconds left on the maintenance leader's lease, labelled with the leader's instance (absent: no leader).
# TYPE roster_leader_lease_seconds gauge
roster_leader_lease_seconds{instance="me"} 150
`
	must(t, testutil.GatherAndCompare(reg, strings.NewReader(expected), "roster_executions", "roster_leader_lease_seconds"))
	stop()
	<-done
	if got := testutil.ToFloat64(c.leaderChanges); got != 1 {
		t.Fatalf("leader changes after a resign %v", got)
	}
}

// A lane's limits and pause are gauges, and a claim a cap held back counts.
func TestCollectorLaneLimits(t *testing.T) {
	ctx := context.Background()
	c := New()
	s, err := service.Open(ctx, ":memory:", service.WithObserver(c), service.WithClock(func() time.Time { return t0 }))
	must(t, err)
	defer s.Close()
	c.Watch(s)
	_, err = s.RegisterWorker(ctx, service.RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "i", Lanes: []string{"l"}, TTL: time.Hour, Now: t0})
	must(t, err)
	for range 2 {
		_, err := s.CreateExecution(ctx, service.CreateExecutionArgs{Namespace: "ns", Lane: "l", Now: t0})
		must(t, err)
	}
	must(t, s.PutLaneLimits(ctx, service.LaneLimits{Namespace: "ns", Lane: "l", MaxRunning: 1, Rate: 10, RatePeriod: time.Minute}))
	if _, err := s.ClaimExecutions(ctx, service.ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Minute, Now: t0}, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ClaimExecution(ctx, service.ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Minute, Now: t0}); err == nil {
		t.Fatal("a claim passed the cap")
	}
	expected := `
# HELP roster_lane_limit A live lane's flow-control limit (absent: none): max_running, max_running_per_group, or rate (claims per rate_period_seconds).
# TYPE roster_lane_limit gauge
roster_lane_limit{lane="l",limit="max_running",namespace="ns"} 1
roster_lane_limit{lane="l",limit="rate",namespace="ns"} 10
roster_lane_limit{lane="l",limit="rate_period_seconds",namespace="ns"} 60
# HELP roster_lane_paused 1 when a live lane with limits is paused, else 0.
# TYPE roster_lane_paused gauge
roster_lane_paused{lane="l",namespace="ns"} 0
# HELP roster_claims_held_total Lanes whose ready work a cap, a rate or a pause held back from a claim of this process, counted per claim.
# TYPE roster_claims_held_total counter
roster_claims_held_total{namespace="ns"} 2
`
	must(t, testutil.CollectAndCompare(c, strings.NewReader(expected), "roster_lane_limit", "roster_lane_paused", "roster_claims_held_total"))
}

// histogramTotals sums a histogram's samples and values over its series of
// one namespace and lane.
func histogramTotals(t *testing.T, reg *prometheus.Registry, name, namespace, lane string) (count uint64, sum float64) {
	t.Helper()
	mfs, err := reg.Gather()
	must(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] == namespace && labels["lane"] == lane {
				count += m.GetHistogram().GetSampleCount()
				sum += m.GetHistogram().GetSampleSum()
			}
		}
	}
	return count, sum
}

// TestCollectorTimings: roster_queue_wait_seconds observes, per namespace and
// lane, how long each claimed execution had been claimable (RunAt to the
// claim, direct claims and RunWorker's alike), and roster_run_seconds how
// long each RunWorker handler ran.
func TestCollectorTimings(t *testing.T) {
	ctx := context.Background()
	c := New()
	s, err := service.Open(ctx, ":memory:", service.WithObserver(c))
	must(t, err)
	defer s.Close()
	reg := prometheus.NewPedanticRegistry()
	must(t, reg.Register(c))

	// A direct claim 3 s after the RunAt.
	_, err = s.RegisterWorker(ctx, service.RegisterWorkerArgs{Namespace: "direct", WorkerID: "w", InstanceID: "i", Lanes: []string{"l"}, TTL: time.Hour, Now: t0})
	must(t, err)
	_, err = s.CreateExecution(ctx, service.CreateExecutionArgs{Namespace: "direct", Lane: "l", Now: t0, RunAt: t0})
	must(t, err)
	_, err = s.ClaimExecution(ctx, service.ClaimArgs{Namespace: "direct", InstanceID: "i", LeaseTTL: time.Minute, Now: t0.Add(3 * time.Second)})
	must(t, err)
	if n, sum := histogramTotals(t, reg, "roster_queue_wait_seconds", "direct", "l"); n != 1 || sum != 3 {
		t.Fatalf("queue wait of the direct claim: %d samples, sum %v s; want 1, 3", n, sum)
	}

	// RunWorker: two executions claimable for 2 s, handlers of 20 ms.
	for range 2 {
		_, err := s.CreateExecution(ctx, service.CreateExecutionArgs{Namespace: "ns", Lane: "work", RunAt: time.Now().Add(-2 * time.Second)})
		must(t, err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- s.RunWorker(wctx, service.WorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "runner", Lanes: []string{"work"},
			TTL: 10 * time.Second, Concurrency: 1,
			Handler: func(context.Context, service.Lease) ([]byte, error) {
				time.Sleep(20 * time.Millisecond)
				return nil, nil
			}})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if n, _ := histogramTotals(t, reg, "roster_run_seconds", "ns", "work"); n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("two handlers' runs were not observed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	must(t, <-done)
	if n, sum := histogramTotals(t, reg, "roster_run_seconds", "ns", "work"); n != 2 || sum < 0.04 {
		t.Fatalf("run seconds: %d samples, sum %v s; want 2, at least 0.04", n, sum)
	}
	if n, sum := histogramTotals(t, reg, "roster_queue_wait_seconds", "ns", "work"); n != 2 || sum < 4 {
		t.Fatalf("queue wait of RunWorker's claims: %d samples, sum %v s; want 2, at least 4", n, sum)
	}
	problems, err := testutil.GatherAndLint(reg)
	must(t, err)
	if len(problems) > 0 {
		t.Fatalf("lint: %+v", problems)
	}
}

// TestNewFleet: a fleet Collector exports the fleet's gauges and the failed
// Stats reads, and none of a working process's counters or histograms,
// even after its Store did work.
func TestNewFleet(t *testing.T) {
	ctx := context.Background()
	c := NewFleet()
	s, err := service.Open(ctx, ":memory:", service.WithObserver(c))
	must(t, err)
	defer s.Close()
	c.Watch(s)
	reg := prometheus.NewPedanticRegistry()
	must(t, reg.Register(c))
	_, err = s.RegisterWorker(ctx, service.RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "i", Lanes: []string{"l"}, TTL: time.Hour})
	must(t, err)
	_, err = s.CreateExecution(ctx, service.CreateExecutionArgs{Namespace: "ns", Lane: "l"})
	must(t, err)
	mfs, err := reg.Gather()
	must(t, err)
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	want := "roster_agents roster_executions roster_expired_leases roster_oldest_ready_age_seconds roster_stats_errors_total roster_workers"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("a fleet Collector exports %s, want %s", got, want)
	}
}

// TestCollectorLaneFinished: roster_lane_finished_total counts the whole
// fleet's finished executions by lane and outcome, read from the database
// (another Store's work included), each once however often it is scraped,
// and keeps counting after the minutes it read leave the hour it reads.
func TestCollectorLaneFinished(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/fleet.db"
	now := t0
	clock := func() time.Time { return now }
	worker, err := service.Open(ctx, path, service.WithClock(clock)) // does the work, unobserved
	must(t, err)
	defer worker.Close()
	c := NewFleet()
	s, err := service.Open(ctx, path, service.WithClock(clock), service.WithReadOnly())
	must(t, err)
	defer s.Close()
	c.Watch(s)
	reg := prometheus.NewPedanticRegistry()
	must(t, reg.Register(c))
	_, err = worker.RegisterWorker(ctx, service.RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "i", Lanes: []string{"a", "b"}, TTL: 10 * time.Hour})
	must(t, err)
	finish := func(lane string, fail bool) {
		t.Helper()
		_, err := worker.CreateExecution(ctx, service.CreateExecutionArgs{Namespace: "ns", Lane: lane})
		must(t, err)
		l, err := worker.ClaimExecution(ctx, service.ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Minute})
		must(t, err)
		if fail {
			must(t, worker.FailExecution(ctx, service.FailArgs{Lease: l, Reason: "x"}))
		} else {
			must(t, worker.CompleteExecution(ctx, service.CompleteArgs{Lease: l}))
		}
	}
	expect := func(aDone, aFailed, bDone int) {
		t.Helper()
		want := fmt.Sprintf(`
# HELP roster_lane_finished_total Executions of the lane that ended completed, or failed for good (no attempt left), read from the database (the whole fleet's), counted since this Collector's first scrape (which counts the last hour's).
# TYPE roster_lane_finished_total counter
roster_lane_finished_total{lane="a",namespace="ns",outcome="completed"} %d
roster_lane_finished_total{lane="a",namespace="ns",outcome="failed"} %d
roster_lane_finished_total{lane="b",namespace="ns",outcome="completed"} %d
roster_lane_finished_total{lane="b",namespace="ns",outcome="failed"} 0
`, aDone, aFailed, bDone)
		must(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "roster_lane_finished_total"))
	}
	finish("a", false)
	finish("a", false)
	finish("a", true)
	finish("b", false)
	expect(2, 1, 1) // the first scrape counts the last hour's
	expect(2, 1, 1) // and a scrape counts each once
	now = now.Add(30 * time.Second)
	finish("a", false) // in a minute already read
	now = now.Add(time.Minute)
	finish("a", true)
	expect(3, 2, 1)
	now = now.Add(2 * time.Hour) // every minute read has left the window
	expect(3, 2, 1)
	finish("b", false)
	expect(3, 2, 2)
	if n, err := testutil.GatherAndCount(reg, "roster_stats_errors_total"); err != nil || n != 1 || testutil.ToFloat64(c.scrapeErrors) != 0 {
		t.Fatalf("stats errors: %d series (%v), %v", n, err, testutil.ToFloat64(c.scrapeErrors))
	}
	problems, err := testutil.GatherAndLint(reg)
	must(t, err)
	if len(problems) > 0 {
		t.Fatalf("lint: %v", problems)
	}
}
