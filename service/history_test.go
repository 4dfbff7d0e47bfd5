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

// CreateExecutions writes a batch in one transaction, ids in input order,
// each item as CreateExecution would have written it.
func TestCreateExecutions(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		items := []CreateExecutionArgs{
			{Namespace: "ns", Lane: "a", Payload: []byte("one"), Priority: 3, RequiredCapabilities: []string{"gpu", "a,b", "x y"}},
			{Namespace: "ns", Lane: "b", MaxAttempts: 4, RetryBackoff: time.Second, Now: t0.Add(time.Minute)},
			{Namespace: "other", Lane: "a", RunAt: t0.Add(30 * time.Minute), Payload: []byte{0, 0xff}},
		}
		ids, err := s.CreateExecutions(ctx, items)
		must(t, err)
		if len(ids) != len(items) {
			t.Fatalf("%d ids for %d items", len(ids), len(items))
		}
		for i, id := range ids {
			e := getExecution(t, s, id)
			a := items[i]
			now := a.Now
			if now.IsZero() {
				now = t0
			}
			runAt := a.RunAt
			if runAt.IsZero() {
				runAt = now
			}
			caps := slices.Clone(a.RequiredCapabilities)
			slices.Sort(caps)
			if e.Namespace != a.Namespace || e.Lane != a.Lane || e.State != ExecutionWaiting || e.Priority != a.Priority ||
				string(e.Payload) != string(a.Payload) || !slices.Equal(e.RequiredCapabilities, caps) ||
				e.MaxAttempts != max(a.MaxAttempts, 1) || e.RetryBackoff != a.RetryBackoff ||
				!e.CreatedAt.Equal(now) || !e.RunAt.Equal(runAt) || !e.FinishedAt.IsZero() {
				t.Fatalf("item %d: stored %+v from %+v", i, e, a)
			}
			if i > 0 && id.String() <= ids[i-1].String() {
				t.Fatalf("ids are not in creation order: %v", ids)
			}
		}
		// The batch's work is claimable as any other; the scheduled item
		// once due.
		worker(t, s, "other", "i", []string{"a"}, nil)
		_, err = s.ClaimExecution(ctx, ClaimArgs{Namespace: "other", InstanceID: "i", LeaseTTL: time.Minute, Now: t0})
		wantErr(t, err, ErrNoWork)
		l, err := s.ClaimExecution(ctx, ClaimArgs{Namespace: "other", InstanceID: "i", LeaseTTL: time.Minute, Now: t0.Add(30 * time.Minute)})
		must(t, err)
		if l.ExecutionID != ids[2] {
			t.Fatalf("claimed %s, want %s", l.ExecutionID, ids[2])
		}
	})
}

// A batch is validated whole before anything is written: the first bad item
// names its index, and nothing of the batch is stored.
func TestCreateExecutionsValidation(t *testing.T) {
	validationOnly(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		ok := CreateExecutionArgs{Namespace: "ns", Lane: "a"}
		for _, tc := range []struct {
			name  string
			items []CreateExecutionArgs
			field string
		}{
			{"empty", nil, "executions"},
			{"too many", make([]CreateExecutionArgs, maxCreateBatch+1), "executions"},
			{"bad lane", []CreateExecutionArgs{ok, ok, {Namespace: "ns", Lane: "a\tb"}}, "[2].Lane"},
			{"bad namespace", []CreateExecutionArgs{{Lane: "a"}, ok}, "[0].Namespace"},
			{"negative attempts", []CreateExecutionArgs{ok, {Namespace: "ns", Lane: "a", MaxAttempts: -1}}, "[1].MaxAttempts"},
			{"payload too large", []CreateExecutionArgs{ok, {Namespace: "ns", Lane: "a", Payload: make([]byte, maxPayloadBytes+1)}}, "[1].Payload"},
			{"bad capability", []CreateExecutionArgs{ok, {Namespace: "ns", Lane: "a", RequiredCapabilities: []string{""}}}, "[1].RequiredCapabilities[0]"},
			{"bad backoff", []CreateExecutionArgs{ok, {Namespace: "ns", Lane: "a", RetryBackoff: time.Microsecond}}, "[1].RetryBackoff"},
			{"bad RunAt", []CreateExecutionArgs{ok, {Namespace: "ns", Lane: "a", RunAt: time.Date(20000, 1, 1, 0, 0, 0, 0, time.UTC)}}, "[1].RunAt"},
		} {
			_, err := s.CreateExecutions(ctx, tc.items)
			if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("%s: err = %v, want ErrInvalidInput naming %s", tc.name, err, tc.field)
			}
		}
		page, err := s.ListExecutions(ctx, ListExecutionsArgs{})
		must(t, err)
		if len(page.Executions) != 0 {
			t.Fatalf("a refused batch wrote %d executions", len(page.Executions))
		}
	})
}

