package service

// The runtime's promises at their edges (RunWorker's doc comment): each test here failed
// against a first version of the reworked runtime, found by an adversarial
// review.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/rosterdb/roster/internal/engine"
	"github.com/rosterdb/roster/internal/pgtest"
)

// startWorker runs RunWorker with ctx under the test's control and waits
// until it is ready (a's own Ready, if any, is called first); the channel
// gets RunWorker's error. Defaults: namespace "ns", worker "w", instance
// "i", lane "default", TTL 10 s.
func startWorker(t *testing.T, s *Store, ctx context.Context, a WorkerArgs) <-chan error {
	t.Helper()
	if a.Namespace == "" {
		a.Namespace = "ns"
	}
	if a.WorkerID == "" {
		a.WorkerID = "w"
	}
	if a.InstanceID == "" {
		a.InstanceID = "i"
	}
	if a.Lanes == nil {
		a.Lanes = []string{"default"}
	}
	if a.TTL == 0 {
		a.TTL = 10 * time.Second
	}
	ready := make(chan struct{})
	userReady := a.Ready
	a.Ready = func() {
		if userReady != nil {
			userReady()
		}
		close(ready)
	}
	done := make(chan error, 1)
	go func() { done <- s.RunWorker(ctx, a) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("RunWorker returned before it was ready: %v", err)
	}
	return done
}

// Shutdown: "When ctx ends RunWorker stops claiming at once: no handler
// starts after that". A claim in flight when ctx ends (here: waiting
// for a write lock another connection holds) releases what it claimed.
func TestRunWorkerNoHandlerStartsAfterCtxEnds(t *testing.T) {
	conformanceShared(t, func(t *testing.T, b backend) {
		loc := b.fresh(t)
		s, _ := b.open(t, loc, WithClock(time.Now), WithWorkerPoll(time.Hour))
		runAt := time.Now().Add(600 * time.Millisecond)
		id := create(t, s, CreateExecutionArgs{RunAt: runAt})
		var cancelledAt atomic.Pointer[time.Time]
		startedAfter := make(chan time.Duration, 1)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := startWorker(t, s, ctx, WorkerArgs{Handler: func(context.Context, Lease) ([]byte, error) {
			if c := cancelledAt.Load(); c != nil {
				startedAfter <- time.Since(*c)
			}
			return nil, nil
		}})
		time.Sleep(200 * time.Millisecond) // idle until runAt
		unblock := b.blockWrites(t, loc)
		time.Sleep(time.Until(runAt) + 300*time.Millisecond) // the claim waits for the lock
		now := time.Now()
		cancelledAt.Store(&now)
		cancel()
		time.Sleep(300 * time.Millisecond)
		unblock()
		select {
		case err := <-done:
			must(t, err)
		case <-time.After(30 * time.Second):
			t.Fatal("RunWorker did not return")
		}
		select {
		case d := <-startedAfter:
			t.Fatalf("a handler started %v after ctx ended (execution %s: %+v)", d, id, getExecution(t, s, id).State)
		default:
		}
	})
}

