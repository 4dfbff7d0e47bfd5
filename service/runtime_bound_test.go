package service

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// RunWorker with LeaseTTL 0 holds bound leases and renews nothing; a run
// that reaches its Timeout has its handler's context end at the deadline
// (cause errRunTimedOut), and a sweep reclaims it "timed out", to run again.
func TestRunWorkerBoundLeasesAndTimeouts(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := realStore(t, b)
		id := create(t, s, CreateExecutionArgs{Timeout: 300 * time.Millisecond, MaxAttempts: 2})
		type ended struct {
			bound        bool
			at, deadline time.Time
			cause        error
			attempt      int
		}
		ends := make(chan ended, 4)
		stop := runWorker(t, s, WorkerArgs{Handler: func(hctx context.Context, l Lease) ([]byte, error) {
			if l.AttemptIndex > 1 {
				ends <- ended{bound: l.Bound, attempt: l.AttemptIndex}
				return []byte("second"), nil
			}
			<-hctx.Done()
			ends <- ended{bound: l.Bound, at: time.Now(), deadline: l.Deadline, cause: context.Cause(hctx), attempt: l.AttemptIndex}
			return nil, hctx.Err()
		}})
		var first ended
		select {
		case first = <-ends:
		case <-time.After(20 * time.Second):
			t.Fatal("the handler's context never ended")
		}
		if !first.bound || !errors.Is(first.cause, errRunTimedOut) || first.at.Before(first.deadline) || first.at.After(first.deadline.Add(2*time.Second)) {
			t.Fatalf("first run %+v: want a bound lease cut at its deadline", first)
		}
		// Nothing renewed a bound lease: its row still says no expiry of its own but the deadline.
		x := getExecution(t, s, id)
		if !x.LeaseBound || !x.LeaseExpiresAt.Equal(x.LeaseDeadline) {
			t.Fatalf("execution %+v: want a bound lease expiring at its deadline", x)
		}
		eventually(t, "the timed-out run reclaimed", func() bool {
			_, err := s.ReclaimExpiredLeases(ctx, time.Time{}, 0)
			must(t, err)
			return getExecution(t, s, id).ReclaimCount == 1
		})
		select {
		case second := <-ends:
			if second.attempt != 2 {
				t.Fatalf("second run %+v", second)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the timed-out execution never ran again")
		}
		eventually(t, "completed", func() bool { return getExecution(t, s, id).State == ExecutionCompleted })
		if x := getExecution(t, s, id); x.LastError != "timed out" {
			t.Fatalf("LastError %q, want the first run's \"timed out\"", x.LastError)
		}
		atts, err := s.ListAttempts(ctx, id)
		must(t, err)
		if len(atts) != 2 || atts[0].Outcome != AttemptTimedOut || atts[1].Outcome != AttemptCompleted {
			t.Fatalf("attempts %+v", atts)
		}
		must(t, stop())
	})
}

// A bound lease ends with its registration: when another Store marks the
// worker dead, the handler's context ends at once (no renewal carries it).
func TestRunWorkerBoundLeaseEndsWithTheRegistration(t *testing.T) {
	conformanceShared(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		loc := b.fresh(t)
		s, _ := b.open(t, loc, WithClock(time.Now))
		other, _ := b.open(t, loc, WithClock(time.Now))
		create(t, s, CreateExecutionArgs{})
		started, ended := make(chan struct{}, 1), make(chan error, 1)
		// Behind PgBouncer's transaction pooling there is no LISTEN: the
		// worker's poll (TTL/3) is what finds it, so there the TTL is short.
		ttl := time.Hour
		if b.pooled {
			ttl = 3 * time.Second
		}
		stop := runWorker(t, s, WorkerArgs{InstanceID: "bound-1", TTL: ttl, Handler: func(hctx context.Context, l Lease) ([]byte, error) {
			started <- struct{}{}
			<-hctx.Done()
			ended <- context.Cause(hctx)
			return nil, hctx.Err()
		}})
		select {
		case <-started:
		case <-time.After(20 * time.Second):
			t.Fatal("no handler started")
		}
		at := time.Now()
		must(t, other.MarkWorkerDead(ctx, MarkWorkerDeadArgs{Namespace: "ns", InstanceID: "bound-1", Reason: "test"}))
		select {
		case cause := <-ended:
			if !errors.Is(cause, ErrLeaseLost) {
				t.Fatalf("cause %v, want ErrLeaseLost", cause)
			}
			t.Logf("mark-dead through another Store reached the handler in %v", time.Since(at))
		case <-time.After(10 * time.Second):
			t.Fatalf("the handler ran on after its worker was marked dead (TTL %v)", ttl)
		}
		_ = stop()
	})
}

// stalledBeats is the heart's Store with heartbeats whose answers can be
// held back: the heartbeat commits, the worker hears of it only later (a
// heartbeat slow to come back on a loaded machine).
type stalledBeats struct {
	*Store
	mu    sync.Mutex
	stall chan struct{} // non-nil: answers wait until it is closed
}

func (b *stalledBeats) HeartbeatWorker(ctx context.Context, a HeartbeatWorkerArgs) (time.Time, error) {
	until, err := b.Store.HeartbeatWorker(ctx, a)
	b.mu.Lock()
	stall := b.stall
	b.mu.Unlock()
	if stall != nil {
		<-stall
	}
	return until, err
}

