package service

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// fakeTimer hands each wait to the test, which fires it by sending on ticks.
type fakeTimer struct {
	waits chan time.Duration
	ticks chan time.Time
}

func newFakeTimer() *fakeTimer {
	return &fakeTimer{waits: make(chan time.Duration), ticks: make(chan time.Time)}
}

func (f *fakeTimer) After(d time.Duration) <-chan time.Time {
	f.waits <- d
	return f.ticks
}

// step waits until the loop is waiting, then fires its timer.
func (f *fakeTimer) step(t *testing.T) time.Duration {
	t.Helper()
	select {
	case d := <-f.waits:
		f.ticks <- time.Time{}
		return d
	case <-time.After(10 * time.Second):
		t.Fatal("the loop never waited")
		return 0
	}
}

// waiting blocks until the loop waits again, and returns the wait asked for.
func (f *fakeTimer) waiting(t *testing.T) time.Duration {
	t.Helper()
	select {
	case d := <-f.waits:
		// Put the loop back into the same state: it is blocked on ticks.
		go func() { f.waits <- d }()
		return d
	case <-time.After(10 * time.Second):
		t.Fatal("the loop never waited")
		return 0
	}
}

func TestKeepAlive(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		s, clock := b.newStore(t)
		timer := newFakeTimer()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- s.KeepAlive(ctx, KeepAliveArgs{
				Namespace: "ns", WorkerID: "w", InstanceID: "i", Lanes: []string{"l"}, TTL: 30 * time.Second, After: timer.After,
			})
		}()
		d := timer.waiting(t)
		if d < 9*time.Second || d > 11*time.Second {
			t.Fatalf("heartbeat interval %v, want about TTL/3", d)
		}
		w, err := s.GetWorker(ctx, "ns", "i")
		must(t, err)
		if !w.LastHeartbeat.Equal(t0) {
			t.Fatalf("registered at %v", w.LastHeartbeat)
		}

		clock.Advance(10 * time.Second)
		timer.step(t)
		timer.waiting(t)
		w, err = s.GetWorker(ctx, "ns", "i")
		must(t, err)
		if !w.LastHeartbeat.Equal(t0.Add(10 * time.Second)) {
			t.Fatalf("heartbeat at %v", w.LastHeartbeat)
		}

		// The TTL lapses (a long pause): the next heartbeat fails and it registers again.
		clock.Advance(time.Minute)
		timer.step(t)
		timer.waiting(t)
		w, err = s.GetWorker(ctx, "ns", "i")
		must(t, err)
		if !w.RegisteredAt.Equal(t0.Add(70 * time.Second)) {
			t.Fatalf("not registered again: %+v", w)
		}

		cancel()
		<-timer.waits // the loop is parked in its wait: release it through ctx
		select {
		case err := <-done:
			must(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("KeepAlive did not stop")
		}
		_, err = s.GetWorker(context.Background(), "ns", "i")
		wantErr(t, err, ErrNotRegistered)
		events, err := s.ListWorkerEvents(context.Background(), ListWorkerEventsArgs{})
		must(t, err)
		last := events[len(events)-1]
		if last.Kind != EventMarkedDead || last.Reason != ShutdownReason {
			t.Fatalf("last event %+v", last)
		}
		kinds := make([]WorkerEventKind, len(events))
		for i, e := range events {
			kinds[i] = e.Kind
		}
		want := []WorkerEventKind{EventRegistered, EventHeartbeat, EventRegistered, EventMarkedDead}
		if len(kinds) != len(want) {
			t.Fatalf("events %v, want %v", kinds, want)
		}
		for i := range want {
			if kinds[i] != want[i] {
				t.Fatalf("events %v, want %v", kinds, want)
			}
		}
	})
}

func TestKeepAliveRefusesConflict(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		s, _ := b.newStore(t)
		register(t, s, "ns", "i", "someone-else", time.Minute, t0)
		err := s.KeepAlive(context.Background(), KeepAliveArgs{Namespace: "ns", WorkerID: "w", InstanceID: "i", TTL: time.Minute, After: newFakeTimer().After})
		wantErr(t, err, ErrConflict)
		err = s.KeepAlive(context.Background(), KeepAliveArgs{Namespace: "ns", WorkerID: "w", InstanceID: "j", TTL: 0})
		wantErr(t, err, ErrInvalidInput)
	})
}

