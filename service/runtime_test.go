package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
)

// withClaimBytes lowers the bound on a claim's payloads (0: the default).
func withClaimBytes(n int64) Option { return func(c *config) { c.claimBytes = n } }

// withStatementBytes lowers the bound on a create statement's payloads, so
// that the conformance suite splits batches without moving 64 MiB through
// every backend.
func withStatementBytes(n int) Option { return func(c *config) { c.statementBytes = n } }

// realStore is a Store on the wall clock: RunWorker's timers are real.
func realStore(t *testing.T, b backend, opts ...Option) *Store {
	t.Helper()
	s, _ := b.newStore(t, append([]Option{WithClock(time.Now)}, opts...)...)
	return s
}

// eventually waits (bounded) until cond holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// runWorker is startWorker with a context of its own and a TTL of 3 s by
// default: it returns a stop function that ends RunWorker and returns its
// error (called again at the test's end).
func runWorker(t *testing.T, s *Store, a WorkerArgs) (stop func() error) {
	t.Helper()
	if a.TTL == 0 {
		a.TTL = 3 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := startWorker(t, s, ctx, a)
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func countState(t *testing.T, s *Store, st ExecutionState) int {
	t.Helper()
	page, err := s.ListExecutions(context.Background(), ListExecutionsArgs{State: st})
	must(t, err)
	return len(page.Executions)
}

func TestRunWorkerRunsTheQueue(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := realStore(t, b)
		var ids []uuid.UUID
		for i := range 20 {
			ids = append(ids, create(t, s, CreateExecutionArgs{Payload: []byte(fmt.Sprint("job-", i))}))
		}
		var ready atomic.Bool
		var early atomic.Bool
		var inFlight, peak atomic.Int64
		stop := runWorker(t, s, WorkerArgs{
			Concurrency: 4,
			Ready:       func() { ready.Store(true) },
			Handler: func(ctx context.Context, l Lease) ([]byte, error) {
				if !ready.Load() {
					early.Store(true)
				}
				n := inFlight.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				time.Sleep(time.Millisecond)
				inFlight.Add(-1)
				return bytes.ToUpper(l.Payload), nil
			},
		})
		eventually(t, "20 completed executions", func() bool { return countState(t, s, ExecutionCompleted) == 20 })
		must(t, stop())
		if early.Load() {
			t.Fatal("a handler ran before Ready")
		}
		if p := peak.Load(); p > 4 {
			t.Fatalf("%d handlers ran at once, concurrency is 4", p)
		}
		for i, id := range ids {
			if e := getExecution(t, s, id); string(e.Result) != fmt.Sprint("JOB-", i) {
				t.Fatalf("execution %d: result %q", i, e.Result)
			}
		}
		// Shutdown marked the worker dead with reason shutdown.
		_, err := s.GetWorker(ctx, "ns", "i")
		wantErr(t, err, ErrNotRegistered)
		events, err := s.ListWorkerEvents(ctx, ListWorkerEventsArgs{Namespace: "ns", InstanceID: "i"})
		must(t, err)
		if last := events[len(events)-1]; last.Kind != EventMarkedDead || last.Reason != ShutdownReason {
			t.Fatalf("last event %+v", last)
		}
	})
}

func TestRunWorkerFailuresAndPanics(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		s := realStore(t, b)
		bad := create(t, s, CreateExecutionArgs{Payload: []byte("error"), Priority: 2})
		boom := create(t, s, CreateExecutionArgs{Payload: []byte("panic"), Priority: 1})
		good := create(t, s, CreateExecutionArgs{Payload: []byte("ok")})
		stop := runWorker(t, s, WorkerArgs{Handler: func(_ context.Context, l Lease) ([]byte, error) {
			switch string(l.Payload) {
			case "error":
				return nil, errors.New("the handler says no")
			case "panic":
				panic("the handler blew up")
			}
			return []byte("done"), nil
		}})
		eventually(t, "the good execution", func() bool { return getExecution(t, s, good).State == ExecutionCompleted })
		must(t, stop())
		if e := getExecution(t, s, bad); e.State != ExecutionFailed || e.LastError != "the handler says no" {
			t.Fatalf("failed execution: %+v", e)
		}
		if e := getExecution(t, s, boom); e.State != ExecutionFailed || !strings.Contains(e.LastError, "the handler blew up") {
			t.Fatalf("panicked execution: %+v", e)
		}
	})
}

// CreateExecution on the same Store wakes an idle worker: with an hour's
// poll interval, nothing else could start the handler.
func TestRunWorkerWakesOnCreate(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		s := realStore(t, b, WithWorkerPoll(time.Hour))
		got := make(chan uuid.UUID, 2)
		stop := runWorker(t, s, WorkerArgs{Handler: func(_ context.Context, l Lease) ([]byte, error) {
			got <- l.ExecutionID
			return nil, nil
		}})
		for range 2 {
			id := create(t, s, CreateExecutionArgs{})
			select {
			case g := <-got:
				if g != id {
					t.Fatalf("handled %s, created %s", g, id)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("the worker did not wake for new work")
			}
		}
		must(t, stop())
	})
}

