package service

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestListAttempts: the history of one execution through every way an
// attempt ends (fail, reclaim after a lapse, release, snooze, a holder
// marked dead, completion), oldest first, each with its holder, times,
// outcome and error; a cancel ends the current one cancelled; an unknown
// execution is ErrNotFound; pruning removes the history with its
// execution.
func TestListAttempts(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		worker(t, s, "ns", "a", []string{"default"}, nil)
		worker(t, s, "ns", "b", []string{"default"}, nil)
		id := create(t, s, CreateExecutionArgs{MaxAttempts: 5, Now: t0})
		at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

		if got, err := s.ListAttempts(ctx, id); err != nil || len(got) != 0 {
			t.Fatalf("before any claim: %v, %v", got, err)
		}
		// 1: failed by a.
		l := claim(t, s, "a", at(10))
		must(t, s.FailExecution(ctx, FailArgs{Lease: l, Reason: "boom", Now: at(20)}))
		// 2: lost: b's lease expires and is reclaimed.
		claim(t, s, "b", at(30))
		n, err := s.ReclaimExpiredLeases(ctx, at(30).Add(time.Minute), 0)
		if err != nil || n != 1 {
			t.Fatalf("reclaim: %d, %v", n, err)
		}
		// 3: released by a.
		reclaimedAt := at(30).Add(time.Minute)
		l = claim(t, s, "a", reclaimedAt.Add(10*time.Millisecond))
		must(t, s.ReleaseLease(ctx, ReleaseArgs{Lease: l, Now: reclaimedAt.Add(20 * time.Millisecond)}))
		// 4: snoozed by b.
		base := reclaimedAt.Add(30 * time.Millisecond)
		l = claim(t, s, "b", base)
		must(t, s.SnoozeLease(ctx, SnoozeArgs{Lease: l, Until: base, Now: base.Add(time.Millisecond)}))
		// 5: running, now.
		l = claim(t, s, "a", base.Add(2*time.Millisecond))
		got, err := s.ListAttempts(ctx, id)
		must(t, err)
		want := []Attempt{
			{Index: 1, Epoch: 1, InstanceID: "a", StartedAt: at(10), EndedAt: at(20), Outcome: AttemptFailed, Error: "boom"},
			{Index: 2, Epoch: 2, InstanceID: "b", StartedAt: at(30), EndedAt: reclaimedAt, Outcome: AttemptLost, Error: "lease expired"},
			{Index: 3, Epoch: 3, InstanceID: "a", StartedAt: reclaimedAt.Add(10 * time.Millisecond), EndedAt: reclaimedAt.Add(20 * time.Millisecond), Outcome: AttemptReleased},
			{Index: 4, Epoch: 4, InstanceID: "b", StartedAt: base, EndedAt: base.Add(time.Millisecond), Outcome: AttemptSnoozed},
			{Index: 5, Epoch: 5, InstanceID: "a", StartedAt: base.Add(2 * time.Millisecond), Outcome: AttemptRunning},
		}
		checkAttempts(t, id, got, want)
		if l.AttemptIndex != 3 {
			t.Errorf("the fifth claim's AttemptIndex = %d, want 3 (a release and a snooze use up no attempt)", l.AttemptIndex)
		}

		// 6: the holder is marked dead: its attempt ended then, lost, and
		// lists so before the reclaim as after it.
		must(t, s.MarkWorkerDead(ctx, MarkWorkerDeadArgs{Namespace: "ns", InstanceID: "a", Reason: "gone", Now: base.Add(3 * time.Millisecond)}))
		want[4].EndedAt, want[4].Outcome, want[4].Error = base.Add(3*time.Millisecond), AttemptLost, "lease expired"
		got, err = s.ListAttempts(ctx, id)
		must(t, err)
		checkAttempts(t, id, got, want)
		if _, err := s.ReclaimExpiredLeases(ctx, base.Add(4*time.Millisecond), 0); err != nil {
			t.Fatal(err)
		}
		// 7: completed by b.
		l = claim(t, s, "b", base.Add(5*time.Millisecond))
		must(t, s.CompleteExecution(ctx, CompleteArgs{Lease: l, Result: []byte("ok"), Now: base.Add(6 * time.Millisecond)}))
		got, err = s.ListAttempts(ctx, id)
		must(t, err)
		want = append(want,
			Attempt{Index: 6, Epoch: 6, InstanceID: "b", StartedAt: base.Add(5 * time.Millisecond), EndedAt: base.Add(6 * time.Millisecond), Outcome: AttemptCompleted})
		checkAttempts(t, id, got, want)

		// A cancel while running ends that attempt cancelled, with the reason.
		other := create(t, s, CreateExecutionArgs{Now: t0})
		l = claim(t, s, "b", base.Add(7*time.Millisecond))
		if l.ExecutionID != other {
			t.Fatalf("claimed %s, want %s", l.ExecutionID, other)
		}
		must(t, s.CancelExecution(ctx, CancelExecutionArgs{ID: other, Reason: "no longer wanted", Now: base.Add(8 * time.Millisecond)}))
		got, err = s.ListAttempts(ctx, other)
		must(t, err)
		checkAttempts(t, other, got, []Attempt{{Index: 1, Epoch: 1, InstanceID: "b", StartedAt: base.Add(7 * time.Millisecond),
			EndedAt: base.Add(8 * time.Millisecond), Outcome: AttemptCancelled, Error: "no longer wanted"}})

		_, err = s.ListAttempts(ctx, uuid.New())
		wantErr(t, err, ErrNotFound)

		// Pruned with its execution.
		pruned, err := s.PruneExecutions(ctx, base.Add(time.Hour))
		if err != nil || pruned != 2 {
			t.Fatalf("prune: %d, %v", pruned, err)
		}
		_, err = s.ListAttempts(ctx, id)
		wantErr(t, err, ErrNotFound)
		problems, err := s.Check(ctx)
		must(t, err)
		if len(problems) > 0 {
			t.Fatalf("check after prune: %v", problems)
		}
	})
}

