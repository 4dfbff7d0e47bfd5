package service

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

// countExecutions counts the executions of a namespace.
func countExecutions(t testing.TB, s *Store, ns string) int {
	t.Helper()
	p, err := s.ListExecutions(context.Background(), ListExecutionsArgs{Namespace: ns, Limit: 10000})
	must(t, err)
	return len(p.Executions)
}

// A UniqueKey is held while its execution is live, and within UniqueFor
// whatever its state: a duplicate create returns the holder's id, nil,
// and writes nothing.
func TestUniqueExecutions(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		worker(t, s, "ns", "i", []string{"default"}, nil)

		first := create(t, s, CreateExecutionArgs{UniqueKey: "order:42", Payload: []byte("a")})
		if e := getExecution(t, s, first); e.UniqueKey != "order:42" {
			t.Fatalf("UniqueKey not stored: %+v", e)
		}
		again := create(t, s, CreateExecutionArgs{UniqueKey: "order:42", Payload: []byte("b")})
		if again != first || countExecutions(t, s, "ns") != 1 {
			t.Fatalf("a duplicate while waiting created %s (first %s), %d executions", again, first, countExecutions(t, s, "ns"))
		}
		if e := getExecution(t, s, first); string(e.Payload) != "a" {
			t.Fatal("a duplicate changed the holder")
		}
		// Another namespace is another key.
		if other := create(t, s, CreateExecutionArgs{Namespace: "other", UniqueKey: "order:42"}); other == first {
			t.Fatal("the key of another namespace was shared")
		}
		// Running still holds it; once completed (UniqueFor 0) it is free.
		l := claim(t, s, "i", t0)
		if create(t, s, CreateExecutionArgs{UniqueKey: "order:42"}) != first {
			t.Fatal("a running execution did not hold its key")
		}
		must(t, s.CompleteExecution(ctx, CompleteArgs{Lease: l, Now: t0}))
		second := create(t, s, CreateExecutionArgs{UniqueKey: "order:42"})
		if second == first {
			t.Fatal("a completed execution without UniqueFor still held its key")
		}

		// UniqueFor holds the key past the end, until created + UniqueFor.
		held := create(t, s, CreateExecutionArgs{UniqueKey: "daily", UniqueFor: time.Hour})
		must(t, s.CancelExecution(ctx, CancelExecutionArgs{ID: held, Now: t0}))
		if id := create(t, s, CreateExecutionArgs{UniqueKey: "daily", Now: t0.Add(59 * time.Minute)}); id != held {
			t.Fatal("a cancelled execution within its UniqueFor did not hold its key")
		}
		// Pruning the execution does not release the key before UniqueFor ends.
		n, err := s.PruneExecutions(ctx, t0.Add(time.Minute))
		must(t, err)
		if n == 0 {
			t.Fatal("nothing pruned")
		}
		if id := create(t, s, CreateExecutionArgs{UniqueKey: "daily", Now: t0.Add(59 * time.Minute)}); id != held {
			t.Fatal("pruning released a key within its UniqueFor")
		}
		if id := create(t, s, CreateExecutionArgs{UniqueKey: "daily", Now: t0.Add(time.Hour)}); id == held {
			t.Fatal("the key was still held once UniqueFor ended")
		}

		// A batch: duplicates of stored executions and of earlier items get
		// the first id; items without a key are created as usual.
		before := countExecutions(t, s, "ns")
		ids, err := s.CreateExecutions(ctx, []CreateExecutionArgs{
			{Namespace: "ns", Lane: "default", UniqueKey: "batch"},
			{Namespace: "ns", Lane: "default"},
			{Namespace: "ns", Lane: "default", UniqueKey: "batch"},
			{Namespace: "ns", Lane: "default", UniqueKey: "order:42"},
		})
		must(t, err)
		if ids[2] != ids[0] || ids[3] != second || ids[1] == ids[0] {
			t.Fatalf("batch ids %v (order:42 is held by %s)", ids, second)
		}
		if got := countExecutions(t, s, "ns"); got != before+2 {
			t.Fatalf("the batch wrote %d executions, want 2", got-before)
		}
	})
}

