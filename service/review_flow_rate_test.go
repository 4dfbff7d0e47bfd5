package service

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Flow control "Rates": "At most Rate claims of the lane begin in
// each window [k·RatePeriod, (k+1)·RatePeriod)". Claims do not reach the
// lane lock in the order of their Now: a claim that read its clock just
// before a window boundary can commit just after one that read it just
// after the boundary (two workers, one waiting for the other's lane lock).
// Here the Now values are given explicitly in that order. With Rate 1 per
// minute, window 0 and window 1 must each get exactly one claim.
func TestReviewFlowRateOutOfOrderNow(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		s, _ := b.newStore(t)
		worker(t, s, "ns", "i", []string{"default"}, nil)
		for range 6 {
			create(t, s, CreateExecutionArgs{})
		}
		putLimits(t, s, LaneLimits{Rate: 1, RatePeriod: time.Minute})
		w0 := t0.Truncate(time.Minute).Add(time.Minute) // after every creation
		w1 := w0.Add(time.Minute)
		try := func(now time.Time) bool {
			_, err := s.ClaimExecution(context.Background(), ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Hour, Now: now})
			if errors.Is(err, ErrNoWork) {
				return false
			}
			must(t, err)
			return true
		}
		perWindow := map[time.Time]int{}
		for _, now := range []time.Time{
			w0.Add(10 * time.Second),      // window 0: its one claim
			w1,                            // window 1: its one claim
			w1.Add(-time.Millisecond),     // window 0 again: over the rate
			w1.Add(time.Millisecond),      // window 1 again: over the rate
			w1.Add(-2 * time.Millisecond), // window 0 again
			w1.Add(2 * time.Millisecond),  // window 1 again
		} {
			if try(now) {
				perWindow[now.Truncate(time.Minute)]++
			}
		}
		if perWindow[w0] > 1 || perWindow[w1] > 1 {
			t.Fatalf("with Rate 1 per minute, window 0 got %d claims and window 1 got %d", perWindow[w0], perWindow[w1])
		}
	})
}