// A bound lease's handler is stopped when its registration's expiry, as the
// worker last proved it, passes; but when the registration held after all
// (a heartbeat came back late), the lease is not dropped: a bound lease has
// no expiry of its own, so a dropped one would stay held by a live worker
// that runs nothing for it, its execution running forever. A handler that
// returns the stop's error gives the lease back (no attempt used up; the
// execution runs again); one that returns a result has it written under the
// fence.
func TestRunWorkerBoundLeaseStoppedButHeld(t *testing.T) {
	for _, tc := range []struct {
		name   string
		result bool // the stopped handler returns a result (else the context's error)
	}{{"handler returns the stop's error", false}, {"handler returns a result", true}} {
		t.Run(tc.name, func(t *testing.T) {
			conformance(t, func(t *testing.T, b backend) {
				ctx := context.Background()
				s := realStore(t, b)
				const ttl = 600 * time.Millisecond
				var runs atomic.Int32
				stopped := make(chan error, 1)
				w, err := newRunner(s, WorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "i", Lanes: []string{"default"}, TTL: ttl,
					Handler: func(hctx context.Context, l Lease) ([]byte, error) {
						if runs.Add(1) > 1 {
							return []byte("again"), nil
						}
						<-hctx.Done()
						stopped <- context.Cause(hctx)
						if tc.result {
							return []byte("late"), nil
						}
						return nil, hctx.Err()
					}})
				must(t, err)
				beats := &stalledBeats{Store: s}
				w.heart.store = beats
				must(t, w.registerFirst(ctx))
				rctx, cancel := context.WithCancel(ctx)
				ran := make(chan error, 1)
				go func() { ran <- w.run(rctx) }()
				defer func() { cancel(); <-ran }()

				id := create(t, s, CreateExecutionArgs{})
				eventually(t, "the handler started", func() bool { return runs.Load() == 1 })
				// From now on the worker's heartbeats commit but are not
				// heard of; the test keeps the registration alive in the
				// database meanwhile, as those heartbeats do.
				stall := make(chan struct{})
				beats.mu.Lock()
				beats.stall = stall
				beats.mu.Unlock()
				keepAlive := make(chan struct{})
				kept := make(chan struct{})
				go func() {
					defer close(kept)
					for {
						select {
						case <-keepAlive:
							return
						case <-time.After(ttl / 6):
							_, _ = s.HeartbeatWorker(ctx, HeartbeatWorkerArgs{Namespace: "ns", InstanceID: "i"})
						}
					}
				}()
				var cause error
				select {
				case cause = <-stopped:
				case <-time.After(20 * time.Second):
					t.Fatal("the handler was not stopped at the registration's expiry as last proved")
				}
				if !errors.Is(cause, errLeaseExpired) {
					t.Fatalf("the handler stopped with cause %v, want errLeaseExpired", cause)
				}
				if tc.result {
					eventually(t, "the stopped handler's result written", func() bool { return getExecution(t, s, id).State == ExecutionCompleted })
				} else {
					eventually(t, "the lease given back", func() bool { return getExecution(t, s, id).State != ExecutionRunning || runs.Load() > 1 })
				}
				close(keepAlive)
				<-kept
				close(stall) // the late answers arrive: the worker proves its registration again
				eventually(t, "the execution completed", func() bool { return getExecution(t, s, id).State == ExecutionCompleted })
				x := getExecution(t, s, id)
				want := "again"
				if tc.result {
					want = "late"
				}
				if string(x.Result) != want || x.ReclaimCount != 0 {
					t.Fatalf("execution %+v: want result %q, never reclaimed", x, want)
				}
				atts, err := s.ListAttempts(ctx, id)
				must(t, err)
				for _, a := range atts {
					if a.Outcome == AttemptFailed || a.Outcome == AttemptLost {
						t.Fatalf("attempts %+v: the stop used up an attempt", atts)
					}
				}
			})
		})
	}
}

// A claim whose answer was lost (the connection broke) may have committed:
// its leases are looked up once the database answers and released if held.
// A lease of its own expiry is left to expire once that passed; a bound
// lease has none (its live holder would hold it forever), so it is looked
// up however late.
func TestClaimerReleasesOrphanedClaims(t *testing.T) {
	for _, tc := range []struct {
		name     string
		leaseTTL time.Duration // 0: bound
		later    time.Duration // when the database answers again
		released bool
	}{
		{"bound, a minute later", 0, time.Minute, true},
		{"leased 30s, 10s later", 30 * time.Second, 10 * time.Second, true},
		{"leased 30s, a minute later: left to expire", 30 * time.Second, time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conformance(t, func(t *testing.T, b backend) {
				ctx := context.Background()
				s, clock := b.newStore(t)
				_, err := s.RegisterWorker(ctx, RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "i", Lanes: []string{"default"}, TTL: time.Hour})
				must(t, err)
				id := create(t, s, CreateExecutionArgs{})
				args := ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: tc.leaseTTL, Bound: tc.leaseTTL == 0}
				c := newClaimer(s, newSlots(1), args, clock.Now, partsLog())
				p, err := s.newClaim(args, 1)
				must(t, err)
				leases, _, err := s.executionClaim(ctx, p) // committed; its answer is lost:
				must(t, err)
				if len(leases) != 1 {
					t.Fatalf("claimed %d leases", len(leases))
				}
				c.failedClaim(p, fmt.Errorf("%w: connection reset", ErrUnavailable))
				clock.Advance(tc.later)
				c.releaseOrphans()
				x := getExecution(t, s, id)
				if released := x.State == ExecutionWaiting; released != tc.released {
					t.Fatalf("execution %s after the look-up; want released %v", x.State, tc.released)
				}
			})
		})
	}
}