// Bad unique arguments are ErrInvalidInput naming the field; nothing is
// written.
func TestUniqueExecutionsBadInput(t *testing.T) {
	validationOnly(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		for _, tc := range []struct {
			args  CreateExecutionArgs
			field string
		}{
			{CreateExecutionArgs{UniqueKey: "a\x00b"}, "UniqueKey"},
			{CreateExecutionArgs{UniqueKey: strings.Repeat("k", 257)}, "UniqueKey"},
			{CreateExecutionArgs{UniqueKey: "k", UniqueFor: -time.Second}, "UniqueFor"},
			{CreateExecutionArgs{UniqueKey: "k", UniqueFor: 30*24*time.Hour + time.Millisecond}, "UniqueFor"},
			{CreateExecutionArgs{UniqueFor: time.Hour}, "UniqueFor"},
		} {
			tc.args.Namespace, tc.args.Lane = "ns", "default"
			_, err := s.CreateExecution(ctx, tc.args)
			wantErr(t, err, ErrInvalidInput)
			if !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("%+v: %v does not name %s", tc.args, err, tc.field)
			}
			_, err = s.CreateExecutions(ctx, []CreateExecutionArgs{{Namespace: "ns", Lane: "default"}, tc.args})
			wantErr(t, err, ErrInvalidInput)
			if !strings.Contains(err.Error(), "[1]."+tc.field) {
				t.Fatalf("batch: %v does not name [1].%s", err, tc.field)
			}
		}
		if n := countExecutions(t, s, "ns"); n != 0 {
			t.Fatalf("bad input wrote %d executions", n)
		}
		// 30 days exactly is allowed.
		create(t, s, CreateExecutionArgs{UniqueKey: "k", UniqueFor: 30 * 24 * time.Hour})
	})
}

// Many Stores creating the same key at once yield one execution: the
// schema holds the key, not a read before the write.
func TestUniqueConcurrentCreates(t *testing.T) {
	conformanceShared(t, func(t *testing.T, b backend) {
		loc := b.fresh(t)
		const stores, rounds = 8, 20
		ss := make([]*Store, stores)
		for i := range ss {
			ss[i], _ = b.open(t, loc)
		}
		for round := range rounds {
			key := fmt.Sprintf("race-%d", round)
			ids := make([]uuid.UUID, stores)
			errs := make([]error, stores)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i, s := range ss {
				wg.Go(func() {
					<-start
					ids[i], errs[i] = s.CreateExecution(context.Background(), CreateExecutionArgs{
						Namespace: "ns", Lane: "default", UniqueKey: key, UniqueFor: time.Minute,
					})
				})
			}
			close(start)
			wg.Wait()
			for i := range ss {
				must(t, errs[i])
				if ids[i] != ids[0] {
					t.Fatalf("round %d: store %d got %s, store 0 %s", round, i, ids[i], ids[0])
				}
			}
		}
		if n := countExecutions(t, ss[0], "ns"); n != rounds {
			t.Fatalf("%d executions for %d keys", n, rounds)
		}
	})
}

