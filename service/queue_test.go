package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

func getExecution(t testing.TB, s *Store, id uuid.UUID) Execution {
	t.Helper()
	e, err := s.GetExecution(context.Background(), id)
	must(t, err)
	return e
}

func TestRunAt(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		worker(t, s, "ns", "i", []string{"default"}, nil)
		later := create(t, s, CreateExecutionArgs{RunAt: t0.Add(10 * time.Second)})
		now := create(t, s, CreateExecutionArgs{})
		past := create(t, s, CreateExecutionArgs{RunAt: t0.Add(-time.Hour)})
		if e := getExecution(t, s, now); !e.RunAt.Equal(t0) || !e.CreatedAt.Equal(t0) {
			t.Fatalf("a zero RunAt is the creation time: %+v", e)
		}
		// Same priority: earliest RunAt first; a RunAt in the past is claimable at once.
		if l := claim(t, s, "i", t0); l.ExecutionID != past {
			t.Fatal("the execution due an hour ago was not claimed first")
		}
		if l := claim(t, s, "i", t0); l.ExecutionID != now {
			t.Fatal("the execution due now was not claimed second")
		}
		_, err := s.ClaimExecution(ctx, ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Minute, Now: t0.Add(10*time.Second - time.Millisecond)})
		wantErr(t, err, ErrNoWork)
		if l := claim(t, s, "i", t0.Add(10*time.Second)); l.ExecutionID != later {
			t.Fatal("the scheduled execution was not claimable at its RunAt")
		}
	})
}

func TestClaimOrderPriorityRunAtID(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		s, _ := b.newStore(t)
		worker(t, s, "ns", "i", []string{"default", "other"}, nil)
		var want []uuid.UUID
		// Created in an order that is not the claim order.
		lowEarly := create(t, s, CreateExecutionArgs{Priority: 1, RunAt: t0.Add(-2 * time.Second)})
		highLate := create(t, s, CreateExecutionArgs{Priority: 5, RunAt: t0.Add(-time.Second), Lane: "other"})
		highEarly := create(t, s, CreateExecutionArgs{Priority: 5, RunAt: t0.Add(-2 * time.Second)})
		lowEarly2 := create(t, s, CreateExecutionArgs{Priority: 1, RunAt: t0.Add(-2 * time.Second), Lane: "other"})
		want = append(want, highEarly, highLate, lowEarly, lowEarly2) // lowEarly2 ties lowEarly on RunAt: lower id first
		for i, w := range want {
			if l := claim(t, s, "i", t0); l.ExecutionID != w {
				t.Fatalf("claim %d took %s, want %s", i, l.ExecutionID, w)
			}
		}
	})
}

func TestRetryBackoff(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		worker(t, s, "ns", "i", []string{"default"}, nil)
		id := create(t, s, CreateExecutionArgs{MaxAttempts: 5, RetryBackoff: 10 * time.Second})
		if e := getExecution(t, s, id); e.RetryBackoff != 10*time.Second {
			t.Fatalf("RetryBackoff = %v", e.RetryBackoff)
		}
		at := t0
		fail := func(wait time.Duration) {
			t.Helper()
			l := claim(t, s, "i", at)
			at = at.Add(time.Second)
			must(t, s.FailExecution(ctx, FailArgs{Lease: l, Reason: "boom", Now: at}))
			e := getExecution(t, s, id)
			if e.State != ExecutionWaiting || !e.RunAt.Equal(at.Add(wait)) {
				t.Fatalf("after attempt %d: %s, RunAt %v, want %v", e.Attempts, e.State, e.RunAt, at.Add(wait))
			}
			_, err := s.ClaimExecution(ctx, ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Minute, Now: at.Add(wait - time.Millisecond)})
			wantErr(t, err, ErrNoWork)
			at = at.Add(wait)
		}
		fail(10 * time.Second) // 10s × 2^0
		fail(20 * time.Second) // 10s × 2^1
		// A reclaim waits the same way: attempt 3 → 40s.
		l := claim(t, s, "i", at)
		at = at.Add(time.Minute)
		n, err := s.ReclaimExpiredLeases(ctx, at, 0)
		must(t, err)
		if e := getExecution(t, s, id); n != 1 || e.State != ExecutionWaiting || !e.RunAt.Equal(at.Add(40*time.Second)) {
			t.Fatalf("after the reclaim: %+v", e)
		}
		wantErr(t, s.CompleteExecution(ctx, CompleteArgs{Lease: l, Now: at}), ErrLeaseLost)

		// The wait is capped at 24 h, whatever the attempt (2^32 included).
		must(t, s.CancelExecution(ctx, CancelExecutionArgs{ID: id}))
		capped := create(t, s, CreateExecutionArgs{MaxAttempts: 40, RetryBackoff: 13 * time.Hour, Now: t0})
		for attempt := 1; attempt <= 33; attempt++ {
			_, err := s.RegisterWorker(ctx, RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "i", Lanes: []string{"default"}, TTL: time.Hour, Now: far(attempt)})
			must(t, err)
			cl := claim(t, s, "i", far(attempt))
			if cl.ExecutionID != capped || cl.AttemptIndex != attempt {
				t.Fatalf("claimed %+v", cl)
			}
			must(t, s.FailExecution(ctx, FailArgs{Lease: cl, Now: far(attempt)}))
			e := getExecution(t, s, capped)
			wait := 24 * time.Hour
			if attempt == 1 {
				wait = 13 * time.Hour
			}
			if !e.RunAt.Equal(far(attempt).Add(wait)) {
				t.Fatalf("attempt %d: RunAt %v, want +%v", attempt, e.RunAt, wait)
			}
		}
	})
}