// A batch of the largest size is one write on every engine, and each item
// is there.
func TestCreateExecutionsLargestBatch(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		items := make([]CreateExecutionArgs, maxCreateBatch)
		for i := range items {
			items[i] = CreateExecutionArgs{Namespace: "ns", Lane: fmt.Sprintf("l%d", i%7), Priority: i % 5, Payload: []byte(fmt.Sprint(i))}
		}
		ids, err := s.CreateExecutions(ctx, items)
		must(t, err)
		seen := 0
		for after := ""; ; {
			page, err := s.ListExecutions(ctx, ListExecutionsArgs{Namespace: "ns", After: after, Limit: 1000})
			must(t, err)
			for _, e := range page.Executions {
				if e.ID != ids[seen] || string(e.Payload) != fmt.Sprint(seen) {
					t.Fatalf("row %d: %s %q, want %s", seen, e.ID, e.Payload, ids[seen])
				}
				seen++
			}
			if after = page.Next; after == "" {
				break
			}
		}
		if seen != maxCreateBatch {
			t.Fatalf("%d executions stored, want %d", seen, maxCreateBatch)
		}
	})
}

// A scheduled execution that has become due competes with the ready ones
// at once: a claim takes the best of all claimable work, not the best of
// what was ready before.
func TestDueScheduledWorkCompetes(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		worker(t, s, "ns", "one", []string{"default"}, nil)
		worker(t, s, "ns", "many", []string{"default", "other"}, nil)
		for _, inst := range []string{"one", "many"} {
			low := create(t, s, CreateExecutionArgs{Priority: 1})
			high := create(t, s, CreateExecutionArgs{Priority: 9, RunAt: t0.Add(time.Minute)})
			leases, err := s.ClaimExecutions(ctx, ClaimArgs{Namespace: "ns", InstanceID: inst, LeaseTTL: time.Minute, Now: t0.Add(time.Minute)}, 1)
			must(t, err)
			if leases[0].ExecutionID != high {
				t.Fatalf("%s: claimed %s, want the due priority-9 execution", inst, leases[0].ExecutionID)
			}
			if l := claim(t, s, inst, t0.Add(time.Minute)); l.ExecutionID != low {
				t.Fatalf("%s: then claimed %s, want the ready one", inst, l.ExecutionID)
			}
		}
		// Many due at once: all are claimable, best first.
		var due []uuid.UUID
		for i := range 50 {
			due = append(due, create(t, s, CreateExecutionArgs{Priority: i, RunAt: t0.Add(time.Duration(50-i) * time.Second)}))
		}
		leases, err := s.ClaimExecutions(ctx, ClaimArgs{Namespace: "ns", InstanceID: "one", LeaseTTL: time.Minute, Now: t0.Add(50 * time.Minute)}, 50)
		must(t, err)
		if len(leases) != 50 {
			t.Fatalf("claimed %d of 50 due executions", len(leases))
		}
		for i, l := range leases {
			if l.ExecutionID != due[49-i] {
				t.Fatalf("lease %d is %s, want %s", i, l.ExecutionID, due[49-i])
			}
		}
	})
}

