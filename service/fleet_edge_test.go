package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// A cron that never fires ("0 0 30 2 *": February 30th) parses, but is
// refused: it would be stored with NextRunAt in year 1, always due.
func TestScheduleCronThatNeverFires(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		err := s.PutSchedule(ctx, Schedule{Namespace: "ns", Name: "feb30", Cron: "0 0 30 2 *", Template: CreateExecutionArgs{Lane: "l"}})
		if err == nil {
			scs, _ := s.ListSchedules(ctx, "ns")
			t.Logf("accepted; NextRunAt = %v", scs[0].NextRunAt)
		}
		began := time.Now()
		sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		r, serr := s.Sweep(sctx, time.Time{}, SweeperArgs{})
		took := time.Since(began)
		p, _ := s.ListExecutions(ctx, ListExecutionsArgs{Namespace: "ns"})
		var keys []string
		for _, e := range p.Executions {
			keys = append(keys, e.UniqueKey)
		}
		if err == nil && (r.Scheduled != 0 || len(p.Executions) != 0) {
			t.Fatalf("PutSchedule accepted a cron that never fires (err %v); one Sweep took %v, err %v, and created %d runs: %v",
				err, took, serr, r.Scheduled, keys)
		}
	})
}

// Cron is 5 fields in UTC: the parser's time zone prefixes (local times,
// daylight saving) and descriptors (@every, unaligned) are refused.
func TestScheduleCronIsFiveFieldsInUTC(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		var bad []string
		for _, spec := range []string{"CRON_TZ=America/New_York 0 12 * * *", "TZ=Asia/Tokyo 0 12 * * *", "@every 90s"} {
			err := s.PutSchedule(ctx, Schedule{Namespace: "ns", Name: fmt.Sprintf("s%d", len(bad)), Cron: spec, Template: CreateExecutionArgs{Lane: "l"}})
			if err == nil {
				bad = append(bad, spec)
			}
		}
		scs, _ := s.ListSchedules(ctx, "ns")
		var next []string
		for _, sc := range scs {
			next = append(next, sc.Cron+" -> next "+sc.NextRunAt.Format(time.RFC3339))
		}
		if len(bad) > 0 {
			t.Fatalf("PutSchedule accepted non-UTC / non-5-field cron specs %q (now %v): %s", bad, t0, strings.Join(next, "; "))
		}
	})
}

// PruneExecutions with a horizon after now never releases a key still
// inside its UniqueFor.
func TestPruneKeepsUniqueForHolds(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, clock := b.newStore(t)
		first := create(t, s, CreateExecutionArgs{UniqueKey: "daily-report", UniqueFor: 24 * time.Hour})
		must(t, s.CancelExecution(ctx, CancelExecutionArgs{ID: first, Now: t0}))
		// "Prune everything that has finished": the execution finished at
		// t0, before t0+48h. Its key is held until t0+24h whatever happens.
		n, err := s.PruneExecutions(ctx, t0.Add(48*time.Hour))
		must(t, err)
		clock.Advance(time.Minute) // t0+1m: well inside UniqueFor
		again := create(t, s, CreateExecutionArgs{UniqueKey: "daily-report"})
		if again != first {
			t.Fatalf("pruned %d; 1 minute into a 24h UniqueFor a duplicate created %s (holder %s): the key was released by prune", n, again, first)
		}
	})
}

// Replacing a schedule (same timing) whose current period is due but not
// yet run keeps that period: it still runs.
func TestPutScheduleKeepsDuePeriod(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, clock := b.newStore(t)
		clock.Advance(-30 * time.Minute) // 11:30
		sc := Schedule{Namespace: "ns", Name: "hourly", Every: time.Hour, Template: CreateExecutionArgs{Lane: "l", Payload: []byte("v1")}}
		must(t, s.PutSchedule(ctx, sc))
		clock.Advance(30*time.Minute + 3*time.Second) // 12:00:03, the 12:00 period is due; the leader sweeps at 12:00:10
		sc.Template.Payload = []byte("v2")            // an operator updates the payload
		must(t, s.PutSchedule(ctx, sc))
		clock.Advance(7 * time.Second)
		r, err := s.Sweep(ctx, time.Time{}, SweeperArgs{})
		must(t, err)
		scs, err := s.ListSchedules(ctx, "ns")
		must(t, err)
		if r.Scheduled != 1 {
			t.Fatalf("the 12:00 period was due before the update; the sweep at 12:00:10 created %d runs, NextRunAt now %v", r.Scheduled, scs[0].NextRunAt)
		}
	})
}