// far is a time far enough apart per attempt that every backoff has passed.
func far(attempt int) time.Time { return t0.Add(time.Duration(attempt) * 48 * time.Hour) }

func TestQueueInputValidation(t *testing.T) {
	validationOnly(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		worker(t, s, "ns", "i", []string{"default"}, nil)
		for name, a := range map[string]CreateExecutionArgs{
			"negative backoff":  {Namespace: "ns", Lane: "default", RetryBackoff: -time.Second},
			"sub-ms backoff":    {Namespace: "ns", Lane: "default", RetryBackoff: 500 * time.Microsecond},
			"backoff over 24 h": {Namespace: "ns", Lane: "default", RetryBackoff: 24*time.Hour + time.Millisecond},
		} {
			_, err := s.CreateExecution(ctx, a)
			if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "RetryBackoff") {
				t.Fatalf("%s: %v", name, err)
			}
		}
		page, err := s.ListExecutions(ctx, ListExecutionsArgs{})
		must(t, err)
		if len(page.Executions) != 0 {
			t.Fatalf("invalid creates wrote %d executions", len(page.Executions))
		}
		for _, max := range []int{0, -1, 1001} {
			_, err := s.ClaimExecutions(ctx, ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Minute}, max)
			wantErr(t, err, ErrInvalidInput)
		}
		id := create(t, s, CreateExecutionArgs{})
		err = s.CancelExecution(ctx, CancelExecutionArgs{ID: id, Reason: strings.Repeat("x", 4097)})
		wantErr(t, err, ErrInvalidInput)
		if e := getExecution(t, s, id); e.State != ExecutionWaiting {
			t.Fatalf("an invalid cancel changed the execution: %s", e.State)
		}
		for name, a := range map[string]ListExecutionsArgs{
			"bad state":    {State: "zombie"},
			"bad lane":     {Lane: "l\x00"},
			"bad cursor":   {After: "nope"},
			"other cursor": {After: encodeCursor(agentsCursor, "x")},
			"bad id":       {After: encodeCursor(executionsCursor, "not-a-uuid")},
			"negative":     {Limit: -1},
		} {
			_, err := s.ListExecutions(ctx, a)
			if !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("%s: %v", name, err)
			}
		}
	})
}