// The old shutdown lost work: the keep-alive marked the worker dead while the
// work loop was still completing. RunWorker drains first.
func TestRunWorkerShutdownDrainsBeforeMarkingDead(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		s := realStore(t, b)
		id := create(t, s, CreateExecutionArgs{})
		started, release := make(chan struct{}), make(chan struct{})
		stop := runWorker(t, s, WorkerArgs{Handler: func(ctx context.Context, l Lease) ([]byte, error) {
			close(started)
			<-release
			return []byte("finished"), ctx.Err()
		}})
		<-started
		stopped := make(chan error, 1)
		go func() { stopped <- stop() }()
		time.Sleep(20 * time.Millisecond) // shutdown has begun; the handler is still running
		close(release)
		must(t, <-stopped)
		if e := getExecution(t, s, id); e.State != ExecutionCompleted || string(e.Result) != "finished" {
			t.Fatalf("the execution in flight at shutdown: %+v", e)
		}
	})
}

// After the drain timeout, handlers are cancelled and their outcomes written
// while their leases hold.
func TestRunWorkerDrainTimeout(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		s := realStore(t, b)
		id := create(t, s, CreateExecutionArgs{})
		started := make(chan struct{})
		stop := runWorker(t, s, WorkerArgs{DrainTimeout: 50 * time.Millisecond, Handler: func(ctx context.Context, l Lease) ([]byte, error) {
			close(started)
			<-ctx.Done()
			return nil, ctx.Err()
		}})
		<-started
		must(t, stop())
		if e := getExecution(t, s, id); e.State != ExecutionFailed || !strings.Contains(e.LastError, "context canceled") {
			t.Fatalf("the execution cut off by the drain timeout: %+v", e)
		}
	})
}

// A lease lost while its handler runs (here: cancelled) cancels the
// handler's context, and its result is dropped, never written.
func TestRunWorkerLostLease(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := realStore(t, b)
		id := create(t, s, CreateExecutionArgs{})
		started, cancelled := make(chan struct{}), make(chan struct{})
		stop := runWorker(t, s, WorkerArgs{LeaseTTL: 150 * time.Millisecond, Handler: func(hctx context.Context, l Lease) ([]byte, error) {
			close(started)
			<-hctx.Done()
			close(cancelled)
			return []byte("too late"), nil
		}})
		<-started
		must(t, s.CancelExecution(ctx, CancelExecutionArgs{ID: id, Reason: "operator"}))
		select {
		case <-cancelled:
		case <-time.After(20 * time.Second):
			t.Fatal("the handler's context was not cancelled when its lease was lost")
		}
		must(t, stop())
		if e := getExecution(t, s, id); e.State != ExecutionCancelled || e.Result != nil {
			t.Fatalf("a lost lease's result was written: %+v", e)
		}
	})
}

// A worker marked dead from outside cancels its handlers, registers again
// and goes on claiming.
func TestRunWorkerRecoversFromADeath(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := realStore(t, b)
		first := create(t, s, CreateExecutionArgs{})
		var mu sync.Mutex
		var handled []uuid.UUID
		started := make(chan struct{}, 1)
		stop := runWorker(t, s, WorkerArgs{TTL: 300 * time.Millisecond, Handler: func(hctx context.Context, l Lease) ([]byte, error) {
			mu.Lock()
			handled = append(handled, l.ExecutionID)
			mu.Unlock()
			if l.ExecutionID == first {
				started <- struct{}{}
				<-hctx.Done()
			}
			return nil, nil
		}})
		<-started
		must(t, s.MarkWorkerDead(ctx, MarkWorkerDeadArgs{Namespace: "ns", InstanceID: "i", Reason: "operator"}))
		eventually(t, "the worker to register again", func() bool {
			_, err := s.GetWorker(ctx, "ns", "i")
			return err == nil
		})
		second := create(t, s, CreateExecutionArgs{})
		eventually(t, "the second execution", func() bool { return getExecution(t, s, second).State == ExecutionCompleted })
		must(t, stop())
		mu.Lock()
		defer mu.Unlock()
		if !slices.Contains(handled, second) {
			t.Fatalf("handled %v", handled)
		}
		if e := getExecution(t, s, first); e.State != ExecutionRunning {
			t.Fatalf("the revoked lease's execution: %+v (its outcome must not be written)", e)
		}
	})
}