// RetryExecution puts a failed or cancelled execution back, with one more
// attempt when none is left; other states are refused.
func TestRetryExecution(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		worker(t, s, "ns", "i", []string{"default"}, nil)

		failed := create(t, s, CreateExecutionArgs{UniqueKey: "job"})
		l := claim(t, s, "i", t0)
		must(t, s.FailExecution(ctx, FailArgs{Lease: l, Reason: "downstream down", Now: t0}))
		if e := getExecution(t, s, failed); e.State != ExecutionFailed {
			t.Fatalf("not failed: %+v", e)
		}
		// While another live execution holds its key, the retry conflicts.
		other := create(t, s, CreateExecutionArgs{UniqueKey: "job"})
		wantErr(t, s.RetryExecution(ctx, RetryExecutionArgs{ID: failed, Now: t0}), ErrConflict)
		must(t, s.CancelExecution(ctx, CancelExecutionArgs{ID: other, Now: t0}))

		must(t, s.RetryExecution(ctx, RetryExecutionArgs{ID: failed, Now: t0.Add(time.Second)}))
		e := getExecution(t, s, failed)
		if e.State != ExecutionWaiting || e.MaxAttempts != 2 || e.Attempts != 1 || e.LastError != "downstream down" ||
			!e.RunAt.Equal(t0.Add(time.Second)) || !e.FinishedAt.IsZero() {
			t.Fatalf("after retry: %+v", e)
		}
		// Waiting: a no-op.
		must(t, s.RetryExecution(ctx, RetryExecutionArgs{ID: failed, Now: t0.Add(time.Second)}))
		if e := getExecution(t, s, failed); e.MaxAttempts != 2 {
			t.Fatalf("a retry of a waiting execution changed it: %+v", e)
		}
		l = claim(t, s, "i", t0.Add(time.Second))
		if l.ExecutionID != failed || l.AttemptIndex != 2 {
			t.Fatalf("the retried execution was not claimed as attempt 2: %+v", l)
		}
		// Running: refused.
		wantErr(t, s.RetryExecution(ctx, RetryExecutionArgs{ID: failed, Now: t0.Add(time.Second)}), ErrConflict)
		must(t, s.CompleteExecution(ctx, CompleteArgs{Lease: l, Now: t0.Add(time.Second)}))
		// Completed: refused.
		wantErr(t, s.RetryExecution(ctx, RetryExecutionArgs{ID: failed, Now: t0.Add(time.Second)}), ErrConflict)
		// Unknown: not found.
		wantErr(t, s.RetryExecution(ctx, RetryExecutionArgs{ID: uuid.New(), Now: t0}), ErrNotFound)

		// Cancelled with attempts left: back at RunAt, MaxAttempts unchanged.
		cancelled := create(t, s, CreateExecutionArgs{MaxAttempts: 3})
		must(t, s.CancelExecution(ctx, CancelExecutionArgs{ID: cancelled, Reason: "oops", Now: t0}))
		must(t, s.RetryExecution(ctx, RetryExecutionArgs{ID: cancelled, RunAt: t0.Add(time.Hour), Now: t0}))
		if e := getExecution(t, s, cancelled); e.State != ExecutionWaiting || e.MaxAttempts != 3 || !e.RunAt.Equal(t0.Add(time.Hour)) {
			t.Fatalf("after retry of a cancelled execution: %+v", e)
		}
		_, err := s.ClaimExecution(ctx, ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Minute, Now: t0.Add(time.Minute)})
		wantErr(t, err, ErrNoWork)
		_, err = s.RegisterWorker(ctx, RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "i", Lanes: []string{"default"}, TTL: time.Hour, Now: t0.Add(time.Hour)})
		must(t, err)
		if l := claim(t, s, "i", t0.Add(time.Hour)); l.ExecutionID != cancelled {
			t.Fatal("the retried execution was not claimable at its RunAt")
		}
		wantErr(t, s.RetryExecution(ctx, RetryExecutionArgs{ID: cancelled, RunAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}), ErrInvalidInput)
	})
}

// WithExecutionDefaults applies to executions created with zero values.
func TestWithExecutionDefaults(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		s, _ := b.newStore(t, WithExecutionDefaults(3, 2*time.Second))
		e := getExecution(t, s, create(t, s, CreateExecutionArgs{}))
		if e.MaxAttempts != 3 || e.RetryBackoff != 2*time.Second {
			t.Fatalf("defaults not applied: %+v", e)
		}
		e = getExecution(t, s, create(t, s, CreateExecutionArgs{MaxAttempts: 1, RetryBackoff: time.Millisecond}))
		if e.MaxAttempts != 1 || e.RetryBackoff != time.Millisecond {
			t.Fatalf("explicit values overridden: %+v", e)
		}
	})
	for _, opt := range []Option{WithExecutionDefaults(0, 0), WithExecutionDefaults(1, -time.Second),
		WithExecutionDefaults(1, time.Microsecond), WithExecutionDefaults(1, 25*time.Hour)} {
		_, err := Open(context.Background(), ":memory:", opt)
		wantErr(t, err, ErrInvalidInput)
		if !strings.Contains(err.Error(), "WithExecutionDefaults") {
			t.Fatalf("%v does not name the option", err)
		}
	}
}

