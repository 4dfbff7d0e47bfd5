package service

import (
	"context"
	"strings"
	"testing"
	"time"
)

// boundWorker registers worker inst of "ns" (lane "default") with a TTL of
// 30 s at now.
func boundWorker(t *testing.T, s *Store, inst string, now time.Time) {
	t.Helper()
	_, err := s.RegisterWorker(context.Background(), RegisterWorkerArgs{
		Namespace: "ns", WorkerID: "w-" + inst, InstanceID: inst, Lanes: []string{"default"}, TTL: 30 * time.Second, Now: now,
	})
	must(t, err)
}

func claimBound(t *testing.T, s *Store, inst string, now time.Time) Lease {
	t.Helper()
	l, err := s.ClaimExecution(context.Background(), ClaimArgs{Namespace: "ns", InstanceID: inst, Bound: true, Now: now})
	must(t, err)
	return l
}

func expiredLeases(t *testing.T, s *Store, asOf time.Time) []ExpiredLease {
	t.Helper()
	p, err := s.ListExpiredLeases(context.Background(), ListExpiredLeasesArgs{AsOf: asOf})
	must(t, err)
	return p.Leases
}

// A bound lease lives exactly while its holder's registration does: its
// heartbeats keep it, RenewLease writes nothing and reports the holder's
// expiry, and every lease call fails once the holder lapsed, was marked
// dead or swept, even after it registers again; such leases are listed and
// reclaimed.
func TestBoundLeases(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		boundWorker(t, s, "i", t0)
		for range 3 {
			create(t, s, CreateExecutionArgs{MaxAttempts: 3})
		}
		l := claimBound(t, s, "i", t0.Add(time.Second))
		if !l.Bound || !l.ExpiresAt.Equal(t0.Add(30*time.Second)) || !l.Deadline.IsZero() {
			t.Fatalf("claimed %+v: want bound, expiring with its holder at t0+30s", l)
		}
		if x := getExecution(t, s, l.ExecutionID); !x.LeaseBound || !x.LeaseExpiresAt.IsZero() {
			t.Fatalf("execution %+v: want a bound lease without an expiry of its own", x)
		}
		// Heartbeats move its expiry; renewing writes nothing and says so.
		_, err := s.HeartbeatWorker(ctx, HeartbeatWorkerArgs{Namespace: "ns", InstanceID: "i", Now: t0.Add(20 * time.Second)})
		must(t, err)
		got, err := s.RenewLease(ctx, RenewLeaseArgs{Lease: l, Now: t0.Add(40 * time.Second)})
		if err != nil || !got.Equal(t0.Add(50*time.Second)) {
			t.Fatalf("RenewLease of a bound lease = %v, %v; want the holder's expiry t0+50s", got, err)
		}
		must(t, s.CompleteExecution(ctx, CompleteArgs{Lease: l, Now: t0.Add(45 * time.Second)}))

		t.Run("Lapse", func(t *testing.T) {
			l := claimBound(t, s, "i", t0.Add(46*time.Second))
			lapsed := t0.Add(50 * time.Second) // the heartbeat at t0+20s, TTL 30s
			if got := expiredLeases(t, s, lapsed.Add(-time.Millisecond)); len(got) != 0 {
				t.Fatalf("expired before the holder lapsed: %+v", got)
			}
			got := expiredLeases(t, s, lapsed)
			if len(got) != 1 || got[0].ExecutionID != l.ExecutionID || !got[0].ExpiresAt.Equal(lapsed) {
				t.Fatalf("expired = %+v; want the lease at its holder's expiry", got)
			}
			stats, err := s.Stats(ctx, lapsed)
			must(t, err)
			if n := expiredIn(stats, "ns"); n != 1 {
				t.Fatalf("Stats counts %d expired leases, want 1", n)
			}
			_, err = s.RenewLease(ctx, RenewLeaseArgs{Lease: l, Now: lapsed})
			wantErr(t, err, ErrLeaseLost)
			wantErr(t, s.CompleteExecution(ctx, CompleteArgs{Lease: l, Now: lapsed}), ErrLeaseLost)
			// Registering again does not revive it.
			boundWorker(t, s, "i", lapsed.Add(time.Second))
			wantErr(t, s.CompleteExecution(ctx, CompleteArgs{Lease: l, Now: lapsed.Add(2 * time.Second)}), ErrLeaseLost)
			n, err := s.ReclaimExpiredLeases(ctx, lapsed.Add(3*time.Second), 0)
			if err != nil || n != 1 {
				t.Fatalf("reclaimed %d, %v; want 1", n, err)
			}
			if x := getExecution(t, s, l.ExecutionID); x.State != ExecutionWaiting || x.LastError != "lease expired" || x.ReclaimCount != 1 {
				t.Fatalf("after the reclaim: %+v", x)
			}
		})

		t.Run("MarkedDead", func(t *testing.T) {
			now := t0.Add(60 * time.Second)
			boundWorker(t, s, "k", now)
			l := claimBound(t, s, "k", now)
			must(t, s.MarkWorkerDead(ctx, MarkWorkerDeadArgs{Namespace: "ns", InstanceID: "k", Reason: "test", Now: now.Add(time.Second)}))
			got := expiredLeases(t, s, now.Add(time.Second))
			if len(got) != 1 || got[0].ExecutionID != l.ExecutionID || !got[0].ExpiresAt.Equal(now.Add(time.Second)) {
				t.Fatalf("expired = %+v; want the lease at the mark-dead", got)
			}
			boundWorker(t, s, "k", now.Add(2*time.Second))
			_, err := s.RenewLease(ctx, RenewLeaseArgs{Lease: l, Now: now.Add(3 * time.Second)})
			wantErr(t, err, ErrLeaseLost)
		})
	})
}

