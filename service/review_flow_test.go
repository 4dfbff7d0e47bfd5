package service

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
)

// Claim: "Best means highest Priority, then earliest RunAt, then
// lowest id (between groups of one lane, fair shares decide at equal
// priority ...)". Fair shares are between groups of ONE lane: across two
// lanes of a worker, the earliest RunAt must win. Here lane "b" has groups
// (so the worker claims through the flow path) and its work is older than
// lane "a"'s; every claim must take b's work first.
func TestReviewFlowOrderAcrossLanes(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		s, clock := b.newStore(t)
		worker(t, s, "ns", "i", []string{"a", "b"}, nil)
		var want []uuid.UUID
		for range 3 {
			want = append(want, create(t, s, CreateExecutionArgs{Lane: "b", Group: "g"}))
			clock.Advance(time.Millisecond)
		}
		for range 3 {
			want = append(want, create(t, s, CreateExecutionArgs{Lane: "a"}))
			clock.Advance(time.Millisecond)
		}
		now := clock.Now()
		var got []uuid.UUID
		var lanes []string
		for range 6 {
			l := claim(t, s, "i", now)
			got = append(got, l.ExecutionID)
			lanes = append(lanes, l.Lane)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("claims took lanes %v; want b,b,b,a,a,a (earliest RunAt first across lanes)", lanes)
			}
		}
	})
}

// ClaimExecutions: "returned best first" with best = Priority,
// RunAt, id. Lane "b" has a cap (so the worker claims through the flow path)
// that is far from reached; lane "a" has no limits. A batch of 2 must take the
// two oldest executions (both of lane a), not one of each lane.
func TestReviewFlowBatchBestFirstAcrossLanes(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		s, clock := b.newStore(t)
		worker(t, s, "ns", "i", []string{"a", "b"}, nil)
		putLimits(t, s, LaneLimits{Lane: "b", MaxRunning: 100})
		a1 := create(t, s, CreateExecutionArgs{Lane: "a"})
		clock.Advance(time.Millisecond)
		a2 := create(t, s, CreateExecutionArgs{Lane: "a"})
		clock.Advance(time.Millisecond)
		create(t, s, CreateExecutionArgs{Lane: "b"})
		clock.Advance(time.Millisecond)
		create(t, s, CreateExecutionArgs{Lane: "b"})
		clock.Advance(time.Millisecond)
		got := claimAll(t, s, "i", clock.Now(), 2)
		if len(got) != 2 || got[0].ExecutionID != a1 || got[1].ExecutionID != a2 {
			var lanes []string
			for _, l := range got {
				lanes = append(lanes, l.Lane)
			}
			t.Fatalf("a batch of 2 took lanes %v, want [a a] (the two oldest, best first)", lanes)
		}
	})
}

var _ = context.Background