// A follower takes over within 3 Intervals of the leader's death, even when
// the leader died right after renewing (its lease lasts 2.5 Intervals, and a
// follower looks every Interval/4).
func TestTakeoverWithinThreeIntervals(t *testing.T) {
	// 20 ms: a lease is 2.5 Intervals whatever the Interval (a run longer than
	// a term goes on under renewals, it does not lengthen the term).
	for _, interval := range []time.Duration{10 * time.Second, 20 * time.Millisecond} {
		t.Run(interval.String(), func(t *testing.T) {
			conformanceShared(t, func(t *testing.T, b backend) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				loc := b.fresh(t)
				sa, clock := b.open(t, loc)
				sb, _ := b.open(t, loc, WithClock(clock.Now))
				never := make(chan time.Time)
				fired := func() <-chan time.Time { ch := make(chan time.Time, 1); ch <- time.Time{}; return ch }

				// A takes the lease once and then hangs (a dead process: no renewal, no resign).
				var aCalls int
				doneA := make(chan struct{})
				go func() {
					defer close(doneA)
					_ = sa.RunSweeper(ctx, SweeperArgs{Interval: interval, InstanceID: "a", After: func(time.Duration) <-chan time.Time {
						aCalls++
						if aCalls == 1 {
							return fired()
						}
						return never
					}})
				}()
				deadline := time.Now().Add(10 * time.Second)
				for {
					id, _, err := sa.Leader(ctx)
					must(t, err)
					if id == "a" {
						break
					}
					if time.Now().After(deadline) {
						t.Fatal("a never led")
					}
					time.Sleep(5 * time.Millisecond)
				}
				died := clock.Now()

				// B follows; each wait moves the shared clock by the wait asked for.
				took := make(chan time.Time, 1)
				doneB := make(chan struct{})
				go func() {
					defer close(doneB)
					_ = sb.RunSweeper(ctx, SweeperArgs{Interval: interval, InstanceID: "b", After: func(d time.Duration) <-chan time.Time {
						if id, _, err := sb.Leader(ctx); err == nil && id == "b" {
							select {
							case took <- clock.Now():
							default:
							}
							return never
						}
						clock.Advance(d)
						return fired()
					}})
				}()
				var at time.Time
				select {
				case at = <-took:
				case <-time.After(30 * time.Second):
					t.Fatal("b never took over")
				}
				cancel()
				<-doneA
				<-doneB
				if after := at.Sub(died); after > 3*interval {
					t.Fatalf("Interval %v: the leader died at %v (right after renewing); the follower took over %v later, more than 3 Intervals (%v)",
						interval, died.Format("15:04:05.000"), after, 3*interval)
				}
			})
		})
	}
}

// A key is held while its execution was created less than UniqueFor ago;
// a UniqueFor that is not a whole number of milliseconds is rounded up.
func TestUniqueForBoundary(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		var fails []string
		for i, tc := range []struct {
			uniqueFor, age time.Duration
			held           bool
		}{
			{time.Hour, time.Hour - time.Millisecond, true},
			{time.Hour, time.Hour, false},
			{1500 * time.Microsecond, time.Millisecond, true},
			{500 * time.Microsecond, 0, true},
		} {
			key := fmt.Sprintf("k%d", i)
			first := create(t, s, CreateExecutionArgs{UniqueKey: key, UniqueFor: tc.uniqueFor, Now: t0})
			must(t, s.CancelExecution(ctx, CancelExecutionArgs{ID: first, Now: t0}))
			again := create(t, s, CreateExecutionArgs{UniqueKey: key, Now: t0.Add(tc.age)})
			if (again == first) != tc.held {
				fails = append(fails, fmt.Sprintf("UniqueFor %v, created %v ago: held=%v, want %v", tc.uniqueFor, tc.age, again == first, tc.held))
			}
		}
		if len(fails) > 0 {
			t.Fatal(strings.Join(fails, "; "))
		}
	})
}