func TestCancelExecution(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		worker(t, s, "ns", "i", []string{"default"}, nil)
		waiting := create(t, s, CreateExecutionArgs{})
		running := create(t, s, CreateExecutionArgs{})
		done := create(t, s, CreateExecutionArgs{})
		failed := create(t, s, CreateExecutionArgs{})

		must(t, s.CancelExecution(ctx, CancelExecutionArgs{ID: waiting, Reason: "not needed"}))
		if e := getExecution(t, s, waiting); e.State != ExecutionCancelled || e.LastError != "not needed" {
			t.Fatalf("cancelled waiting: %+v", e)
		}
		lr := claim(t, s, "i", t0)
		if lr.ExecutionID != running {
			t.Fatal("a cancelled execution was claimable")
		}
		ld := claim(t, s, "i", t0)
		must(t, s.CompleteExecution(ctx, CompleteArgs{Lease: ld, Now: t0}))
		lf := claim(t, s, "i", t0)
		must(t, s.FailExecution(ctx, FailArgs{Lease: lf, Reason: "x", Now: t0}))

		// A running execution: its lease ends at once, for good.
		must(t, s.CancelExecution(ctx, CancelExecutionArgs{ID: running, Reason: "operator", Now: t0.Add(time.Second)}))
		if e := getExecution(t, s, running); e.State != ExecutionCancelled || e.LastError != "operator" {
			t.Fatalf("cancelled running: %+v", e)
		}
		_, err := s.RenewLease(ctx, RenewLeaseArgs{Lease: lr, TTL: time.Minute, Now: t0})
		wantErr(t, err, ErrLeaseLost)
		wantErr(t, s.CompleteExecution(ctx, CompleteArgs{Lease: lr, Now: t0}), ErrLeaseLost)
		wantErr(t, s.FailExecution(ctx, FailArgs{Lease: lr, Now: t0}), ErrLeaseLost)
		page, err := s.ListExpiredLeases(ctx, ListExpiredLeasesArgs{AsOf: t0.Add(time.Hour)})
		must(t, err)
		if len(page.Leases) != 0 {
			t.Fatalf("a cancelled lease is listed as expired: %+v", page.Leases)
		}

		// Again: a no-op. Completed or failed: ErrConflict. Unknown: ErrNotFound.
		must(t, s.CancelExecution(ctx, CancelExecutionArgs{ID: running, Reason: "again"}))
		if e := getExecution(t, s, running); e.LastError != "operator" {
			t.Fatalf("a second cancel changed the reason to %q", e.LastError)
		}
		wantErr(t, s.CancelExecution(ctx, CancelExecutionArgs{ID: done}), ErrConflict)
		wantErr(t, s.CancelExecution(ctx, CancelExecutionArgs{ID: failed}), ErrConflict)
		wantErr(t, s.CancelExecution(ctx, CancelExecutionArgs{ID: uuid.New()}), ErrNotFound)
		if e := getExecution(t, s, done); e.State != ExecutionCompleted {
			t.Fatalf("a refused cancel changed a completed execution: %s", e.State)
		}
	})
}

func TestClaimExecutions(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		worker(t, s, "ns", "i", []string{"a", "b"}, []string{"gpu"})
		var ids []uuid.UUID
		for p := range 5 {
			lane := []string{"a", "b"}[p%2]
			ids = append(ids, create(t, s, CreateExecutionArgs{Lane: lane, Priority: p}))
		}
		create(t, s, CreateExecutionArgs{Lane: "a", Priority: 9, RequiredCapabilities: []string{"tpu"}}) // never for this worker
		create(t, s, CreateExecutionArgs{Lane: "c", Priority: 9})                                        // not its lane
		create(t, s, CreateExecutionArgs{Lane: "a", Priority: 9, RunAt: t0.Add(time.Hour)})              // not yet
		args := ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Minute, Now: t0}
		first, err := s.ClaimExecutions(ctx, args, 3)
		must(t, err)
		second, err := s.ClaimExecutions(ctx, args, 10)
		must(t, err)
		var got []uuid.UUID
		leaseIDs := map[uuid.UUID]bool{}
		for _, l := range append(first, second...) {
			got = append(got, l.ExecutionID)
			if l.Epoch != 1 || l.AttemptIndex != 1 || l.InstanceID != "i" || l.Namespace != "ns" || !l.ExpiresAt.Equal(t0.Add(time.Minute)) || leaseIDs[l.LeaseID] {
				t.Fatalf("lease %+v", l)
			}
			leaseIDs[l.LeaseID] = true
		}
		want := slices.Clone(ids)
		slices.Reverse(want) // highest priority first
		if len(first) != 3 || !slices.Equal(got, want) {
			t.Fatalf("claimed %v (first batch %d), want %v", got, len(first), want)
		}
		_, err = s.ClaimExecutions(ctx, args, 5)
		wantErr(t, err, ErrNoWork)
		for _, l := range first {
			must(t, s.CompleteExecution(ctx, CompleteArgs{Lease: l, Now: t0}))
		}
		_, err = s.ClaimExecutions(ctx, ClaimArgs{Namespace: "ns", InstanceID: "ghost", LeaseTTL: time.Minute, Now: t0}, 2)
		wantErr(t, err, ErrNotRegistered)
	})
}