// sweeper runs RunSweeper with a tick channel the test drives.
type sweeper struct {
	ticks  chan time.Time
	stop   context.CancelFunc
	done   chan error
	waited chan struct{} // receives each time the sweeper waits for a tick
}

func startSweeper(t *testing.T, s *Store, instance string, interval time.Duration) *sweeper {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	sw := &sweeper{ticks: make(chan time.Time), stop: stop, done: make(chan error, 1), waited: make(chan struct{}, 100)}
	go func() {
		sw.done <- s.RunSweeper(ctx, SweeperArgs{Interval: interval, InstanceID: instance, After: func(time.Duration) <-chan time.Time {
			sw.waited <- struct{}{}
			return sw.ticks
		}})
	}()
	<-sw.waited
	t.Cleanup(func() { sw.halt(t) })
	return sw
}

// tick lets the sweeper run once and waits until it waits again.
func (sw *sweeper) tick(t *testing.T) {
	t.Helper()
	select {
	case sw.ticks <- time.Time{}:
	case <-time.After(10 * time.Second):
		t.Fatal("the sweeper did not take its tick")
	}
	select {
	case <-sw.waited:
	case <-time.After(10 * time.Second):
		t.Fatal("the sweeper's run did not end")
	}
}

func (sw *sweeper) halt(t *testing.T) {
	sw.stop()
	select {
	case err := <-sw.done:
		if err != nil {
			t.Errorf("RunSweeper: %v", err)
		}
		sw.done <- nil
	case <-time.After(10 * time.Second):
		t.Error("RunSweeper did not return")
	}
}

func leader(t *testing.T, s *Store) (string, time.Time) {
	t.Helper()
	id, until, err := s.Leader(context.Background())
	must(t, err)
	return id, until
}

// One leader among many sweepers: the lease is taken by compare-and-set,
// renewed at each Interval, taken over after 3 Intervals without renewal,
// and given up on shutdown. Only the leader sweeps.
func TestSweeperLeadership(t *testing.T) {
	conformanceShared(t, func(t *testing.T, b backend) {
		loc := b.fresh(t)
		s1, clock := b.open(t, loc)
		s2, _ := b.open(t, loc, WithClock(clock.Now))
		if id, _ := leader(t, s1); id != "" {
			t.Fatalf("a leader before any sweeper ran: %q", id)
		}
		const interval = 10 * time.Second
		const term = 25 * time.Second // 2.5 Intervals
		a := startSweeper(t, s1, "a", interval)
		bb := startSweeper(t, s2, "b", interval)
		a.tick(t)
		if id, until := leader(t, s2); id != "a" || !until.Equal(t0.Add(term)) {
			t.Fatalf("leader %q until %v, want a until %v", id, until, t0.Add(term))
		}
		// b does not lead, nor sweep, while a's lease holds.
		_, err := s1.RegisterWorker(context.Background(), RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "gone", Lanes: []string{"default"}, TTL: time.Second, Now: t0})
		must(t, err)
		clock.Advance(2 * interval)
		bb.tick(t)
		if id, _ := leader(t, s1); id != "a" {
			t.Fatalf("leader %q, want a", id)
		}
		if _, err := s1.GetWorker(context.Background(), "ns", "gone"); err != nil {
			t.Fatalf("a follower swept: %v", err)
		}
		// a renews; its lapsed worker is swept by the leader's run.
		a.tick(t)
		if _, err := s1.GetWorker(context.Background(), "ns", "gone"); !errors.Is(err, ErrNotRegistered) {
			t.Fatalf("the leader did not sweep: %v", err)
		}
		if _, until := leader(t, s1); !until.Equal(clock.Now().Add(term)) {
			t.Fatalf("the lease was not renewed: until %v", until)
		}
		// a dies (no more renewals): b takes over once the lease lapsed,
		// within 3 Intervals of the death, not a millisecond before.
		clock.Advance(term - time.Millisecond)
		bb.tick(t)
		if id, _ := leader(t, s1); id != "a" {
			t.Fatalf("b took over before a's lease ended: leader %q", id)
		}
		clock.Advance(time.Millisecond)
		bb.tick(t)
		if id, _ := leader(t, s1); id != "b" {
			t.Fatalf("b did not take over a lapsed lease: leader %q", id)
		}
		// a comes back: it finds the lease lost and does not lead.
		a.tick(t)
		if id, _ := leader(t, s1); id != "b" {
			t.Fatalf("a retook a lease b holds: leader %q", id)
		}
		// b shuts down: it resigns, and a takes over at its next tick.
		bb.halt(t)
		if id, _ := leader(t, s1); id != "" {
			t.Fatalf("leader %q after the leader resigned", id)
		}
		a.tick(t)
		if id, _ := leader(t, s1); id != "a" {
			t.Fatalf("leader %q, want a", id)
		}
	})
}