// A retention reaching back before 1970 (any over about 56 years, up to the
// maximum of 100) keeps everything: the sweep's horizon stops at the epoch,
// and the sweep, schedules included, runs as usual.
func TestRetentionBeforeTheEpochKeepsEverything(t *testing.T) {
	const years = 365 * 24 * time.Hour
	for _, tc := range []struct {
		name               string
		events, executions time.Duration
	}{
		{"events 60 years", 60 * years, 0},
		{"executions 60 years", 0, 60 * years},
		{"both the maximum", maxRetention, maxRetention},
		{"executions 500000h", -1, 500000 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conformance(t, func(t *testing.T, b backend) {
				ctx := context.Background()
				s, clock := b.newStore(t)
				worker(t, s, "ns", "i", []string{"l"}, nil)
				id := create(t, s, CreateExecutionArgs{Lane: "l"})
				must(t, s.CancelExecution(ctx, CancelExecutionArgs{ID: id, Now: t0}))
				must(t, s.PutSchedule(ctx, Schedule{Namespace: "ns", Name: "hourly", Every: time.Hour, Template: CreateExecutionArgs{Lane: "l"}}))
				clock.Advance(time.Hour)
				r, err := s.Sweep(ctx, time.Time{}, SweeperArgs{EventRetention: tc.events, ExecutionRetention: tc.executions})
				if err != nil {
					t.Fatalf("Sweep with retentions %v / %v: %v (report %+v)", tc.events, tc.executions, err, r)
				}
				if r.Scheduled != 1 || r.Pruned != 0 || r.PrunedExecutions != 0 {
					t.Fatalf("Sweep with retentions %v / %v: %+v, want 1 run scheduled and nothing pruned", tc.events, tc.executions, r)
				}
			})
		})
	}
}

// February 29th across 2100, which is no leap year: 2096, then 2104, eight
// years apart, past the five years github.com/robfig/cron/v3 looks ahead.
// The next run is found however far; NextRunAt is never the zero time; the
// 2096 period runs; and Sweep ends, with many such schedules too.
func TestCronLeapDayAcrossTheCentury(t *testing.T) {
	const leapDay = "0 0 29 2 *"
	at := func(y int, m time.Month, d, hh, mm int) time.Time { return time.Date(y, m, d, hh, mm, 0, 0, time.UTC) }
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, clock := b.newStore(t)
		moveTo := func(when time.Time) { clock.Advance(when.Sub(clock.Now())) }
		next := func(name string) time.Time {
			t.Helper()
			scs, err := s.ListSchedules(ctx, "ns")
			must(t, err)
			for _, sc := range scs {
				if sc.Name == name {
					return sc.NextRunAt
				}
			}
			t.Fatalf("no schedule %q", name)
			return time.Time{}
		}
		sweep := func() SweepReport {
			t.Helper()
			sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			r, err := s.Sweep(sctx, time.Time{}, SweeperArgs{EventRetention: -1, ExecutionRetention: -1})
			if err != nil {
				t.Errorf("Sweep at %v: %v (report %+v)", clock.Now(), err, r)
			}
			return r
		}
		tpl := CreateExecutionArgs{Lane: "l"}

		// Put in 2095: the next run is 2096's, and it runs; then 2104's.
		moveTo(at(2095, time.June, 1, 0, 0))
		must(t, s.PutSchedule(ctx, Schedule{Namespace: "ns", Name: "from-2095", Cron: leapDay, Template: tpl}))
		if got := next("from-2095"); !got.Equal(at(2096, time.February, 29, 0, 0)) {
			t.Fatalf("put in 2095: NextRunAt %v, want 2096-02-29", got)
		}
		moveTo(at(2096, time.February, 29, 0, 1))
		if r := sweep(); r.Scheduled != 1 {
			t.Errorf("the sweep of 2096-02-29 00:01 created %d runs, want 1 (NextRunAt now %v)", r.Scheduled, next("from-2095"))
		}
		if got := next("from-2095"); !got.Equal(at(2104, time.February, 29, 0, 0)) {
			t.Errorf("after the 2096 run: NextRunAt %v, want 2104-02-29", got)
		}

		// Put in 2097: 2104, never the zero time; not due, so a sweep
		// creates nothing, and ends, with more schedules than a batch.
		moveTo(at(2097, time.March, 1, 0, 0))
		for i := range scheduleBatch + 1 {
			must(t, s.PutSchedule(ctx, Schedule{Namespace: "ns", Name: fmt.Sprintf("from-2097-%03d", i), Cron: leapDay, Template: tpl}))
		}
		if got := next("from-2097-000"); !got.Equal(at(2104, time.February, 29, 0, 0)) {
			t.Errorf("put in 2097: NextRunAt %v, want 2104-02-29", got)
		}
		if r := sweep(); r.Scheduled != 0 {
			t.Errorf("a sweep in 2097 created %d runs of schedules due in 2104", r.Scheduled)
		}
	})
}