// A worker of several lanes claims the best across them and only from
// them; its lanes can change when it registers again.
func TestClaimAcrossLanes(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		worker(t, s, "ns", "i", []string{"a", "b", "c"}, nil)
		notMine := create(t, s, CreateExecutionArgs{Lane: "d", Priority: 100})
		inB := create(t, s, CreateExecutionArgs{Lane: "b", Priority: 5})
		inC := create(t, s, CreateExecutionArgs{Lane: "c", Priority: 7})
		inA := create(t, s, CreateExecutionArgs{Lane: "a", Priority: 5, RunAt: t0.Add(-time.Second)})
		for i, want := range []uuid.UUID{inC, inA, inB} {
			if l := claim(t, s, "i", t0); l.ExecutionID != want {
				t.Fatalf("claim %d took %s, want %s", i, l.ExecutionID, want)
			}
		}
		_, err := s.ClaimExecution(ctx, ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Minute, Now: t0})
		wantErr(t, err, ErrNoWork)
		// Registered again with other lanes: only those.
		_, err = s.RegisterWorker(ctx, RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "i", Lanes: []string{"d", "e"}, TTL: time.Hour, Now: t0})
		must(t, err)
		create(t, s, CreateExecutionArgs{Lane: "a", Priority: 1000})
		if l := claim(t, s, "i", t0); l.ExecutionID != notMine {
			t.Fatalf("after new lanes: claimed %s, want %s", l.ExecutionID, notMine)
		}
		// A worker of no lane claims nothing.
		worker(t, s, "ns", "none", nil, nil)
		_, err = s.ClaimExecution(ctx, ClaimArgs{Namespace: "ns", InstanceID: "none", LeaseTTL: time.Minute, Now: t0})
		wantErr(t, err, ErrNoWork)
		problems, err := s.Check(ctx)
		must(t, err)
		if len(problems) != 0 {
			t.Fatalf("check: %v", problems)
		}
	})
}

// FinishedAt is when an execution became completed, failed or cancelled,
// zero while it is live; the lease fields describe the current lease, then
// the last one.
func TestFinishedAtAndLastLease(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		worker(t, s, "ns", "i", []string{"default"}, nil)
		done := create(t, s, CreateExecutionArgs{})
		l := claim(t, s, "i", t0.Add(time.Second))
		e := getExecution(t, s, done)
		if e.Holder != "i" || !e.ClaimedAt.Equal(t0.Add(time.Second)) || !e.LeaseExpiresAt.Equal(l.ExpiresAt) || !e.FinishedAt.IsZero() {
			t.Fatalf("running: %+v", e)
		}
		must(t, s.CompleteExecution(ctx, CompleteArgs{Lease: l, Now: t0.Add(2 * time.Second)}))
		if e := getExecution(t, s, done); !e.FinishedAt.Equal(t0.Add(2*time.Second)) || e.Holder != "i" {
			t.Fatalf("completed: %+v", e)
		}

		retried := create(t, s, CreateExecutionArgs{MaxAttempts: 2})
		l = claim(t, s, "i", t0.Add(3*time.Second))
		must(t, s.FailExecution(ctx, FailArgs{Lease: l, Reason: "once", Now: t0.Add(4 * time.Second)}))
		if e := getExecution(t, s, retried); e.State != ExecutionWaiting || !e.FinishedAt.IsZero() {
			t.Fatalf("waiting again: %+v", e)
		}
		l = claim(t, s, "i", t0.Add(5*time.Second))
		must(t, s.FailExecution(ctx, FailArgs{Lease: l, Reason: "twice", Now: t0.Add(6 * time.Second)}))
		if e := getExecution(t, s, retried); e.State != ExecutionFailed || !e.FinishedAt.Equal(t0.Add(6*time.Second)) {
			t.Fatalf("failed: %+v", e)
		}

		cancelled := create(t, s, CreateExecutionArgs{})
		must(t, s.CancelExecution(ctx, CancelExecutionArgs{ID: cancelled, Now: t0.Add(7 * time.Second)}))
		if e := getExecution(t, s, cancelled); !e.FinishedAt.Equal(t0.Add(7*time.Second)) || e.Holder != "" || !e.ClaimedAt.IsZero() {
			t.Fatalf("cancelled while waiting: %+v", e)
		}

		reclaimed := create(t, s, CreateExecutionArgs{})
		l = claim(t, s, "i", t0.Add(8*time.Second))
		n, err := s.ReclaimExpiredLeases(ctx, l.ExpiresAt, 0)
		must(t, err)
		if e := getExecution(t, s, reclaimed); n != 1 || e.State != ExecutionFailed || !e.FinishedAt.Equal(l.ExpiresAt) {
			t.Fatalf("reclaimed: %+v", e)
		}
	})
}

