package service

import (
	"context"
	"testing"
	"time"
)

// Claim: "the instance must be alive in the namespace (else
// ErrNotRegistered)", also when its lanes are flow lanes, with or without
// the per-worker hint of a previous flow claim, and for an unknown one.
func TestReviewFlowDeadWorkerNotRegistered(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		worker(t, s, "ns", "i", []string{"default"}, nil)
		putLimits(t, s, LaneLimits{MaxRunning: 5})
		create(t, s, CreateExecutionArgs{})
		create(t, s, CreateExecutionArgs{})
		claim(t, s, "i", t0) // a flow claim: the hint is set
		// lapsed (TTL 1 h)
		_, err := s.ClaimExecution(ctx, ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Minute, Now: t0.Add(2 * time.Hour)})
		wantErr(t, err, ErrNotRegistered)
		// unknown
		_, err = s.ClaimExecution(ctx, ClaimArgs{Namespace: "ns", InstanceID: "nobody", LeaseTTL: time.Minute, Now: t0})
		wantErr(t, err, ErrNotRegistered)
		// marked dead
		must(t, s.MarkWorkerDead(ctx, MarkWorkerDeadArgs{Namespace: "ns", InstanceID: "i", Reason: "x", Now: t0}))
		_, err = s.ClaimExecution(ctx, ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Minute, Now: t0})
		wantErr(t, err, ErrNotRegistered)
		_, err = s.ClaimExecutions(ctx, ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Minute, Now: t0}, 3)
		wantErr(t, err, ErrNotRegistered)
		// paused lane, dead worker: still not registered, not no work
		putLimits(t, s, LaneLimits{Paused: true})
		_, err = s.ClaimExecution(ctx, ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Minute, Now: t0})
		wantErr(t, err, ErrNotRegistered)
	})
}

// The hint: a worker's lane loses its limits (DeleteLaneLimits) after flow
// claims; its claims go on, uncapped, best first, and then a new cap holds.
func TestReviewFlowHintAfterDelete(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		worker(t, s, "ns", "i", []string{"default"}, nil)
		putLimits(t, s, LaneLimits{MaxRunning: 1})
		for range 6 {
			create(t, s, CreateExecutionArgs{})
		}
		if got := claimAll(t, s, "i", t0, 5); len(got) != 1 {
			t.Fatalf("cap 1 took %d", len(got))
		}
		must(t, s.DeleteLaneLimits(ctx, "ns", "default"))
		if got := claimAll(t, s, "i", t0, 2); len(got) != 2 {
			t.Fatalf("without limits took %d, want 2", len(got))
		}
		putLimits(t, s, LaneLimits{MaxRunning: 3})
		if got := claimAll(t, s, "i", t0, 5); len(got) != 0 {
			t.Fatalf("a cap of 3 with 3 running let %d more run", len(got))
		}
		putLimits(t, s, LaneLimits{MaxRunning: 4})
		if got := claimAll(t, s, "i", t0, 5); len(got) != 1 {
			t.Fatalf("a cap of 4 with 3 running took %d, want 1", len(got))
		}
	})
}

// Bad input writes nothing (: ErrInvalidInput, nothing written).
func TestReviewFlowBadLimitsWriteNothing(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		putLimits(t, s, LaneLimits{MaxRunning: 2})
		for _, bad := range []LaneLimits{
			{Namespace: "ns", Lane: "default", MaxRunning: -1},
			{Namespace: "ns", Lane: "default", Rate: 1},
			{Namespace: "ns", Lane: "default", RatePeriod: time.Second},
			{Namespace: "ns", Lane: "default", Rate: 1, RatePeriod: 999 * time.Millisecond},
			{Namespace: "ns", Lane: "default", Rate: 1, RatePeriod: 24*time.Hour + time.Millisecond},
			{Namespace: "ns", Lane: "", MaxRunning: 1},
			{Namespace: "", Lane: "default", MaxRunning: 1},
			{Namespace: "ns", Lane: "bad lane\x00", MaxRunning: 1},
		} {
			wantErr(t, s.PutLaneLimits(ctx, bad), ErrInvalidInput)
		}
		all, err := s.ListLaneLimits(ctx, "")
		must(t, err)
		if len(all) != 1 || all[0].MaxRunning != 2 {
			t.Fatalf("after bad puts: %+v", all)
		}
		wantErr(t, s.DeleteLaneLimits(ctx, "ns", ""), ErrInvalidInput)
		_, err = s.ListLaneLimits(ctx, "bad ns\x00")
		wantErr(t, err, ErrInvalidInput)
	})
}