func TestListExecutions(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		type row struct {
			id              uuid.UUID
			ns, lane, state string
		}
		var all []row
		for i := range 24 {
			ns, lane := []string{"a", "b"}[i%2], []string{"x", "y", "z"}[i%3]
			id := create(t, s, CreateExecutionArgs{Namespace: ns, Lane: lane})
			all = append(all, row{id, ns, lane, "waiting"})
		}
		for _, ns := range []string{"a", "b"} {
			worker(t, s, ns, "w", []string{"x"}, nil)
			for k, end := range []string{"completed", "failed", "cancelled", "running"} {
				l, err := s.ClaimExecution(ctx, ClaimArgs{Namespace: ns, InstanceID: "w", LeaseTTL: time.Hour, Now: t0})
				must(t, err)
				switch end {
				case "completed":
					must(t, s.CompleteExecution(ctx, CompleteArgs{Lease: l, Now: t0}))
				case "failed":
					must(t, s.FailExecution(ctx, FailArgs{Lease: l, Now: t0}))
				case "cancelled":
					must(t, s.CancelExecution(ctx, CancelExecutionArgs{ID: l.ExecutionID}))
				}
				for i := range all {
					if all[i].id == l.ExecutionID {
						all[i].state = end
					}
				}
				_ = k
			}
		}
		slices.SortFunc(all, func(a, b row) int { return strings.Compare(a.id.String(), b.id.String()) })
		for _, ns := range []string{"", "a"} {
			for _, lane := range []string{"", "x"} {
				for _, state := range []ExecutionState{"", ExecutionWaiting, ExecutionCompleted, ExecutionCancelled, ExecutionRunning} {
					for _, newest := range []bool{false, true} {
						t.Run(fmt.Sprintf("ns=%q,lane=%q,state=%q,newest=%v", ns, lane, state, newest), func(t *testing.T) {
							var want []uuid.UUID
							for _, r := range all {
								if (ns == "" || r.ns == ns) && (lane == "" || r.lane == lane) && (state == "" || r.state == string(state)) {
									want = append(want, r.id)
								}
							}
							if newest {
								slices.Reverse(want)
							}
							var got []uuid.UUID
							after := ""
							for pages := 0; ; pages++ {
								page, err := s.ListExecutions(ctx, ListExecutionsArgs{Namespace: ns, Lane: lane, State: state, After: after, Limit: 2, NewestFirst: newest})
								must(t, err)
								for _, e := range page.Executions {
									got = append(got, e.ID)
									if (ns != "" && e.Namespace != ns) || (lane != "" && e.Lane != lane) || (state != "" && e.State != state) {
										t.Fatalf("filter broken: %+v", e)
									}
								}
								if page.Next == "" {
									if len(page.Executions) == 0 && pages > 0 {
										t.Fatal("an empty last page: Next was not empty exactly on the last page")
									}
									break
								}
								after = page.Next
							}
							if !slices.Equal(got, want) {
								t.Fatalf("got %v\nwant %v", got, want)
							}
						})
					}
				}
			}
		}
		// A cursor belongs to one order.
		page, err := s.ListExecutions(ctx, ListExecutionsArgs{Limit: 1})
		must(t, err)
		_, err = s.ListExecutions(ctx, ListExecutionsArgs{Limit: 1, After: page.Next, NewestFirst: true})
		wantErr(t, err, ErrInvalidInput)
	})
}