// RunWorker: "Its context is cancelled at the lease's expiry by the Store's
// clock (the last renewal that succeeded) even when the database cannot be
// reached", whatever the Store's timeouts: a renewal that cannot get through
// (SQLite waits out its 5 s busy timeout; PostgreSQL a lock) must not hold the
// handler past its lease.
func TestRunWorkerCancelsAtExpiryWithDefaultTimeouts(t *testing.T) {
	conformanceShared(t, func(t *testing.T, b backend) {
		loc := b.fresh(t)
		s, _ := b.open(t, loc, WithClock(time.Now)) // default options
		create(t, s, CreateExecutionArgs{MaxAttempts: 2})
		started, done := make(chan Lease, 1), make(chan time.Time, 1)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		stopped := startWorker(t, s, ctx, WorkerArgs{LeaseTTL: 600 * time.Millisecond, Handler: func(hctx context.Context, l Lease) ([]byte, error) {
			started <- l
			<-hctx.Done()
			done <- time.Now()
			return nil, nil
		}})
		l := <-started
		unblock := b.blockWrites(t, loc)
		limit := l.ExpiresAt.Add(keeperTick + 500*time.Millisecond)
		select {
		case at := <-done:
			if at.After(limit) {
				t.Errorf("handler cancelled %v after its lease expired (limit %v)", at.Sub(l.ExpiresAt), limit.Sub(l.ExpiresAt))
			}
		case <-time.After(time.Until(limit) + 2*time.Second):
			t.Errorf("handler still running %v after its lease expired at %v", time.Since(l.ExpiresAt), l.ExpiresAt)
		}
		unblock()
		cancel()
		select {
		case <-stopped:
		case <-time.After(30 * time.Second):
			t.Fatal("RunWorker did not return")
		}
	})
}

// Idle cost: a worker whose slots are all busy does not spin on the RunAt it
// knew of once that RunAt has passed.
func TestRunWorkerNoSpinOnStaleRunAt(t *testing.T) {
	s := realStore(t, backends()[1], WithWorkerPoll(time.Hour))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	finish := make(chan struct{})
	w, err := newRunner(s, WorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "i", Lanes: []string{"default"}, TTL: time.Hour,
		Handler: func(hctx context.Context, l Lease) ([]byte, error) {
			select {
			case <-finish:
			case <-hctx.Done():
			}
			return nil, nil
		}})
	must(t, err)
	must(t, w.registerFirst(ctx))
	ran := make(chan error, 1)
	go func() { ran <- w.run(ctx) }()
	runAt := time.Now().Add(300 * time.Millisecond)
	create(t, s, CreateExecutionArgs{RunAt: runAt}) // scheduled: the worker learns its RunAt
	time.Sleep(100 * time.Millisecond)
	create(t, s, CreateExecutionArgs{}) // claimable now: fills the only slot
	eventually(t, "the handler running", func() bool { return w.running() == 1 })
	time.Sleep(time.Until(runAt) + 100*time.Millisecond)
	gen := func() uint64 { w.mu.Lock(); defer w.mu.Unlock(); return w.wantGen }
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	g0 := gen()
	time.Sleep(time.Second)
	g1 := gen()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) * time.Nanosecond
	close(finish)
	cancel()
	if err := <-ran; err != nil && !errors.Is(err, context.Canceled) {
		t.Log(err)
	}
	if n := g1 - g0; n > 10 {
		t.Fatalf("the claimer woke %d times in 1 s while its only slot was busy (process CPU %v in that second)", n, cpu)
	}
}

