package service

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// afterCall is one wait a RunSweeper asked for, and the channel that ends it.
type afterCall struct {
	d    time.Duration
	fire chan time.Time
}

// recordedAfter is a SweeperArgs.After that never blocks the sweeper: each
// wait is sent to calls, and ends when the test fires it.
func recordedAfter() (func(time.Duration) <-chan time.Time, chan afterCall) {
	calls := make(chan afterCall, 64)
	return func(d time.Duration) <-chan time.Time {
		c := afterCall{d: d, fire: make(chan time.Time, 1)}
		calls <- c
		return c.fire
	}, calls
}

// nextWait returns the wait the sweeper waits on now: the latest it asked
// for once it asks for no other (a wake-up that changes nothing, such as
// PostgreSQL's listener connecting, asks again).
func nextWait(t *testing.T, calls chan afterCall) afterCall {
	t.Helper()
	var c afterCall
	select {
	case c = <-calls:
	case <-time.After(10 * time.Second):
		t.Fatal("the sweeper did not wait again")
	}
	for {
		select {
		case c = <-calls:
		case <-time.After(200 * time.Millisecond):
			return c
		}
	}
}

// TestSweeperRunsSchedulesOnTime: the leading RunSweeper sleeps until the
// next schedule's period begins, not for its Interval, and creates the run
// then, with RunAt the period's start; a schedule put through the Store (or,
// on PostgreSQL, through another) is looked at at once; the full run keeps
// its time; a paused schedule has no next run.
func TestSweeperRunsSchedulesOnTime(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		loc := b.fresh(t)
		s, clock := b.open(t, loc)
		clock.Advance(55 * time.Second) // 12:00:55
		minute := t0.Add(time.Minute)
		must(t, s.PutSchedule(ctx, Schedule{Namespace: "ns", Name: "minutely", Every: time.Minute, Template: CreateExecutionArgs{Lane: "l"}}))

		after, calls := recordedAfter()
		done := make(chan error, 1)
		go func() {
			done <- s.RunSweeper(ctx, SweeperArgs{Interval: 10 * time.Second, InstanceID: "leader", After: after})
		}()
		// The first look, as a follower; it takes the lead and runs.
		nextWait(t, calls).fire <- time.Time{}
		w := nextWait(t, calls)
		if w.d != 5*time.Second {
			t.Fatalf("the leader waits %v, want 5s: until the 12:01:00 period, not its 10s Interval", w.d)
		}
		clock.Advance(5 * time.Second) // 12:01:00
		w.fire <- time.Time{}
		w = nextWait(t, calls)
		if w.d < 4*time.Second || w.d > 6*time.Second {
			t.Fatalf("after the schedule's run the leader waits %v, want the rest of its Interval (10s ± 10%% - 5s)", w.d)
		}
		page, err := s.ListExecutions(ctx, ListExecutionsArgs{Namespace: "ns"})
		must(t, err)
		if len(page.Executions) != 1 || !page.Executions[0].RunAt.Equal(minute) ||
			page.Executions[0].UniqueKey != fmt.Sprintf("schedule:minutely:%d", minute.UnixMilli()) {
			t.Fatalf("the run of 12:01:00: %+v", page.Executions)
		}

		// A schedule put through the Store: looked at at once; due now.
		must(t, s.PutSchedule(ctx, Schedule{Namespace: "ns", Name: "secondly", Every: time.Second, Template: CreateExecutionArgs{Lane: "l"}}))
		w = nextWait(t, calls)
		if w.d != 0 {
			t.Fatalf("after a put of a schedule due now the leader waits %v", w.d)
		}
		w.fire <- time.Time{}
		if w = nextWait(t, calls); w.d != time.Second {
			t.Fatalf("with a schedule of 1s the leader waits %v, want 1s", w.d)
		}
		if n := countExecutions(t, s, "ns"); n != 2 {
			t.Fatalf("%d executions, want 2", n)
		}

		// Paused: no next run, nothing created; the leader's wait for its
		// period ends, and it then waits for the rest of its Interval.
		must(t, s.PutSchedule(ctx, Schedule{Namespace: "ns", Name: "secondly", Every: time.Second, Paused: true, Template: CreateExecutionArgs{Lane: "l"}}))
		clock.Advance(time.Second)
		w.fire <- time.Time{}
		if w = nextWait(t, calls); w.d <= time.Second || w.d > 6*time.Second {
			t.Fatalf("with the 1s schedule paused the leader waits %v, want the rest of its Interval (less the real time the test took)", w.d)
		}
		if n := countExecutions(t, s, "ns"); n != 2 {
			t.Fatalf("%d executions with the 1s schedule paused, want 2", n)
		}
		scs, err := s.ListSchedules(ctx, "ns")
		must(t, err)
		if len(scs) != 2 || !scs[0].NextRunAt.Equal(minute.Add(time.Minute)) || scs[1].Name != "secondly" || !scs[1].Paused || !scs[1].NextRunAt.IsZero() {
			t.Fatalf("schedules: %+v", scs)
		}

		if b.postgres && !b.pooled {
			// Through another Store: PostgreSQL notifies the leader.
			other, _ := b.open(t, loc) // its clock says 12:00:00
			must(t, other.PutSchedule(ctx, Schedule{Namespace: "ns", Name: "elsewhere", Every: time.Second, Template: CreateExecutionArgs{Lane: "l"}}))
			if w = nextWait(t, calls); w.d != 0 {
				t.Fatalf("after another Store put a schedule due at 12:00:00 the leader waits %v", w.d)
			}
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