// Executions scheduled for later at a higher priority do not hide the ready
// ones below them, and take the lead once due.
func TestScheduledHigherPriorityDoesNotBlock(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		s, _ := b.newStore(t)
		worker(t, s, "ns", "i", []string{"default"}, nil)
		var later []uuid.UUID
		for range 3 {
			later = append(later, create(t, s, CreateExecutionArgs{Priority: 9, RunAt: t0.Add(time.Hour)}))
		}
		mid := create(t, s, CreateExecutionArgs{Priority: 5, RunAt: t0.Add(time.Minute)})
		ready := create(t, s, CreateExecutionArgs{Priority: 1})
		leases, err := s.ClaimExecutions(context.Background(), ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Hour, Now: t0}, 5)
		must(t, err)
		if len(leases) != 1 || leases[0].ExecutionID != ready {
			t.Fatalf("at t0: %+v", leases)
		}
		if l := claim(t, s, "i", t0.Add(time.Minute)); l.ExecutionID != mid {
			t.Fatal("the priority-5 execution was not claimed once due")
		}
		// The first registration lapses at t0+1h: register again.
		_, err = s.RegisterWorker(context.Background(), RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "i", Lanes: []string{"default"}, TTL: time.Hour, Now: t0.Add(time.Hour)})
		must(t, err)
		if l := claim(t, s, "i", t0.Add(time.Hour)); l.ExecutionID != later[0] {
			t.Fatal("the priority-9 executions were not claimed first once due")
		}
	})
}

// ReleaseLease gives back a claimed execution that never ran: it waits again
// at once with its RunAt, without having used an attempt, and the released
// lease is fenced like any stale one.
func TestReleaseLease(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		worker(t, s, "ns", "i", []string{"default"}, nil)
		runAt := t0.Add(10 * time.Second)
		id := create(t, s, CreateExecutionArgs{MaxAttempts: 1, RunAt: runAt, Now: t0})
		l := claim(t, s, "i", t0.Add(20*time.Second))
		must(t, s.ReleaseLease(ctx, ReleaseArgs{Lease: l, Now: t0.Add(21 * time.Second)}))
		e := getExecution(t, s, id)
		if e.State != ExecutionWaiting || e.Attempts != 0 || !e.RunAt.Equal(runAt) || e.LastError != "" {
			t.Fatalf("released: %+v", e)
		}
		// The released lease is fenced.
		now := t0.Add(22 * time.Second)
		wantErr(t, s.ReleaseLease(ctx, ReleaseArgs{Lease: l, Now: now}), ErrLeaseLost)
		wantErr(t, s.CompleteExecution(ctx, CompleteArgs{Lease: l, Now: now}), ErrLeaseLost)
		wantErr(t, s.FailExecution(ctx, FailArgs{Lease: l, Now: now}), ErrLeaseLost)
		_, err := s.RenewLease(ctx, RenewLeaseArgs{Lease: l, TTL: time.Minute, Now: now})
		wantErr(t, err, ErrLeaseLost)
		// The next claim takes it under a new epoch, as its first attempt.
		again := claim(t, s, "i", now)
		if again.ExecutionID != id || again.Epoch != l.Epoch+1 || again.AttemptIndex != 1 {
			t.Fatalf("claim after release: %+v (released %+v)", again, l)
		}
		// An expired lease cannot be released, nor one revoked by a death,
		// whatever Now says; an unknown execution is a lost lease too.
		wantErr(t, s.ReleaseLease(ctx, ReleaseArgs{Lease: again, Now: again.ExpiresAt}), ErrLeaseLost)
		must(t, s.MarkWorkerDead(ctx, MarkWorkerDeadArgs{Namespace: "ns", InstanceID: "i", Now: now.Add(time.Second)}))
		wantErr(t, s.ReleaseLease(ctx, ReleaseArgs{Lease: again, Now: now}), ErrLeaseLost)
		wantErr(t, s.ReleaseLease(ctx, ReleaseArgs{Lease: Lease{ExecutionID: uuid.New(), Epoch: 1}, Now: now}), ErrLeaseLost)
		wantErr(t, s.ReleaseLease(ctx, ReleaseArgs{Lease: again, Now: time.Date(20000, 1, 1, 0, 0, 0, 0, time.UTC)}), ErrInvalidInput)
	})
}