// A lease is only ever run by its holder, and only while it holds: the
// handler's context ends at the lease's expiry even when the database
// cannot be reached; and "a half-open connection is noticed within seconds,
// never hangs a heartbeat, a renewal or Close". Behind a network partition
// (connections half-open) the handler's context still ends at its lease's
// expiry.
func TestRunWorkerPartitionCancelsAtExpiry(t *testing.T) {
	loc := pgtest.Fresh(t) // skips without a server
	ploc, proxy := pgtest.NewProxy(t, loc)
	defer proxy.Heal()
	s, _ := backends()[2].open(t, ploc, WithClock(time.Now))
	create(t, s, CreateExecutionArgs{})
	started, done := make(chan Lease, 1), make(chan time.Time, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	startWorker(t, s, ctx, WorkerArgs{LeaseTTL: 900 * time.Millisecond, Handler: func(hctx context.Context, l Lease) ([]byte, error) {
		started <- l
		<-hctx.Done()
		done <- time.Now()
		return nil, nil
	}})
	l := <-started
	proxy.Freeze()
	limit := l.ExpiresAt.Add(keeperTick + 500*time.Millisecond)
	select {
	case at := <-done:
		if at.After(limit) {
			t.Fatalf("handler cancelled %v after its lease expired", at.Sub(l.ExpiresAt))
		}
	case <-time.After(time.Until(limit) + 5*time.Second):
		t.Fatalf("behind a partition the handler still runs %v after its lease expired", time.Since(l.ExpiresAt))
	}
}

// Shutdown: RunWorker "returns nil once every handler has returned,
// or 5 s after cancelling the stragglers", even when roster's tables are
// locked by another session (an operator's LOCK, a long DDL) and its last
// writes cannot get through.
func TestRunWorkerLockedShutdownReturns(t *testing.T) {
	conformanceShared(t, func(t *testing.T, b backend) {
		loc := b.fresh(t)
		s, _ := b.open(t, loc, WithClock(time.Now))
		create(t, s, CreateExecutionArgs{})
		started := make(chan struct{})
		returned := make(chan time.Time, 1)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		stopped := startWorker(t, s, ctx, WorkerArgs{DrainTimeout: time.Second, Handler: func(hctx context.Context, l Lease) ([]byte, error) {
			close(started)
			<-hctx.Done()
			returned <- time.Now()
			return nil, hctx.Err()
		}})
		<-started
		unblock := b.blockWrites(t, loc)
		defer unblock()
		began := time.Now()
		cancel()
		select {
		case err := <-stopped:
			must(t, err)
		case <-time.After(time.Second + shutdownGrace + 3*time.Second): // the drain, the grace, some slack
			at := <-returned
			t.Fatalf("RunWorker has not returned %v after ctx ended; its only handler returned %v after ctx ended", time.Since(began), at.Sub(began))
		}
	})
}

// Work starts in milliseconds across processes, on SQLite by a cheap change
// check. With synchronous=FULL a commit shows
// only after the WAL's fsync, which a large commit makes slow: the check must
// still hear it (here the worker's poll is an hour).
func TestRunWorkerWakesAcrossStoresAfterSlowSync(t *testing.T) {
	loc := backends()[1].fresh(t)
	worker, _ := backends()[1].open(t, loc, WithClock(time.Now), WithWorkerPoll(time.Hour))
	producer, _ := backends()[1].open(t, loc, WithClock(time.Now))
	got := make(chan time.Time, 8)
	stop := runWorker(t, worker, WorkerArgs{TTL: time.Hour, Handler: func(_ context.Context, l Lease) ([]byte, error) {
		got <- time.Now()
		return nil, nil
	}})
	defer stop()
	time.Sleep(200 * time.Millisecond) // idle
	// A commit whose fsync takes a while: the job and 4 MiB of other work
	// (in a lane no worker serves), in one transaction.
	batch := []CreateExecutionArgs{{Namespace: "ns", Lane: "default"}}
	for range 64 {
		batch = append(batch, CreateExecutionArgs{Namespace: "ns", Lane: "elsewhere", Payload: make([]byte, 64<<10)})
	}
	for i := range 3 {
		time.Sleep(100 * time.Millisecond)
		began := time.Now()
		_, err := producer.CreateExecutions(context.Background(), batch)
		must(t, err)
		committed := time.Since(began)
		select {
		case at := <-got:
			if d := at.Sub(began) - committed; d > 200*time.Millisecond {
				t.Errorf("job %d: started %v after its create returned (create took %v)", i, d, committed)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("job %d: the worker never heard of work another Store committed (create took %v)", i, committed)
		}
	}
}

// unknownOutcomeEngine reports ErrUnavailable for the next Write once armed,
// after the write committed: the connection broke before the outcome was
// known (ErrUnavailable), which no real fault here can time.
type unknownOutcomeEngine struct {
	engine.Engine
	armed atomic.Bool
}

func (e *unknownOutcomeEngine) Write(ctx context.Context, fn func(ctx context.Context, q engine.Queries) error) error {
	err := e.Engine.Write(ctx, fn)
	if err == nil && e.armed.CompareAndSwap(true, false) {
		return fmt.Errorf("%w: connection reset after COMMIT was sent", engine.ErrUnavailable)
	}
	return err
}

// A lapse is not a lost lease: RunWorker stops claiming, registers again,
// and resumes, and recovers by itself, even when the
// re-registration after a lapse reports ErrUnavailable although it committed
// (the next heartbeat succeeds: the worker must claim again).
func TestRunWorkerLapseThenUnknownRegisterResumes(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, clock := b.newStore(t)
		ue := &unknownOutcomeEngine{Engine: s.eng}
		s.eng = ue
		got := make(chan struct{}, 1)
		stop := runWorker(t, s, WorkerArgs{TTL: 900 * time.Millisecond, LeaseTTL: time.Hour, Handler: func(context.Context, Lease) ([]byte, error) {
			got <- struct{}{}
			return nil, nil
		}})
		defer stop()
		ue.armed.Store(true)
		clock.Advance(2 * time.Second) // the registration lapses
		eventually(t, "the re-registration", func() bool { return !ue.armed.Load() })
		time.Sleep(time.Second) // the heart heartbeats again, successfully
		if _, err := s.GetWorker(ctx, "ns", "i"); err != nil {
			t.Fatalf("worker: %v", err)
		}
		create(t, s, CreateExecutionArgs{})
		select {
		case <-got:
		case <-time.After(5 * time.Second):
			w, err := s.GetWorker(ctx, "ns", "i")
			t.Fatalf("registered and heartbeating (expires %v, err %v), but the worker never claims again", w.ExpiresAt(), err)
		}
	})
}

