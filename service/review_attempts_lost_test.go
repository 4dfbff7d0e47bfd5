package service

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestReviewAttemptLostStaysLost: an attempt whose holder was marked dead
// lists lost from then, ended then, before its reclaim as after it: what
// comes after the mark-dead (a cancel, a reclaim) does not rewrite it, and
// it never ends before it started.
func TestReviewAttemptLostStaysLost(t *testing.T) {
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	for _, tc := range []struct {
		name            string
		claimAt, deadAt time.Time
		then            func(t *testing.T, s *Store, id uuid.UUID)
		want            func(claimAt, deadAt time.Time) Attempt
	}{
		{
			name: "a cancel after the mark-dead", claimAt: at(10), deadAt: at(20),
			then: func(t *testing.T, s *Store, id uuid.UUID) {
				must(t, s.CancelExecution(context.Background(), CancelExecutionArgs{ID: id, Reason: "no longer wanted", Now: at(30)}))
			},
			want: func(claimAt, deadAt time.Time) Attempt {
				return Attempt{Index: 1, Epoch: 1, InstanceID: "a", StartedAt: claimAt, EndedAt: deadAt, Outcome: AttemptLost, Error: "lease expired"}
			},
		},
		{
			name: "a mark-dead whose Now is before the claim", claimAt: at(20), deadAt: at(10),
			then: func(t *testing.T, s *Store, id uuid.UUID) {},
			want: func(claimAt, deadAt time.Time) Attempt {
				// It cannot have ended before it began: at its start at the earliest.
				return Attempt{Index: 1, Epoch: 1, InstanceID: "a", StartedAt: claimAt, EndedAt: claimAt, Outcome: AttemptLost, Error: "lease expired"}
			},
		},
		{
			name: "a mark-dead whose Now is before the claim, then the reclaim", claimAt: at(20), deadAt: at(10),
			then: func(t *testing.T, s *Store, id uuid.UUID) {
				if _, err := s.ReclaimExpiredLeases(context.Background(), at(40), 0); err != nil {
					t.Fatal(err)
				}
			},
			want: func(claimAt, deadAt time.Time) Attempt {
				return Attempt{Index: 1, Epoch: 1, InstanceID: "a", StartedAt: claimAt, EndedAt: claimAt, Outcome: AttemptLost, Error: "lease expired"}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conformance(t, func(t *testing.T, b backend) {
				ctx := context.Background()
				s, _ := b.newStore(t)
				worker(t, s, "ns", "a", []string{"default"}, nil)
				id := create(t, s, CreateExecutionArgs{MaxAttempts: 5, Now: t0})
				claim(t, s, "a", tc.claimAt)
				must(t, s.MarkWorkerDead(ctx, MarkWorkerDeadArgs{Namespace: "ns", InstanceID: "a", Reason: "gone", Now: tc.deadAt}))
				before, err := s.ListAttempts(ctx, id)
				must(t, err)
				tc.then(t, s, id)
				after, err := s.ListAttempts(ctx, id)
				must(t, err)
				want := []Attempt{tc.want(tc.claimAt, tc.deadAt)}
				checkAttempts(t, id, before, want)
				checkAttempts(t, id, after, want)
			})
		})
	}
}
