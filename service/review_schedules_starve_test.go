package service

import (
	"context"
	"testing"
	"time"
)

// slowScheduleRuns is a FleetObserver whose clock moves on by took at each
// schedule run that created executions: a run that took that long (a slow
// or busy database, many schedules).
type slowScheduleRuns struct {
	nopObserver
	clock *fakeClock
	took  time.Duration
}

func (o *slowScheduleRuns) LeaderChanged() {}
func (o *slowScheduleRuns) ScheduleRuns(int) {
	o.clock.Advance(o.took)
}

// TestReviewSweeperRenewsWhileSchedulesRunLate: a leading RunSweeper whose
// schedule runs take as long as the schedule's period (the next period has
// begun when a run ends) must still renew its lease, and run the full
// sweep, at its Interval: its term is 2.5 Intervals.
func TestReviewSweeperRenewsWhileSchedulesRunLate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		every time.Duration
		took  time.Duration
	}{
		{"a run as long as the period", time.Second, time.Second},
		{"a run longer than the period", time.Second, 1500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conformance(t, func(t *testing.T, b backend) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				obs := &slowScheduleRuns{took: tc.took}
				loc := b.fresh(t)
				s, clock := b.open(t, loc, WithObserver(obs))
				obs.clock = clock
				must(t, s.PutSchedule(ctx, Schedule{Namespace: "ns", Name: "secondly", Every: tc.every, Template: CreateExecutionArgs{Lane: "l"}}))

				after, calls := recordedAfter()
				done := make(chan error, 1)
				go func() {
					done <- s.RunSweeper(ctx, SweeperArgs{Interval: 10 * time.Second, InstanceID: "leader", After: after})
				}()
				start := clock.Now()
				// Each wait: the clock moves by its length, then it ends.
				// 40 s of the Store's clock: 4 Intervals, past the 25 s term.
				for clock.Now().Sub(start) < 40*time.Second {
					w := nextWait(t, calls)
					clock.Advance(w.d)
					w.fire <- time.Time{}
				}
				holder, until, err := s.Leader(ctx)
				must(t, err)
				if holder != "leader" {
					t.Fatalf("after %v of schedule runs the leader's lease lapsed (Leader = %q until %v, now %v): RunSweeper never renewed it",
						clock.Now().Sub(start), holder, until, clock.Now())
				}
				cancel()
				select {
				case err := <-done:
					must(t, err)
				case <-time.After(10 * time.Second):
					t.Fatal("RunSweeper did not stop")
				}
			})
		})
	}
}

// sleepyScheduleRuns is a FleetObserver that sleeps took at each schedule
// run that created executions, on the real clock: a run that took that long.
type sleepyScheduleRuns struct {
	nopObserver
	took time.Duration
}

func (o *sleepyScheduleRuns) LeaderChanged()   {}
func (o *sleepyScheduleRuns) ScheduleRuns(int) { time.Sleep(o.took) }

// TestReviewSweeperRenewsWhileSchedulesRunLateRealClock is the same on the
// real clock and timers: Interval 2s (term 5s), a schedule of 1s whose runs
// take 1s. The leader must renew at least every Interval plus a sweep.
func TestReviewSweeperRenewsWhileSchedulesRunLateRealClock(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		loc := b.fresh(t)
		s, _ := b.open(t, loc, WithClock(time.Now), WithObserver(&sleepyScheduleRuns{took: time.Second}))
		must(t, s.PutSchedule(ctx, Schedule{Namespace: "ns", Name: "secondly", Every: time.Second, Template: CreateExecutionArgs{Lane: "l"}}))
		done := make(chan error, 1)
		go func() {
			done <- s.RunSweeper(ctx, SweeperArgs{Interval: 2 * time.Second, InstanceID: "leader"})
		}()
		deadline := time.Now().Add(9 * time.Second)
		led := false
		for time.Now().Before(deadline) {
			holder, until, err := s.Leader(ctx)
			must(t, err)
			switch {
			case holder == "leader":
				led = true
			case led:
				t.Fatalf("the leader's lease lapsed (it ended %v) while its schedule ran late: RunSweeper did not renew it", until)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if !led {
			t.Fatal("RunSweeper never led")
		}
		cancel()
		select {
		case err := <-done:
			must(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("RunSweeper did not stop")
		}
	})
}
