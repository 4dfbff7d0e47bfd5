package service

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestSnoozeLease: a snooze ends the lease without using up an attempt, the
// epoch increased and the old lease fenced, the execution waiting until
// Until (zero: now) with its unique key still held; a stale lease is
// ErrLeaseLost; Until more than 30 days ahead is ErrInvalidInput.
func TestSnoozeLease(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		worker(t, s, "ns", "a", []string{"default"}, nil)
		id := create(t, s, CreateExecutionArgs{MaxAttempts: 1, UniqueKey: "once", Now: t0})
		l := claim(t, s, "a", t0.Add(time.Second))
		wantErr(t, s.SnoozeLease(ctx, SnoozeArgs{Lease: l, Until: t0.Add(time.Second + 30*24*time.Hour + time.Millisecond), Now: t0.Add(time.Second)}), ErrInvalidInput)
		wantErr(t, s.SnoozeLease(ctx, SnoozeArgs{Lease: l, Until: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), Now: t0.Add(time.Second)}), ErrInvalidInput)
		until := t0.Add(time.Minute)
		must(t, s.SnoozeLease(ctx, SnoozeArgs{Lease: l, Until: until, Now: t0.Add(2 * time.Second)}))
		e, err := s.GetExecution(ctx, id)
		must(t, err)
		if e.State != ExecutionWaiting || e.Attempts != 0 || !e.RunAt.Equal(until) || e.FinishedAt != (time.Time{}) {
			t.Fatalf("after snooze %+v", e)
		}
		// The old lease is fenced.
		wantErr(t, s.CompleteExecution(ctx, CompleteArgs{Lease: l, Now: t0.Add(3 * time.Second)}), ErrLeaseLost)
		wantErr(t, s.SnoozeLease(ctx, SnoozeArgs{Lease: l, Now: t0.Add(3 * time.Second)}), ErrLeaseLost)
		// The key is still held while it waits.
		if again := create(t, s, CreateExecutionArgs{UniqueKey: "once", Now: t0.Add(4 * time.Second)}); again != id {
			t.Fatalf("a create of the held key made %s, want %s", again, id)
		}
		// Not claimable before Until; then claimable, the attempt not used up.
		_, err = s.ClaimExecution(ctx, ClaimArgs{Namespace: "ns", InstanceID: "a", LeaseTTL: time.Minute, Now: until.Add(-time.Millisecond)})
		wantErr(t, err, ErrNoWork)
		l2 := claim(t, s, "a", until)
		if l2.ExecutionID != id || l2.AttemptIndex != 1 || l2.Epoch != l.Epoch+1 {
			t.Fatalf("claim after the snooze %+v (first %+v)", l2, l)
		}
		// Until zero: claimable at once.
		must(t, s.SnoozeLease(ctx, SnoozeArgs{Lease: l2, Now: until.Add(time.Millisecond)}))
		l3 := claim(t, s, "a", until.Add(time.Millisecond))
		if l3.ExecutionID != id || l3.AttemptIndex != 1 {
			t.Fatalf("claim after a snooze until now %+v", l3)
		}
		// Until in the past: claimable at once too.
		must(t, s.SnoozeLease(ctx, SnoozeArgs{Lease: l3, Until: t0, Now: until.Add(2 * time.Millisecond)}))
		l4 := claim(t, s, "a", until.Add(2*time.Millisecond))
		must(t, s.CompleteExecution(ctx, CompleteArgs{Lease: l4, Now: until.Add(3 * time.Millisecond)}))
		e, err = s.GetExecution(ctx, id)
		must(t, err)
		if e.State != ExecutionCompleted || e.Attempts != 1 {
			t.Fatalf("at the end %+v", e)
		}
	})
}

// TestSnoozeHolderCrash: a snoozed execution whose next holder dies is
// reclaimed as any other: the snooze used no attempt, the crash one.
func TestSnoozeHolderCrash(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		worker(t, s, "ns", "a", []string{"default"}, nil)
		worker(t, s, "ns", "b", []string{"default"}, nil)
		id := create(t, s, CreateExecutionArgs{MaxAttempts: 2, Now: t0})
		l := claim(t, s, "a", t0)
		must(t, s.SnoozeLease(ctx, SnoozeArgs{Lease: l, Until: t0.Add(time.Second), Now: t0}))
		claim(t, s, "b", t0.Add(time.Second))
		must(t, s.MarkWorkerDead(ctx, MarkWorkerDeadArgs{Namespace: "ns", InstanceID: "b", Reason: "crash", Now: t0.Add(2 * time.Second)}))
		if n, err := s.ReclaimExpiredLeases(ctx, t0.Add(2*time.Second), 0); err != nil || n != 1 {
			t.Fatalf("reclaim %d, %v", n, err)
		}
		l = claim(t, s, "a", t0.Add(3*time.Second))
		if l.AttemptIndex != 2 {
			t.Fatalf("AttemptIndex %d after a snooze and a crash, want 2", l.AttemptIndex)
		}
		must(t, s.CompleteExecution(ctx, CompleteArgs{Lease: l, Now: t0.Add(4 * time.Second)}))
		got, err := s.ListAttempts(ctx, id)
		must(t, err)
		outcomes := make([]AttemptOutcome, len(got))
		for i, a := range got {
			outcomes[i] = a.Outcome
		}
		if fmt.Sprint(outcomes) != "[snoozed lost completed]" {
			t.Fatalf("outcomes %v", outcomes)
		}
	})
}

