package metrics

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rosterdb/roster/service"
)

// finishedFixture: a worker Store that finishes n executions of lane
// "a" at t0 (minute 12:00), and a fleet Collector watching a read-only
// Store of the same file whose clock is scrapeClock.
func finishedFixture(t *testing.T, n int, scrapeClock func() time.Time) (*Collector, *prometheus.Registry) {
	t.Helper()
	ctx := context.Background()
	path := t.TempDir() + "/fleet.db"
	worker, err := service.Open(ctx, path, service.WithClock(func() time.Time { return t0 }))
	must(t, err)
	t.Cleanup(func() { worker.Close() })
	_, err = worker.RegisterWorker(ctx, service.RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "i", Lanes: []string{"a"}, TTL: 10 * time.Hour})
	must(t, err)
	for range n {
		_, err := worker.CreateExecution(ctx, service.CreateExecutionArgs{Namespace: "ns", Lane: "a"})
		must(t, err)
		l, err := worker.ClaimExecution(ctx, service.ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Minute})
		must(t, err)
		must(t, worker.CompleteExecution(ctx, service.CompleteArgs{Lease: l}))
	}
	s, err := service.Open(ctx, path, service.WithClock(scrapeClock), service.WithReadOnly())
	must(t, err)
	t.Cleanup(func() { s.Close() })
	c := NewFleet()
	c.Watch(s)
	reg := prometheus.NewPedanticRegistry()
	must(t, reg.Register(c))
	return c, reg
}

func finishedCompleted(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	must(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "roster_lane_finished_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var lane, outcome string
			for _, lp := range m.GetLabel() {
				switch lp.GetName() {
				case "lane":
					lane = lp.GetValue()
				case "outcome":
					outcome = lp.GetValue()
				}
			}
			if lane == "a" && outcome == "completed" {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatal("no roster_lane_finished_total{lane=a,outcome=completed}")
	return 0
}

// A clock stepping back 2 seconds across a minute boundary (an NTP
// correction) brings a forgotten minute back into the window: its
// executions are not counted a second time.
func TestLaneFinishedClockBack(t *testing.T) {
	var mu sync.Mutex
	now := t0.Add(30 * time.Minute)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	set := func(at time.Time) { mu.Lock(); now = at; mu.Unlock() }
	_, reg := finishedFixture(t, 3, clock)
	if got := finishedCompleted(t, reg); got != 3 {
		t.Fatalf("first scrape: %v, want 3", got)
	}
	set(t0.Add(time.Hour + time.Minute + time.Second)) // 13:01:01: minute 12:00 leaves the window
	if got := finishedCompleted(t, reg); got != 3 {
		t.Fatalf("13:01:01: %v, want 3", got)
	}
	set(t0.Add(time.Hour + 59*time.Second)) // 13:00:59: the clock steps back 2s
	if got := finishedCompleted(t, reg); got != 3 {
		t.Fatalf("after the clock stepped back 2s: roster_lane_finished_total = %v, want 3 (3 executions finished)", got)
	}
}

// Two concurrent scrapes (e.g. an HA pair of Prometheus servers), the clock
// never going back: the scrape that read the clock first (13:00:59.900)
// takes c.mu after the one that read it later (13:01:00.100) has forgotten
// minute 12:00, and does not count that minute again.
func TestLaneFinishedConcurrentScrapes(t *testing.T) {
	var mu sync.Mutex
	now := t0.Add(30 * time.Minute)
	var blockNext atomic.Bool
	inA, gate := make(chan struct{}), make(chan struct{})
	clock := func() time.Time {
		mu.Lock()
		at := now
		mu.Unlock()
		if blockNext.CompareAndSwap(true, false) {
			close(inA) // scrape A has read the clock; it is descheduled (a slow Stats read) here
			<-gate
		}
		return at
	}
	set := func(at time.Time) { mu.Lock(); now = at; mu.Unlock() }
	_, reg := finishedFixture(t, 3, clock)
	if got := finishedCompleted(t, reg); got != 3 {
		t.Fatalf("first scrape: %v, want 3", got)
	}
	set(t0.Add(time.Hour + 59*time.Second + 900*time.Millisecond))
	blockNext.Store(true)
	done := make(chan error)
	go func() { _, err := reg.Gather(); done <- err }() // scrape A
	<-inA
	set(t0.Add(time.Hour + time.Minute + 100*time.Millisecond))
	if got := finishedCompleted(t, reg); got != 3 { // scrape B
		t.Fatalf("scrape B: %v, want 3", got)
	}
	close(gate)
	must(t, <-done)
	set(t0.Add(time.Hour + 90*time.Second))
	if got := finishedCompleted(t, reg); got != 3 {
		t.Fatalf("after two concurrent scrapes: roster_lane_finished_total = %v, want 3 (3 executions finished)", got)
	}
	problems, err := testutil.GatherAndLint(reg)
	must(t, err)
	if len(problems) > 0 {
		t.Fatalf("lint: %v", problems)
	}
}