// Every time argument lies between the years 1970 and 9999: a time beyond it
// is refused, never wrapped around (RunAt in year 2^62 seconds was claimable
// at once).
func TestTimesOutOfRange(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		worker(t, s, "ns", "i", []string{"default"}, nil)
		id := create(t, s, CreateExecutionArgs{Now: t0})
		l := claim(t, s, "i", t0)
		for _, bad := range []time.Time{
			time.Unix(1<<62, 0),
			time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
			time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC),
		} {
			calls := map[string]func() error{
				"CreateExecution.RunAt": func() error {
					_, err := s.CreateExecution(ctx, CreateExecutionArgs{Namespace: "ns", Lane: "default", RunAt: bad})
					return err
				},
				"CreateExecution.Now": func() error {
					_, err := s.CreateExecution(ctx, CreateExecutionArgs{Namespace: "ns", Lane: "default", Now: bad})
					return err
				},
				"RegisterWorker": func() error {
					_, err := s.RegisterWorker(ctx, RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "j", TTL: time.Hour, Now: bad})
					return err
				},
				"HeartbeatWorker": func() error {
					_, err := s.HeartbeatWorker(ctx, HeartbeatWorkerArgs{Namespace: "ns", InstanceID: "i", Now: bad})
					return err
				},
				"MarkWorkerDead": func() error {
					return s.MarkWorkerDead(ctx, MarkWorkerDeadArgs{Namespace: "ns", InstanceID: "i", Now: bad})
				},
				"SweepExpiredWorkers": func() error { _, err := s.SweepExpiredWorkers(ctx, bad); return err },
				"PruneWorkerEvents":   func() error { _, err := s.PruneWorkerEvents(ctx, bad); return err },
				"ClaimExecution": func() error {
					_, err := s.ClaimExecution(ctx, ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Minute, Now: bad})
					return err
				},
				"RenewLease": func() error {
					_, err := s.RenewLease(ctx, RenewLeaseArgs{Lease: l, TTL: time.Minute, Now: bad})
					return err
				},
				"CompleteExecution":    func() error { return s.CompleteExecution(ctx, CompleteArgs{Lease: l, Now: bad}) },
				"FailExecution":        func() error { return s.FailExecution(ctx, FailArgs{Lease: l, Now: bad}) },
				"ReleaseLease":         func() error { return s.ReleaseLease(ctx, ReleaseArgs{Lease: l, Now: bad}) },
				"CancelExecution":      func() error { return s.CancelExecution(ctx, CancelExecutionArgs{ID: id, Now: bad}) },
				"ListExpiredLeases":    func() error { _, err := s.ListExpiredLeases(ctx, ListExpiredLeasesArgs{AsOf: bad}); return err },
				"ReclaimExpiredLeases": func() error { _, err := s.ReclaimExpiredLeases(ctx, bad, 0); return err },
				"Sweep":                func() error { _, err := s.Sweep(ctx, bad, SweeperArgs{}); return err },
				"Stats":                func() error { _, err := s.Stats(ctx, bad); return err },
				"InsertAgent": func() error {
					a := agent("x")
					a.SpawnedAt = bad
					return s.InsertAgent(ctx, a)
				},
				"UpdateAgentState": func() error {
					return s.UpdateAgentState(ctx, UpdateAgentStateArgs{ID: "x", State: AgentRunning, At: bad})
				},
				"TerminateLiveAgents":       func() error { _, err := s.TerminateLiveAgents(ctx, bad); return err },
				"TerminateLiveAgentsOnHost": func() error { _, err := s.TerminateLiveAgentsOnHost(ctx, "h", bad); return err },
			}
			for name, call := range calls {
				if err := call(); !errors.Is(err, ErrInvalidInput) {
					t.Errorf("%s at %v: %v, want ErrInvalidInput", name, bad, err)
				}
			}
		}
		// Nothing was written: the one execution is still running, alone.
		page, err := s.ListExecutions(ctx, ListExecutionsArgs{})
		must(t, err)
		if len(page.Executions) != 1 || page.Executions[0].State != ExecutionRunning {
			t.Fatalf("after the refused calls: %+v", page.Executions)
		}
	})
}