// Schedules create one execution per period, keyed by the period, from
// their template; only the latest missed period runs after an outage;
// paused ones create nothing.
func TestSchedules(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, clock := b.newStore(t)
		sweep := func() int {
			t.Helper()
			r, err := s.Sweep(ctx, time.Time{}, SweeperArgs{})
			must(t, err)
			return r.Scheduled
		}
		must(t, s.PutSchedule(ctx, Schedule{Namespace: "ns", Name: "hourly", Every: time.Hour,
			Template: CreateExecutionArgs{Lane: "reports", Payload: []byte("r"), Priority: 2, MaxAttempts: 3}}))
		clock.Advance(time.Minute) // 12:01: the 13:00 period is next
		must(t, s.PutSchedule(ctx, Schedule{Namespace: "ns", Name: "quarter", Cron: "*/15 * * * *",
			Template: CreateExecutionArgs{Lane: "cleanup"}}))
		scs, err := s.ListSchedules(ctx, "ns")
		must(t, err)
		if len(scs) != 2 || scs[0].Name != "hourly" || !scs[0].NextRunAt.Equal(t0) || scs[1].Name != "quarter" ||
			!scs[1].NextRunAt.Equal(t0.Add(15*time.Minute)) || scs[0].Template.Lane != "reports" || scs[0].Template.MaxAttempts != 3 {
			t.Fatalf("schedules: %+v", scs)
		}
		// 12:01: the 12:00 period of hourly is due.
		if n := sweep(); n != 1 {
			t.Fatalf("created %d runs, want 1", n)
		}
		if n := sweep(); n != 0 {
			t.Fatalf("a second sweep created %d runs", n)
		}
		p, err := s.ListExecutions(ctx, ListExecutionsArgs{Namespace: "ns"})
		must(t, err)
		if len(p.Executions) != 1 {
			t.Fatalf("%d executions", len(p.Executions))
		}
		run := p.Executions[0]
		if run.Lane != "reports" || string(run.Payload) != "r" || run.Priority != 2 || run.MaxAttempts != 3 ||
			run.UniqueKey != fmt.Sprintf("schedule:hourly:%d", t0.UnixMilli()) ||
			!run.RunAt.Equal(t0) { // the period's start, a minute before the sweep: the lag shows
			t.Fatalf("the run: %+v", run)
		}
		if run.State != ExecutionWaiting {
			t.Fatalf("the run: %+v", run)
		}
		// An outage from 12:01 to 17:40: one run of hourly (17:00), one of
		// quarter (17:30), not a burst.
		clock.Advance(5*time.Hour + 39*time.Minute)
		if n := sweep(); n != 2 {
			t.Fatalf("after the outage %d runs, want 2", n)
		}
		scs, err = s.ListSchedules(ctx, "")
		must(t, err)
		if !scs[0].NextRunAt.Equal(t0.Add(6*time.Hour)) || !scs[1].NextRunAt.Equal(t0.Add(5*time.Hour+45*time.Minute)) {
			t.Fatalf("next runs after the outage: %v, %v", scs[0].NextRunAt, scs[1].NextRunAt)
		}
		last := getExecution(t, s, scs[1].LastExecutionID)
		if last.UniqueKey != fmt.Sprintf("schedule:quarter:%d", t0.Add(5*time.Hour+30*time.Minute).UnixMilli()) ||
			!last.RunAt.Equal(t0.Add(5*time.Hour+30*time.Minute)) ||
			scs[1].LastState != ExecutionWaiting {
			t.Fatalf("the last run of quarter: %+v, state %q", last, scs[1].LastState)
		}
		// Paused: nothing; resumed: the next period only.
		paused := scs[0]
		paused.Paused = true
		must(t, s.PutSchedule(ctx, paused))
		scs, err = s.ListSchedules(ctx, "ns")
		must(t, err)
		if !scs[0].Paused || !scs[0].NextRunAt.IsZero() {
			t.Fatalf("a paused schedule shows a next run: %+v", scs[0])
		}
		clock.Advance(time.Hour)
		if n := sweep(); n != 1 { // quarter only
			t.Fatalf("%d runs with hourly paused, want 1", n)
		}
		must(t, s.DeleteSchedule(ctx, "ns", "quarter"))
		wantErr(t, s.DeleteSchedule(ctx, "ns", "quarter"), ErrNotFound)
		clock.Advance(time.Hour)
		if n := sweep(); n != 0 {
			t.Fatalf("%d runs with hourly paused and quarter deleted", n)
		}
		if n := countExecutions(t, s, "ns"); n != 4 {
			t.Fatalf("%d executions, want 4", n)
		}
	})
}