func expiredIn(st Stats, ns string) int {
	for _, n := range st.Namespaces {
		if n.Namespace == ns {
			return n.ExpiredLeases
		}
	}
	return 0
}

// A Timeout bounds a run: the lease is lost at its Deadline whatever its
// renewals (they stop there) or its holder's heartbeats, listed expired at
// the Deadline and reclaimed with "timed out", its attempt timed_out.
func TestRunTimeouts(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		boundWorker(t, s, "i", t0)
		id := create(t, s, CreateExecutionArgs{Timeout: 5 * time.Second, MaxAttempts: 3})
		if x := getExecution(t, s, id); x.Timeout != 5*time.Second {
			t.Fatalf("Timeout = %v", x.Timeout)
		}
		l, err := s.ClaimExecution(ctx, ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: 3 * time.Second, Now: t0})
		must(t, err)
		if !l.Deadline.Equal(t0.Add(5*time.Second)) || !l.ExpiresAt.Equal(t0.Add(3*time.Second)) {
			t.Fatalf("claimed %+v: want expiry t0+3s, deadline t0+5s", l)
		}
		got, err := s.RenewLease(ctx, RenewLeaseArgs{Lease: l, TTL: time.Minute, Now: t0.Add(2 * time.Second)})
		if err != nil || !got.Equal(l.Deadline) {
			t.Fatalf("renewed to %v, %v; want cut at the deadline", got, err)
		}
		wantErr(t, s.CompleteExecution(ctx, CompleteArgs{Lease: l, Now: l.Deadline}), ErrLeaseLost)
		if ex := expiredLeases(t, s, l.Deadline); len(ex) != 1 || !ex[0].ExpiresAt.Equal(l.Deadline) {
			t.Fatalf("expired = %+v", ex)
		}
		n, err := s.ReclaimExpiredLeases(ctx, l.Deadline, 0)
		if err != nil || n != 1 {
			t.Fatalf("reclaimed %d, %v", n, err)
		}
		x := getExecution(t, s, id)
		if x.State != ExecutionWaiting || x.LastError != "timed out" || x.ReclaimCount != 1 {
			t.Fatalf("after the timeout: %+v", x)
		}
		atts, err := s.ListAttempts(ctx, id)
		must(t, err)
		if len(atts) != 1 || atts[0].Outcome != AttemptTimedOut || atts[0].Error != "timed out" {
			t.Fatalf("attempts %+v", atts)
		}

		t.Run("Bound", func(t *testing.T) {
			now := t0.Add(10 * time.Second)
			boundWorker(t, s, "i", now)
			l := claimBound(t, s, "i", now)
			if !l.Deadline.Equal(now.Add(5*time.Second)) || !l.ExpiresAt.Equal(l.Deadline) {
				t.Fatalf("claimed %+v: want expiry at the deadline", l)
			}
			_, err := s.HeartbeatWorker(ctx, HeartbeatWorkerArgs{Namespace: "ns", InstanceID: "i", Now: now.Add(4 * time.Second)})
			must(t, err)
			_, err = s.RenewLease(ctx, RenewLeaseArgs{Lease: l, Now: l.Deadline})
			wantErr(t, err, ErrLeaseLost)
			if _, err := s.ReclaimExpiredLeases(ctx, l.Deadline, 0); err != nil {
				t.Fatal(err)
			}
			if x := getExecution(t, s, l.ExecutionID); x.LastError != "timed out" {
				t.Fatalf("after a bound lease's timeout: %+v", x)
			}
		})
	})
}

// Bad arguments of bound leases and timeouts are ErrInvalidInput naming the
// field, nothing written.
func TestBoundLeaseAndTimeoutValidation(t *testing.T) {
	validationOnly(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		boundWorker(t, s, "i", t0)
		for _, c := range []struct {
			timeout time.Duration
			says    string
		}{
			{-time.Second, "neither 0 nor"},
			{31 * 24 * time.Hour, "neither 0 nor"},
			{time.Microsecond, "neither 0 nor"},
			{time.Millisecond + time.Microsecond, "whole number"},
		} {
			_, err := s.CreateExecution(ctx, CreateExecutionArgs{Namespace: "ns", Lane: "default", Timeout: c.timeout})
			wantErr(t, err, ErrInvalidInput)
			if !strings.Contains(err.Error(), "Timeout") || !strings.Contains(err.Error(), c.says) {
				t.Errorf("Timeout %v: %v", c.timeout, err)
			}
		}
		if p, _ := s.ListExecutions(ctx, ListExecutionsArgs{}); len(p.Executions) != 0 {
			t.Fatalf("a refused create wrote %d executions", len(p.Executions))
		}
		create(t, s, CreateExecutionArgs{})
		_, err := s.ClaimExecution(ctx, ClaimArgs{Namespace: "ns", InstanceID: "i", Bound: true, LeaseTTL: time.Second, Now: t0})
		wantErr(t, err, ErrInvalidInput)
		if !strings.Contains(err.Error(), "LeaseTTL") {
			t.Errorf("Bound with a LeaseTTL: %v", err)
		}
		l := claim(t, s, "i", t0)
		if l.Bound || !l.Deadline.IsZero() {
			t.Fatalf("a lease of its own: %+v", l)
		}
	})
}