// PruneExecutions deletes the executions that finished before a time, with
// their attempts, in batches; it never touches a live one. Sweep does it with
// ExecutionRetention.
func TestPruneExecutions(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		worker(t, s, "ns", "i", []string{"default"}, nil)
		// More finished executions than one batch holds, finished at t0+1s.
		const old = sweepBatchSize*2 + 17
		items := make([]CreateExecutionArgs, old)
		for i := range items {
			items[i] = CreateExecutionArgs{Namespace: "ns", Lane: "default", MaxAttempts: 2}
		}
		_, err := s.CreateExecutions(ctx, items)
		must(t, err)
		leases, err := s.ClaimExecutions(ctx, ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Hour, Now: t0}, old)
		must(t, err)
		for i, l := range leases {
			switch i % 3 {
			case 0:
				must(t, s.CompleteExecution(ctx, CompleteArgs{Lease: l, Now: t0.Add(time.Second)}))
			case 1:
				must(t, s.CancelExecution(ctx, CancelExecutionArgs{ID: l.ExecutionID, Now: t0.Add(time.Second)}))
			default:
				// Fails twice: an attempt of history each time.
				must(t, s.FailExecution(ctx, FailArgs{Lease: l, Now: t0}))
				again := claim(t, s, "i", t0)
				must(t, s.FailExecution(ctx, FailArgs{Lease: again, Now: t0.Add(time.Second)}))
			}
		}
		// Live ones, and one finished later.
		waiting := create(t, s, CreateExecutionArgs{Now: t0.Add(-time.Hour)})
		scheduled := create(t, s, CreateExecutionArgs{RunAt: t0.Add(time.Hour), Now: t0.Add(-time.Hour)})
		running := create(t, s, CreateExecutionArgs{Lane: "busy"})
		worker(t, s, "ns", "busy", []string{"busy"}, nil)
		_ = claim(t, s, "busy", t0)
		recent := create(t, s, CreateExecutionArgs{Lane: "busy"})
		l, err := s.ClaimExecution(ctx, ClaimArgs{Namespace: "ns", InstanceID: "busy", LeaseTTL: 2 * time.Hour, Now: t0})
		must(t, err)
		must(t, s.CompleteExecution(ctx, CompleteArgs{Lease: l, Now: t0.Add(time.Hour)}))

		n, err := s.PruneExecutions(ctx, t0.Add(time.Second)) // before: strictly earlier only
		must(t, err)
		if n != 0 {
			t.Fatalf("pruned %d executions that finished at the cutoff", n)
		}
		n, err = s.PruneExecutions(ctx, t0.Add(time.Minute))
		must(t, err)
		if n != old {
			t.Fatalf("pruned %d, want %d", n, old)
		}
		for _, id := range []uuid.UUID{waiting, scheduled, running, recent} {
			getExecution(t, s, id)
		}
		problems, err := s.Check(ctx)
		must(t, err)
		if len(problems) != 0 {
			t.Fatalf("check: %v", problems)
		}
		// Sweep prunes with the retention; negative keeps everything.
		r, err := s.Sweep(ctx, t0.Add(2*time.Hour), SweeperArgs{ExecutionRetention: -1})
		must(t, err)
		if r.PrunedExecutions != 0 {
			t.Fatalf("a negative retention pruned %d", r.PrunedExecutions)
		}
		r, err = s.Sweep(ctx, t0.Add(2*time.Hour), SweeperArgs{ExecutionRetention: 30 * time.Minute})
		must(t, err)
		if r.PrunedExecutions != 1 {
			t.Fatalf("sweep pruned %d, want the one finished at t0+1h", r.PrunedExecutions)
		}
		_, err = s.GetExecution(ctx, recent)
		wantErr(t, err, ErrNotFound)
		// The default retention is 7 days. The sweeps at t0+2h swept the
		// workers (their TTL is an hour) and failed the running execution
		// (its lease expired) at t0+2h; another finishes then too.
		if e := getExecution(t, s, running); e.State != ExecutionFailed || !e.FinishedAt.Equal(t0.Add(2*time.Hour)) {
			t.Fatalf("the reclaimed execution: %+v", e)
		}
		_, err = s.RegisterWorker(ctx, RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "i", Lanes: []string{"default"}, TTL: time.Hour, Now: t0.Add(2 * time.Hour)})
		must(t, err)
		l = claim(t, s, "i", t0.Add(2*time.Hour))
		must(t, s.CompleteExecution(ctx, CompleteArgs{Lease: l, Now: t0.Add(2 * time.Hour)}))
		for _, tc := range []struct {
			at   time.Duration
			want int
		}{{7*24*time.Hour + 2*time.Hour, 0}, {7*24*time.Hour + 2*time.Hour + time.Millisecond, 2}} {
			r, err := s.Sweep(ctx, t0.Add(tc.at), SweeperArgs{})
			must(t, err)
			if r.PrunedExecutions != tc.want {
				t.Fatalf("sweep at +%v pruned %d, want %d", tc.at, r.PrunedExecutions, tc.want)
			}
		}
		_, err = s.Sweep(ctx, time.Time{}, SweeperArgs{ExecutionRetention: 200 * 365 * 24 * time.Hour})
		wantErr(t, err, ErrInvalidInput)
	})
}