// A stored schedule whose next run was recorded as the zero time (as a
// February 29th cron put in 2097 once was) runs its latest period and moves
// on; and schedules that cannot run at all (a stored cron that no longer
// parses) are skipped without holding Sweep: it always ends.
func TestSweepEndsOverSchedulesItCannotRun(t *testing.T) {
	conformanceShared(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		loc := b.fresh(t)
		s, clock := b.open(t, loc)
		clock.Advance(time.Date(2097, time.March, 1, 0, 0, 0, 0, time.UTC).Sub(clock.Now()))
		tpl := CreateExecutionArgs{Lane: "l"}
		must(t, s.PutSchedule(ctx, Schedule{Namespace: "ns", Name: "leap", Cron: "0 0 29 2 *", Template: tpl}))
		for i := range scheduleBatch + 1 {
			must(t, s.PutSchedule(ctx, Schedule{Namespace: "ns", Name: fmt.Sprintf("broken-%03d", i), Every: time.Hour, Template: tpl}))
		}
		zero := time.Time{}.UnixMilli()
		b.exec(t, loc, fmt.Sprintf("UPDATE schedules SET next_run_at_ms = %d WHERE name = 'leap'", zero))
		b.exec(t, loc, "UPDATE schedules SET every_ms = NULL, cron = 'not a cron', next_run_at_ms = 0 WHERE name LIKE 'broken-%'")
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		r, err := s.Sweep(sctx, time.Time{}, SweeperArgs{EventRetention: -1, ExecutionRetention: -1})
		if err != nil {
			t.Fatalf("Sweep over %d schedules it cannot run: %v (report %+v)", scheduleBatch+1, err, r)
		}
		scs, err := s.ListSchedules(ctx, "ns")
		must(t, err)
		for _, sc := range scs {
			if sc.Name == "leap" && (r.Scheduled != 1 || !sc.NextRunAt.Equal(time.Date(2104, time.February, 29, 0, 0, 0, 0, time.UTC))) {
				t.Fatalf("the schedule stored with a zero next run: %d runs created, NextRunAt %v; want the 2096 period run and 2104 next",
					r.Scheduled, sc.NextRunAt)
			}
		}
	})
}

// RunSweeper refuses an Interval below 1 ms (its lease would lapse as it is
// taken, and it would spin without ever running the schedules) with
// ErrInvalidInput naming Interval; 0 is the default.
func TestRunSweeperIntervalBounds(t *testing.T) {
	validationOnly(t, func(t *testing.T, b backend) {
		s, _ := b.newStore(t)
		for _, tc := range []struct {
			interval time.Duration
			ok       bool
		}{
			{0, true}, {time.Millisecond, true}, {10 * time.Second, true},
			{100 * time.Nanosecond, false}, {time.Millisecond - 1, false}, {-time.Second, false},
		} {
			// An ended ctx: a valid call returns nil at once, without running.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			err := s.RunSweeper(ctx, SweeperArgs{Interval: tc.interval, InstanceID: "sweeper"})
			switch {
			case tc.ok && err != nil:
				t.Errorf("Interval %v: %v", tc.interval, err)
			case !tc.ok && (!errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "Interval")):
				t.Errorf("Interval %v: err %v, want ErrInvalidInput naming Interval", tc.interval, err)
			}
		}
	})
}

// At the shortest Interval (1 ms) the sweeper still does the work: its
// leadership lasts long enough (at least 250 ms) for a run to end within
// its term. With a term of 2.5 Intervals (2 ms) a run that took longer
// outlived its term and was cancelled, every time.
func TestRunSweeperAtTheShortestIntervalDoesTheWork(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		var log bytes.Buffer
		var logMu sync.Mutex
		logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &log, mu: &logMu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
		s := realStore(t, b, WithLogger(logger))
		register(t, s, "ns", "lapsed", "w", time.Second, time.Now().Add(-time.Minute))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.RunSweeper(ctx, SweeperArgs{Interval: time.Millisecond, InstanceID: "sweeper"}) }()
		eventually(t, "a whole sweeper run", func() bool {
			logMu.Lock()
			defer logMu.Unlock()
			return strings.Contains(log.String(), `msg="roster: sweeper run"`)
		})
		cancel()
		must(t, <-done)
		if _, err := s.GetWorker(context.Background(), "ns", "lapsed"); !errors.Is(err, ErrNotRegistered) {
			t.Fatalf("the lapsed worker after a run: %v", err)
		}
	})
}