// Two maintainers racing over the same due schedule create its period once.
func TestSchedulesRacingMaintainers(t *testing.T) {
	conformanceShared(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		loc := b.fresh(t)
		s1, clock := b.open(t, loc)
		must(t, s1.PutSchedule(ctx, Schedule{Namespace: "ns", Name: "s", Every: time.Minute, Template: CreateExecutionArgs{Lane: "l"}}))
		stores := []*Store{s1}
		for range 3 {
			s, _ := b.open(t, loc, WithClock(clock.Now))
			stores = append(stores, s)
		}
		total := 0
		for round := range 5 {
			var wg sync.WaitGroup
			counts := make([]int, len(stores))
			for i, s := range stores {
				wg.Go(func() {
					r, err := s.Sweep(ctx, time.Time{}, SweeperArgs{})
					if err != nil {
						t.Errorf("round %d: %v", round, err)
					}
					counts[i] = r.Scheduled
				})
			}
			wg.Wait()
			for _, c := range counts {
				total += c
			}
			clock.Advance(time.Minute)
		}
		if n := countExecutions(t, s1, "ns"); n != 5 || total != 5 {
			t.Fatalf("%d executions, %d reported, for 5 periods", n, total)
		}
	})
}

// Bad schedules are ErrInvalidInput naming the field; nothing is written.
func TestSchedulesBadInput(t *testing.T) {
	validationOnly(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		ok := CreateExecutionArgs{Lane: "l"}
		for _, tc := range []struct {
			sc    Schedule
			field string
		}{
			{Schedule{Name: "x", Every: time.Hour, Template: ok}, "Namespace"},
			{Schedule{Namespace: "ns", Name: "", Every: time.Hour, Template: ok}, "Name"},
			{Schedule{Namespace: "ns", Name: "x", Template: ok}, "Every"},
			{Schedule{Namespace: "ns", Name: "x", Every: time.Hour, Cron: "* * * * *", Template: ok}, "Every"},
			{Schedule{Namespace: "ns", Name: "x", Every: 999 * time.Millisecond, Template: ok}, "Every"},
			{Schedule{Namespace: "ns", Name: "x", Every: 367 * 24 * time.Hour, Template: ok}, "Every"},
			{Schedule{Namespace: "ns", Name: "x", Cron: "every day", Template: ok}, "Cron"},
			{Schedule{Namespace: "ns", Name: "x", Cron: "61 * * * *", Template: ok}, "Cron"},
			{Schedule{Namespace: "ns", Name: "x", Every: time.Hour}, "Template.Lane"},
			{Schedule{Namespace: "ns", Name: "x", Every: time.Hour, Template: CreateExecutionArgs{Lane: "l", MaxAttempts: -1}}, "Template.MaxAttempts"},
			{Schedule{Namespace: "ns", Name: "x", Every: time.Hour, Template: CreateExecutionArgs{Lane: "l", Namespace: "other"}}, "Template.Namespace"},
			{Schedule{Namespace: "ns", Name: "x", Every: time.Hour, Template: CreateExecutionArgs{Lane: "l", UniqueKey: "k"}}, "Template.UniqueKey"},
			{Schedule{Namespace: "ns", Name: "x", Every: time.Hour, Template: CreateExecutionArgs{Lane: "l", Metadata: map[string]string{"k": "v"}}}, "Template.Metadata"},
			{Schedule{Namespace: "ns", Name: "x", Every: time.Hour, Template: CreateExecutionArgs{Lane: "l", Group: "g"}}, "Template.Group"},
		} {
			err := s.PutSchedule(ctx, tc.sc)
			wantErr(t, err, ErrInvalidInput)
			if !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("%+v: %v does not name %s", tc.sc, err, tc.field)
			}
		}
		scs, err := s.ListSchedules(ctx, "")
		must(t, err)
		if len(scs) != 0 {
			t.Fatalf("bad input wrote %+v", scs)
		}
	})
}