// KeepAlive refuses an Interval below 1 ms (it would heartbeat in a loop)
// with ErrInvalidInput naming Interval; 0 is TTL/3.
func TestKeepAliveIntervalBounds(t *testing.T) {
	validationOnly(t, func(t *testing.T, b backend) {
		s, _ := b.newStore(t)
		for _, tc := range []struct {
			interval time.Duration
			ok       bool
		}{
			{0, true}, {time.Millisecond, true}, {time.Second, true},
			{time.Millisecond - 1, false}, {100 * time.Nanosecond, false}, {-time.Second, false},
		} {
			// An ended ctx: a valid call registers, then marks the worker
			// dead and returns nil at once.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			err := s.KeepAlive(ctx, KeepAliveArgs{Namespace: "ns", WorkerID: "w", InstanceID: "i", TTL: time.Minute, Interval: tc.interval})
			switch {
			case tc.ok && err != nil && !errors.Is(err, context.Canceled):
				t.Errorf("Interval %v: %v", tc.interval, err)
			case !tc.ok && (!errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "Interval")):
				t.Errorf("Interval %v: err %v, want ErrInvalidInput naming Interval", tc.interval, err)
			}
		}
		page, err := s.ListWorkers(context.Background(), ListWorkersArgs{})
		must(t, err)
		if len(page.Workers) != 0 {
			t.Fatalf("workers left behind: %+v", page.Workers)
		}
	})
}

func TestSweeper(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		s, clock := b.newStore(t)
		ctx, cancel := context.WithCancel(context.Background())
		_, err := s.RegisterWorker(ctx, RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "i", Lanes: []string{"default"}, TTL: 10 * time.Second})
		must(t, err)
		id := create(t, s, CreateExecutionArgs{MaxAttempts: 2})
		claim(t, s, "i", t0)

		timer := newFakeTimer()
		done := make(chan error, 1)
		go func() {
			done <- s.RunSweeper(ctx, SweeperArgs{Interval: time.Second, EventRetention: time.Hour, After: timer.After})
		}()

		clock.Advance(5 * time.Second) // nothing due yet
		timer.step(t)
		timer.waiting(t)
		if _, err := s.GetWorker(ctx, "ns", "i"); err != nil {
			t.Fatalf("alive worker swept: %v", err)
		}

		clock.Advance(5 * time.Second) // the worker's TTL lapses: swept, its lease expires and is reclaimed
		timer.step(t)
		timer.waiting(t)
		_, err = s.GetWorker(ctx, "ns", "i")
		wantErr(t, err, ErrNotRegistered)
		e, err := s.GetExecution(ctx, id)
		must(t, err)
		if e.State != ExecutionWaiting || e.ReclaimCount != 1 {
			t.Fatalf("execution after sweep: %+v", e)
		}

		clock.Advance(2 * time.Hour) // events older than the retention are pruned
		timer.step(t)
		timer.waiting(t)
		events, err := s.ListWorkerEvents(ctx, ListWorkerEventsArgs{})
		must(t, err)
		if len(events) != 0 {
			t.Fatalf("%d events left after retention", len(events))
		}

		cancel()
		<-timer.waits
		select {
		case err := <-done:
			must(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("RunSweeper did not stop")
		}

		// A sweeper on a closed Store stops with ErrClosed.
		must(t, s.Close())
		err = s.RunSweeper(context.Background(), SweeperArgs{After: func(time.Duration) <-chan time.Time {
			ch := make(chan time.Time, 1)
			ch <- time.Time{}
			return ch
		}})
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestJitter(t *testing.T) {
	for range 1000 {
		if d := jitter(time.Second); d < 900*time.Millisecond || d >= 1100*time.Millisecond {
			t.Fatalf("jitter(1s) = %v", d)
		}
	}
	if jitter(1) != 1 {
		t.Fatal("tiny durations are kept")
	}
}