// Migration 9 moved the current lease onto the execution and made attempts
// history: down to 8 and up again, every execution reads the same, the
// running lease still completes, and the database is sound at each step.
func TestLeaseMigrationRoundTrip(t *testing.T) {
	conformanceShared(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		loc := b.fresh(t)
		s, _ := b.open(t, loc)
		worker(t, s, "ns", "i", []string{"default"}, nil)
		ids := map[string]uuid.UUID{}
		ids["completed"] = create(t, s, CreateExecutionArgs{})
		l := claim(t, s, "i", t0)
		must(t, s.CompleteExecution(ctx, CompleteArgs{Lease: l, Result: []byte("ok"), Now: t0.Add(time.Second)}))
		ids["failed twice"] = create(t, s, CreateExecutionArgs{MaxAttempts: 2})
		for range 2 {
			l = claim(t, s, "i", t0.Add(2*time.Second))
			must(t, s.FailExecution(ctx, FailArgs{Lease: l, Reason: "no", Now: t0.Add(2 * time.Second)}))
		}
		ids["cancelled running"] = create(t, s, CreateExecutionArgs{})
		l = claim(t, s, "i", t0.Add(4*time.Second))
		must(t, s.CancelExecution(ctx, CancelExecutionArgs{ID: l.ExecutionID, Reason: "stop", Now: t0.Add(5 * time.Second)}))
		ids["released"] = create(t, s, CreateExecutionArgs{Priority: -1})
		l = claim(t, s, "i", t0.Add(6*time.Second))
		must(t, s.ReleaseLease(ctx, ReleaseArgs{Lease: l, Now: t0.Add(6 * time.Second)}))
		ids["scheduled"] = create(t, s, CreateExecutionArgs{RunAt: t0.Add(24 * 365 * time.Hour), Priority: 9})
		ids["running"] = create(t, s, CreateExecutionArgs{Priority: 5})
		running, err := s.ClaimExecution(ctx, ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: 30 * time.Minute, Now: t0.Add(7 * time.Second)})
		must(t, err)
		if running.ExecutionID != ids["running"] {
			t.Fatalf("claimed %s", running.ExecutionID)
		}
		before := map[string]Execution{}
		for name, id := range ids {
			before[name] = getExecution(t, s, id)
		}
		must(t, s.Close())

		_, latest, err := SchemaVersion(ctx, loc)
		must(t, err)
		must(t, MigrateDown(ctx, b.direct(t, loc), latest-8)) // every migration after 8, as the schema's owner
		if v, _, err := SchemaVersion(ctx, loc); err != nil || v != 8 {
			t.Fatalf("version %d, %v", v, err)
		}
		if b.migrated {
			migrateAsOwner(t, b.direct(t, loc))
		}
		s, _ = b.open(t, loc) // migrates up again (unless the owner did)
		problems, err := s.Check(ctx)
		must(t, err)
		if len(problems) != 0 {
			t.Fatalf("check after the round trip: %v", problems)
		}
		for name, id := range ids {
			got, want := getExecution(t, s, id), before[name]
			if name == "released" {
				// Schema 8 kept no trace of a released lease.
				want.Holder, want.ClaimedAt, want.LeaseExpiresAt = "", time.Time{}, time.Time{}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s after the round trip:\n got %+v\nwant %+v", name, got, want)
			}
		}
		// The running lease holds on: it renews and completes.
		_, err = s.RenewLease(ctx, RenewLeaseArgs{Lease: running, TTL: time.Minute, Now: t0.Add(8 * time.Second)})
		must(t, err)
		must(t, s.CompleteExecution(ctx, CompleteArgs{Lease: running, Now: t0.Add(9 * time.Second)}))
	})
}