// Work starts in milliseconds across processes, on PostgreSQL in every
// process by LISTEN/NOTIFY. A NOTIFY that arrives while the
// claimer's claim runs, for work that claim could not see, must still wake it
// (here the poll is an hour).
func TestRunWorkerNoLostNotify(t *testing.T) {
	b := backends()[2]
	loc := b.fresh(t) // skips without a server
	worker, _ := b.open(t, loc, WithClock(time.Now), WithWorkerPoll(time.Hour))
	producer, _ := b.open(t, loc, WithClock(time.Now))
	handled := make(chan uuid.UUID, 64)
	stop := runWorker(t, worker, WorkerArgs{Concurrency: 4, Handler: func(_ context.Context, l Lease) ([]byte, error) {
		handled <- l.ExecutionID
		return nil, nil
	}})
	defer stop()
	time.Sleep(200 * time.Millisecond)
	seen := map[uuid.UUID]bool{}
	wait := func(id uuid.UUID, d time.Duration) bool {
		deadline := time.After(d)
		for !seen[id] {
			select {
			case got := <-handled:
				seen[got] = true
			case <-deadline:
				return false
			}
		}
		return true
	}
	lost := 0
	for i := range 40 {
		x := create(t, producer, CreateExecutionArgs{})
		busyWait(time.Duration(i%30) * 100 * time.Microsecond)
		y := create(t, producer, CreateExecutionArgs{})
		if !wait(x, 3*time.Second) {
			t.Fatalf("trial %d: x never handled", i)
		}
		if !wait(y, 2*time.Second) {
			lost++
			t.Errorf("trial %d (gap %v): the second execution was never started: its NOTIFY was lost", i, time.Duration(i%30)*100*time.Microsecond)
			kick := create(t, producer, CreateExecutionArgs{}) // wake it for the next trial
			if !wait(kick, 3*time.Second) || !wait(y, time.Second) {
				t.Fatalf("trial %d: not woken by the next NOTIFY either", i)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	if lost > 0 {
		t.Errorf("%d of 40 wake-ups lost", lost)
	}
}

func busyWait(d time.Duration) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
	}
}

// A half-open connection is noticed within seconds and never hangs a
// heartbeat, a renewal or Close: behind a proxy that stops forwarding
// mid-run, a heartbeat, a renewal and a completion each fail with
// ErrUnavailable within the statement timeout (here 1 s) and a grace, a
// running RunWorker returns once its drain and its last writes fail, and
// Close returns within a bound.
func TestSilentServerFailsFast(t *testing.T) {
	t.Parallel()
	b := backends()[2]
	loc, proxy := pgtest.NewProxy(t, b.fresh(t)+"&statement_timeout=1000")
	s, err := Open(context.Background(), loc)
	must(t, err)
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = s.Close()
		}
	})
	ctx := context.Background()
	_, err = s.RegisterWorker(ctx, RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "i", Lanes: []string{"default"}, TTL: time.Hour})
	must(t, err)
	create(t, s, CreateExecutionArgs{})
	l, err := s.ClaimExecution(ctx, ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Hour})
	must(t, err)
	running := make(chan struct{})
	create(t, s, CreateExecutionArgs{})
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopped := startWorker(t, s, runCtx, WorkerArgs{InstanceID: "j", DrainTimeout: 100 * time.Millisecond, Handler: func(hctx context.Context, _ Lease) ([]byte, error) {
		close(running)
		<-hctx.Done()
		return nil, nil
	}})
	<-running

	proxy.Freeze()
	const bound = 5 * time.Second // 1 s, the 2 s grace, slack
	var wg sync.WaitGroup
	for what, call := range map[string]func() error{
		"HeartbeatWorker": func() error {
			_, err := s.HeartbeatWorker(ctx, HeartbeatWorkerArgs{Namespace: "ns", InstanceID: "i"})
			return err
		},
		"RenewLease": func() error {
			_, err := s.RenewLease(ctx, RenewLeaseArgs{Lease: l, TTL: time.Hour})
			return err
		},
		"CompleteExecution": func() error { return s.CompleteExecution(ctx, CompleteArgs{Lease: l}) },
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			began := time.Now()
			err := call()
			if took := time.Since(began); took > bound || !errors.Is(err, ErrUnavailable) {
				t.Errorf("%s behind a silent server: %v after %v, want ErrUnavailable within %v", what, err, took, bound)
			}
		}()
	}
	wg.Wait()
	began := time.Now()
	cancel()
	select {
	case <-stopped:
	case <-time.After(100*time.Millisecond + shutdownGrace + bound):
		t.Errorf("RunWorker has not returned %v after its ctx ended", time.Since(began))
	}
	began = time.Now()
	closed = true
	must(t, s.Close())
	if took := time.Since(began); took > 3*time.Second {
		t.Errorf("Close took %v behind a silent server", took)
	}
}

// A claim cut short by its bound on payload bytes (64 MiB; lowered here to
// 1,000) is not a sign that nothing is left: RunWorker claims the rest at
// once, without waiting for a wake-up or its poll (here an hour). Five
// payloads of 300 bytes, five slots: all five run at the same time.
func TestRunWorkerClaimsPastThePayloadBound(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		s, _ := b.newStore(t, WithClock(time.Now), WithWorkerPoll(time.Hour), withClaimBytes(1000))
		payload := make([]byte, 300)
		for range 5 {
			create(t, s, CreateExecutionArgs{Payload: payload})
		}
		var running atomic.Int32
		all, release := make(chan struct{}), make(chan struct{})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := startWorker(t, s, ctx, WorkerArgs{Concurrency: 5, Handler: func(hctx context.Context, _ Lease) ([]byte, error) {
			if running.Add(1) == 5 {
				close(all)
			}
			select {
			case <-release:
			case <-hctx.Done():
			}
			return nil, nil
		}})
		select {
		case <-all:
		case <-time.After(20 * time.Second):
			t.Errorf("%d of 5 handlers started: the claim stopped at 64 MiB and the worker waited", running.Load())
		}
		close(release)
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunWorker: %v", err)
		}
	})
}