func TestRunWorkerRefusesAtOnce(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := realStore(t, b)
		h := func(context.Context, Lease) ([]byte, error) { return nil, nil }
		for name, a := range map[string]WorkerArgs{
			"nil handler":    {Namespace: "ns", WorkerID: "w", InstanceID: "i", TTL: time.Second},
			"zero TTL":       {Namespace: "ns", WorkerID: "w", InstanceID: "i", Handler: h},
			"bad lease TTL":  {Namespace: "ns", WorkerID: "w", InstanceID: "i", TTL: time.Second, LeaseTTL: -time.Second, Handler: h},
			"bad lane":       {Namespace: "ns", WorkerID: "w", InstanceID: "i", TTL: time.Second, Lanes: []string{""}, Handler: h},
			"negative conc.": {Namespace: "ns", WorkerID: "w", InstanceID: "i", TTL: time.Second, Concurrency: -1, Handler: h},
			"negative drain": {Namespace: "ns", WorkerID: "w", InstanceID: "i", TTL: time.Second, DrainTimeout: -1, Handler: h},
		} {
			if err := s.RunWorker(ctx, a); !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("%s: %v", name, err)
			}
		}
		register(t, s, "ns", "i", "someone-else", time.Hour, time.Now())
		err := s.RunWorker(ctx, WorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "i", TTL: time.Second, Handler: h})
		wantErr(t, err, ErrConflict)
	})
}

// outcomeRecorder keeps the "outcome written" records of a logger enabled
// for minLevel.
type outcomeRecorder struct {
	minLevel slog.Level
	mu       sync.Mutex
	written  map[uuid.UUID]slog.Record
	debug    int // Debug records handled at all
}

func (h *outcomeRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= h.minLevel }

func (h *outcomeRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r.Level == slog.LevelDebug {
		h.debug++
	}
	if r.Message != "roster: worker: outcome written" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "execution" {
			if id, ok := a.Value.Any().(uuid.UUID); ok {
				h.written[id] = r.Clone()
			}
		}
		return true
	})
	return nil
}

func (h *outcomeRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *outcomeRecorder) WithGroup(string) slog.Handler      { return h }

// A worker whose logger is enabled for Debug logs each outcome it wrote,
// naming the execution, epoch and lease, and whether it failed the attempt:
// what a caller needs to know which outcomes were acknowledged. With Debug
// off nothing of it reaches the handler.
func TestRunWorkerLogsWrittenOutcomes(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo} {
			rec := &outcomeRecorder{minLevel: level, written: map[uuid.UUID]slog.Record{}}
			s := realStore(t, b, WithLogger(slog.New(rec)))
			ok := create(t, s, CreateExecutionArgs{Payload: []byte("ok")})
			bad := create(t, s, CreateExecutionArgs{Payload: []byte("bad")})
			var mu sync.Mutex
			leases := map[uuid.UUID]Lease{}
			stop := runWorker(t, s, WorkerArgs{Concurrency: 2, Handler: func(_ context.Context, l Lease) ([]byte, error) {
				mu.Lock()
				leases[l.ExecutionID] = l
				mu.Unlock()
				if string(l.Payload) == "bad" {
					return nil, errors.New("no")
				}
				return nil, nil
			}})
			eventually(t, "both outcomes", func() bool {
				return getExecution(t, s, ok).State == ExecutionCompleted && getExecution(t, s, bad).State == ExecutionFailed
			})
			must(t, stop())
			rec.mu.Lock()
			if level == slog.LevelInfo {
				if len(rec.written) != 0 || rec.debug != 0 {
					t.Fatalf("Debug off: %d outcome records, %d Debug records handled", len(rec.written), rec.debug)
				}
				rec.mu.Unlock()
				continue
			}
			for id, failed := range map[uuid.UUID]bool{ok: false, bad: true} {
				r, found := rec.written[id]
				if !found {
					t.Fatalf("no outcome record for %s", id)
				}
				got := map[string]any{}
				r.Attrs(func(a slog.Attr) bool { got[a.Key] = a.Value.Any(); return true })
				l := leases[id]
				if got["epoch"] != l.Epoch || got["lease"] != l.LeaseID || got["failed"] != failed {
					t.Fatalf("outcome record of %s: %v, lease %+v, failed %v", id, got, l, failed)
				}
			}
			rec.mu.Unlock()
		}
	})
}

// WithWorkerPoll sets the poll; zero or less keeps the default.
func TestWithWorkerPoll(t *testing.T) {
	for _, tc := range []struct {
		give, want time.Duration
	}{
		{time.Hour, time.Hour},
		{5 * time.Millisecond, 5 * time.Millisecond},
		{0, defaultWorkerPoll},
		{-time.Second, defaultWorkerPoll},
	} {
		c := defaultConfig()
		WithWorkerPoll(tc.give)(&c)
		if c.workerPoll != tc.want {
			t.Errorf("WithWorkerPoll(%v): poll %v, want %v", tc.give, c.workerPoll, tc.want)
		}
	}
}