// TestSnoozeFromHandler: a Handler returning Snooze(d) snoozes its
// execution for d (no attempt used up, as often as it likes, even with
// MaxAttempts 1), written by the runtime's settle; Snooze of a duration
// outside (0, 30 days] fails the run with its text.
func TestSnoozeFromHandler(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := realStore(t, b)
		var runs atomic.Int32
		stop := runWorker(t, s, WorkerArgs{
			Namespace: "ns", WorkerID: "w", InstanceID: "i", Lanes: []string{"snooze", "bad"}, LeaseTTL: 10 * time.Second,
			Handler: func(ctx context.Context, l Lease) ([]byte, error) {
				if l.Lane == "bad" {
					return nil, Snooze(0)
				}
				if n := runs.Add(1); n < 3 {
					if l.AttemptIndex != 1 {
						return nil, fmt.Errorf("attempt index %d", l.AttemptIndex)
					}
					return nil, fmt.Errorf("wrapped: %w", Snooze(20*time.Millisecond))
				}
				return []byte("done"), nil
			},
		})
		defer func() { must(t, stop()) }()
		id, err := s.CreateExecution(ctx, CreateExecutionArgs{Namespace: "ns", Lane: "snooze"})
		must(t, err)
		bad, err := s.CreateExecution(ctx, CreateExecutionArgs{Namespace: "ns", Lane: "bad"})
		must(t, err)
		eventually(t, "the snoozed execution completes", func() bool {
			e, err := s.GetExecution(ctx, id)
			return err == nil && e.State == ExecutionCompleted
		})
		e, err := s.GetExecution(ctx, id)
		must(t, err)
		if e.Attempts != 1 || string(e.Result) != "done" || runs.Load() != 3 {
			t.Fatalf("after two snoozes %+v, %d runs", e, runs.Load())
		}
		got, err := s.ListAttempts(ctx, id)
		must(t, err)
		if len(got) != 3 || got[0].Outcome != AttemptSnoozed || got[1].Outcome != AttemptSnoozed || got[2].Outcome != AttemptCompleted ||
			got[1].StartedAt.Sub(got[0].StartedAt) < 20*time.Millisecond || got[2].StartedAt.Sub(got[1].StartedAt) < 20*time.Millisecond {
			t.Fatalf("attempts %+v", got)
		}
		eventually(t, "the bad snooze fails its run", func() bool {
			e, err := s.GetExecution(ctx, bad)
			return err == nil && e.State == ExecutionFailed
		})
		e, err = s.GetExecution(ctx, bad)
		must(t, err)
		if !strings.Contains(e.LastError, "Snooze(0s)") {
			t.Fatalf("bad snooze's LastError %q", e.LastError)
		}
	})
}

// TestSnoozeArgument: Snooze accepts (0, 30 days] only.
func TestSnoozeArgument(t *testing.T) {
	for _, tc := range []struct {
		d  time.Duration
		ok bool
	}{{-time.Second, false}, {0, false}, {time.Nanosecond, true}, {30 * 24 * time.Hour, true}, {30*24*time.Hour + 1, false}} {
		_, ok := asSnooze(Snooze(tc.d))
		if ok != tc.ok {
			t.Errorf("Snooze(%v) snoozes: %v, want %v", tc.d, ok, tc.ok)
		}
		if !ok && errors.Is(Snooze(tc.d), ErrInvalidInput) {
			t.Errorf("Snooze(%v): an error of its own, not ErrInvalidInput", tc.d)
		}
	}
}

// TestSnoozeSurvivesLockedDatabase: a handler's Snooze is an outcome like
// the others: while the database refuses writes it is tried again, then
// written, the attempt not used up.
func TestSnoozeSurvivesLockedDatabase(t *testing.T) {
	conformanceShared(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		loc := b.fresh(t)
		s, _ := b.openImpatient(t, loc, WithClock(time.Now))
		id := create(t, s, CreateExecutionArgs{})
		started, finish := make(chan struct{}), make(chan struct{})
		var runs atomic.Int32
		stop := runWorker(t, s, WorkerArgs{TTL: 10 * time.Second, LeaseTTL: 10 * time.Second, Handler: func(context.Context, Lease) ([]byte, error) {
			if runs.Add(1) > 1 {
				return []byte("after the snooze"), nil
			}
			close(started)
			<-finish
			return nil, Snooze(time.Hour)
		}})
		<-started
		unblock := b.blockWrites(t, loc)
		close(finish)
		time.Sleep(500 * time.Millisecond) // the settler tries and fails
		if e := getExecution(t, s, id); e.State != ExecutionRunning {
			t.Fatalf("while writes are refused: %+v", e)
		}
		unblock()
		eventually(t, "the snooze written", func() bool { return getExecution(t, s, id).State == ExecutionWaiting })
		must(t, stop())
		e := getExecution(t, s, id)
		if e.Attempts != 0 || e.RunAt.Before(time.Now().Add(59*time.Minute)) || runs.Load() != 1 {
			t.Fatalf("after the snooze %+v, %d runs", e, runs.Load())
		}
		got, err := s.ListAttempts(ctx, id)
		must(t, err)
		if len(got) != 1 || got[0].Outcome != AttemptSnoozed {
			t.Fatalf("attempts %+v", got)
		}
	})
}
