package service

import (
	"context"
	"errors"
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