func checkAttempts(t *testing.T, id uuid.UUID, got, want []Attempt) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d attempts, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		w := want[i]
		w.ExecutionID = id
		g := got[i]
		if g.ExecutionID != w.ExecutionID || g.Index != w.Index || g.Epoch != w.Epoch || g.InstanceID != w.InstanceID ||
			!g.StartedAt.Equal(w.StartedAt) || !g.EndedAt.Equal(w.EndedAt) || g.Outcome != w.Outcome || g.Error != w.Error {
			t.Errorf("attempt %d:\n got %+v\nwant %+v", i+1, g, w)
		}
	}
}

// TestAttemptErrorKept: each failed attempt keeps its own reason, while
// LastError holds the latest.
func TestAttemptErrorKept(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		worker(t, s, "ns", "a", []string{"default"}, nil)
		id := create(t, s, CreateExecutionArgs{MaxAttempts: 3, Now: t0})
		long := strings.Repeat("é", 2048) // 4 KiB
		for i, reason := range []string{"first", "second\nline", long} {
			l := claim(t, s, "a", t0.Add(time.Duration(i+1)*time.Second))
			must(t, s.FailExecution(ctx, FailArgs{Lease: l, Reason: reason, Now: t0.Add(time.Duration(i+1)*time.Second + time.Millisecond)}))
		}
		got, err := s.ListAttempts(ctx, id)
		must(t, err)
		if len(got) != 3 || got[0].Error != "first" || got[1].Error != "second\nline" || got[2].Error != long {
			t.Fatalf("attempts %+v", got)
		}
		e, err := s.GetExecution(ctx, id)
		must(t, err)
		if e.State != ExecutionFailed || e.LastError != long {
			t.Fatalf("execution %+v", e)
		}
	})
}

// TestAttemptLostBeforeErrorsWereKept: a reclaimed attempt recorded before
// attempts kept their errors (with an empty error) reads as "lease expired".
func TestAttemptLostBeforeErrorsWereKept(t *testing.T) {
	conformanceShared(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		loc := b.fresh(t)
		s, _ := b.open(t, loc)
		worker(t, s, "ns", "a", []string{"default"}, nil)
		id := create(t, s, CreateExecutionArgs{MaxAttempts: 2, Now: t0})
		claim(t, s, "a", t0)
		if _, err := s.ReclaimExpiredLeases(ctx, t0.Add(time.Hour), 0); err != nil {
			t.Fatal(err)
		}
		b.exec(t, loc, "UPDATE attempts SET error = ''")
		got, err := s.ListAttempts(ctx, id)
		must(t, err)
		if len(got) != 1 || got[0].Outcome != AttemptLost || got[0].Error != "lease expired" {
			t.Fatalf("attempts %+v", got)
		}
	})
}