// A keyed batch larger than one statement's 64 MiB of payloads keeps every
// rule across its statements: ids in input order, a duplicate gets the
// first id, and each UniqueFor hold goes to its own key.
func TestUniqueBatchAcrossStatements(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		// Statements of at most 1,000 bytes of payloads, payloads of 300: the
		// split of 64 MiB statements without moving 96 MiB through every
		// backend (TestBatchesOverAGigabyte moves the real sizes).
		s, _ := b.newStore(t, withStatementBytes(1000))
		payload := make([]byte, 300)
		item := func(key string, uniqueFor time.Duration) CreateExecutionArgs {
			return CreateExecutionArgs{Namespace: "ns", Lane: "l", Payload: payload, UniqueKey: key, UniqueFor: uniqueFor}
		}
		items := []CreateExecutionArgs{item("k0", 0), item("k1", 0), item("k2", 0), item("k0", 0), item("k3", 0),
			item("k4", time.Hour), item("", 0)} // six distinct: 1,800 bytes, two statements
		ids, err := s.CreateExecutions(ctx, items)
		must(t, err)
		if ids[3] != ids[0] {
			t.Fatalf("the duplicate of k0 got %s, the first %s", ids[3], ids[0])
		}
		for i, id := range ids {
			e, err := s.GetExecution(ctx, id)
			must(t, err)
			if e.UniqueKey != items[i].UniqueKey {
				t.Fatalf("item %d (key %q) got %s, whose key is %q", i, items[i].UniqueKey, id, e.UniqueKey)
			}
		}
		// k4's hold outlives its execution; k3 had none.
		for _, i := range []int{4, 5} {
			must(t, s.CancelExecution(ctx, CancelExecutionArgs{ID: ids[i]}))
		}
		again, err := s.CreateExecutions(ctx, []CreateExecutionArgs{item("k3", 0), item("k4", 0)})
		must(t, err)
		if again[0] == ids[4] || again[1] != ids[5] {
			t.Fatalf("after both ended: k3 got %s (was %s, no hold), k4 got %s (was %s, held an hour)", again[0], ids[4], again[1], ids[5])
		}
	})
}