// While the database refuses writes (its locks held elsewhere past the
// Store's wait), every write returns ErrUnavailable, never a driver error,
// and reads go on.
func TestWritesUnavailableWhileLocked(t *testing.T) {
	conformanceShared(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		loc := b.fresh(t)
		s, _ := b.openImpatient(t, loc)
		worker(t, s, "ns", "i", []string{"default"}, nil)
		id := create(t, s, CreateExecutionArgs{Now: t0})
		l := claim(t, s, "i", t0)
		b.blockWrites(t, loc)
		calls := map[string]func() error{
			"CreateExecution": func() error {
				_, err := s.CreateExecution(ctx, CreateExecutionArgs{Namespace: "ns", Lane: "default", Now: t0})
				return err
			},
			"RegisterWorker": func() error {
				_, err := s.RegisterWorker(ctx, RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "j", TTL: time.Hour, Now: t0})
				return err
			},
			"HeartbeatWorker": func() error {
				_, err := s.HeartbeatWorker(ctx, HeartbeatWorkerArgs{Namespace: "ns", InstanceID: "i", Now: t0})
				return err
			},
			"RenewLease": func() error {
				_, err := s.RenewLease(ctx, RenewLeaseArgs{Lease: l, TTL: time.Minute, Now: t0})
				return err
			},
			"CompleteExecution": func() error { return s.CompleteExecution(ctx, CompleteArgs{Lease: l, Now: t0}) },
			"FailExecution":     func() error { return s.FailExecution(ctx, FailArgs{Lease: l, Now: t0}) },
			"ReleaseLease":      func() error { return s.ReleaseLease(ctx, ReleaseArgs{Lease: l, Now: t0}) },
			"CancelExecution":   func() error { return s.CancelExecution(ctx, CancelExecutionArgs{ID: id, Now: t0}) },
			"MarkWorkerDead": func() error {
				return s.MarkWorkerDead(ctx, MarkWorkerDeadArgs{Namespace: "ns", InstanceID: "i", Now: t0})
			},
			"InsertAgent": func() error { return s.InsertAgent(ctx, agent("x")) },
		}
		for name, call := range calls {
			if err := call(); !errors.Is(err, ErrUnavailable) {
				t.Errorf("%s: %v, want ErrUnavailable", name, err)
			}
		}
		if e, err := s.GetExecution(ctx, id); err != nil || e.State != ExecutionRunning {
			t.Fatalf("a read while writes are refused: %+v, %v", e, err)
		}
	})
}

// A claim carries at most 64 MiB of payloads, always at least one
// execution, and the engines agree: with the bound lowered to 1,000 bytes,
// a claim of 5 over payloads of 300 takes the best 3, the next the other 2,
// and a payload over the bound alone is claimed by itself. On SQLite, five
// payloads of 16 MiB against the real bound: 4, then 1 (PostgreSQL's run at
// that size is TestBatchesOverAGigabyte).
func TestClaimBoundedByPayloadBytes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		bound    int64
		sizes    []int
		want     []int // executions each claim of 5 takes
		postgres bool  // run on PostgreSQL too
	}{
		{"payloads of 300, bound 1000", 1000, []int{300, 300, 300, 300, 300}, []int{3, 2}, true},
		{"a payload over the bound alone", 1000, []int{1500, 300, 300}, []int{1, 2}, true},
		{"an empty payload after a full bound", 1000, []int{1000, 0, 300}, []int{2, 1}, true},
		{"payloads of 16 MiB, the real bound", 0, []int{maxPayloadBytes, maxPayloadBytes, maxPayloadBytes, maxPayloadBytes, maxPayloadBytes}, []int{4, 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conformance(t, func(t *testing.T, b backend) {
				if b.postgres && !tc.postgres {
					return
				}
				ctx := context.Background()
				s, _ := b.newStore(t, withClaimBytes(tc.bound))
				worker(t, s, "ns", "i", []string{"l"}, nil)
				var ids []uuid.UUID
				for p, size := range tc.sizes {
					ids = append(ids, create(t, s, CreateExecutionArgs{Lane: "l", Priority: len(tc.sizes) - p, Payload: make([]byte, size)}))
				}
				args := ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Minute, Now: t0}
				var got []uuid.UUID
				var took []int
				for range tc.want {
					leases, err := s.ClaimExecutions(ctx, args, 5)
					if !errors.Is(err, ErrNoWork) {
						must(t, err)
					}
					for _, l := range leases {
						got = append(got, l.ExecutionID)
					}
					took = append(took, len(leases))
				}
				if !slices.Equal(took, tc.want) || !slices.Equal(got, ids) {
					t.Fatalf("claims of 5 took %v executions (%v), want %v, best first (%v)", took, got, tc.want, ids)
				}
			})
		})
	}
}
