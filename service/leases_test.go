package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

func worker(t testing.TB, s *Store, ns, inst string, lanes, caps []string) {
	t.Helper()
	_, err := s.RegisterWorker(context.Background(), RegisterWorkerArgs{
		Namespace: ns, WorkerID: "w", InstanceID: inst, Lanes: lanes, Capabilities: caps, TTL: time.Hour, Now: t0,
	})
	must(t, err)
}

func create(t testing.TB, s *Store, a CreateExecutionArgs) uuid.UUID {
	t.Helper()
	if a.Namespace == "" {
		a.Namespace = "ns"
	}
	if a.Lane == "" {
		a.Lane = "default"
	}
	id, err := s.CreateExecution(context.Background(), a)
	must(t, err)
	return id
}

func claim(t testing.TB, s *Store, inst string, now time.Time) Lease {
	t.Helper()
	l, err := s.ClaimExecution(context.Background(), ClaimArgs{Namespace: "ns", InstanceID: inst, LeaseTTL: time.Minute, Now: now})
	must(t, err)
	return l
}

func TestCreateAndGetExecution(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		s, clock := b.newStore(t)
		{
			ctx := context.Background()
			clock.Advance(1500 * time.Microsecond)
			id := create(t, s, CreateExecutionArgs{
				Lane: "images", Payload: []byte{0, 1, 0xff}, Priority: -3,
				RequiredCapabilities: []string{"gpu", "a,b", "gpu"},
			})
			if id.Version() != 7 {
				t.Fatalf("id %s is not a UUIDv7", id)
			}
			e, err := s.GetExecution(ctx, id)
			must(t, err)
			want := Execution{
				ID: id, Namespace: "ns", Lane: "images", State: ExecutionWaiting, Priority: -3,
				Payload: []byte{0, 1, 0xff}, RequiredCapabilities: []string{"a,b", "gpu"},
				MaxAttempts: 1, CreatedAt: t0.Add(time.Millisecond),
			}
			if e.ID != want.ID || e.State != want.State || e.Priority != want.Priority || !bytes.Equal(e.Payload, want.Payload) ||
				!slices.Equal(e.RequiredCapabilities, want.RequiredCapabilities) || e.MaxAttempts != 1 ||
				!e.CreatedAt.Equal(want.CreatedAt) || e.Result != nil || e.Attempts != 0 || e.LastError != "" {
				t.Fatalf("got %+v\nwant %+v", e, want)
			}
			_, err = s.GetExecution(ctx, uuid.New())
			wantErr(t, err, ErrNotFound)
		}
	})
}

func TestExecutionInputValidation(t *testing.T) {
	validationOnly(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		worker(t, s, "ns", "i", []string{"default"}, nil)
		for name, a := range map[string]CreateExecutionArgs{
			"empty namespace":      {Lane: "l"},
			"empty lane":           {Namespace: "ns"},
			"bad capability":       {Namespace: "ns", Lane: "l", RequiredCapabilities: []string{"\x07"}},
			"negative MaxAttempts": {Namespace: "ns", Lane: "l", MaxAttempts: -1},
			"payload over 16 MiB":  {Namespace: "ns", Lane: "default", Payload: make([]byte, 16<<20+1)},
		} {
			t.Run("create/"+name, func(t *testing.T) {
				_, err := s.CreateExecution(ctx, a)
				wantErr(t, err, ErrInvalidInput)
			})
		}
		_, err := s.ClaimExecution(ctx, ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Minute})
		wantErr(t, err, ErrNoWork) // nothing was written by the invalid creates
		for name, a := range map[string]ClaimArgs{
			"zero TTL":      {Namespace: "ns", InstanceID: "i"},
			"TTL too long":  {Namespace: "ns", InstanceID: "i", LeaseTTL: 31 * 24 * time.Hour},
			"bad instance":  {Namespace: "ns", InstanceID: "", LeaseTTL: time.Second},
			"bad namespace": {Namespace: strings.Repeat("n", 300), InstanceID: "i", LeaseTTL: time.Second},
		} {
			t.Run("claim/"+name, func(t *testing.T) {
				_, err := s.ClaimExecution(ctx, a)
				wantErr(t, err, ErrInvalidInput)
			})
		}
		create(t, s, CreateExecutionArgs{})
		l := claim(t, s, "i", t0)
		_, err = s.RenewLease(ctx, RenewLeaseArgs{Lease: l, TTL: 0, Now: t0})
		wantErr(t, err, ErrInvalidInput)
		wantErr(t, s.FailExecution(ctx, FailArgs{Lease: l, Reason: strings.Repeat("x", 4097), Now: t0}), ErrInvalidInput)
		wantErr(t, s.FailExecution(ctx, FailArgs{Lease: l, Reason: "\xff", Now: t0}), ErrInvalidInput)
		wantErr(t, s.FailExecution(ctx, FailArgs{Lease: l, Reason: "nul\x00", Now: t0}), ErrInvalidInput)
		wantErr(t, s.CompleteExecution(ctx, CompleteArgs{Lease: l, Result: make([]byte, 16<<20+1), Now: t0}), ErrInvalidInput)
		for name, a := range map[string]ListExpiredLeasesArgs{
			"negative limit": {Limit: -1},
			"garbage cursor": {After: "###"},
			"agent cursor":   {After: encodeCursor(agentsCursor, "x")},
			"bad id cursor":  {After: encodeCursor(leasesCursor, 5, "not-a-uuid")},
			"bad namespace":  {Namespace: "a\x00"},
		} {
			t.Run("list/"+name, func(t *testing.T) {
				_, err := s.ListExpiredLeases(ctx, a)
				wantErr(t, err, ErrInvalidInput)
			})
		}
		_, err = s.ReclaimExpiredLeases(ctx, t0, -1)
		wantErr(t, err, ErrInvalidInput)
		e, err := s.GetExecution(ctx, l.ExecutionID)
		must(t, err)
		if e.State != ExecutionRunning || e.LastError != "" {
			t.Fatalf("invalid calls changed the execution: %+v", e)
		}
	})
}

func TestClaimRequiresLiveWorker(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		create(t, s, CreateExecutionArgs{})
		_, err := s.ClaimExecution(ctx, ClaimArgs{Namespace: "ns", InstanceID: "ghost", LeaseTTL: time.Minute, Now: t0})
		wantErr(t, err, ErrNotRegistered)
		worker(t, s, "ns", "i", []string{"default"}, nil) // TTL 1h from t0
		_, err = s.ClaimExecution(ctx, ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Minute, Now: t0.Add(time.Hour)})
		wantErr(t, err, ErrNotRegistered) // lapsed, not yet swept
		worker(t, s, "other", "j", []string{"default"}, nil)
		_, err = s.ClaimExecution(ctx, ClaimArgs{Namespace: "other", InstanceID: "j", LeaseTTL: time.Minute, Now: t0})
		wantErr(t, err, ErrNoWork) // another namespace's work is invisible
		claim(t, s, "i", t0.Add(time.Hour-time.Millisecond))
	})
}

func TestClaimMatching(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		for _, tc := range []struct {
			name      string
			lanes     []string
			caps      []string
			execLane  string
			execCaps  []string
			claimable bool
		}{
			{"lane match, no caps", []string{"a", "b"}, nil, "b", nil, true},
			{"other lane", []string{"a"}, nil, "b", nil, false},
			{"no lanes", nil, []string{"gpu"}, "a", nil, false},
			{"caps subset", []string{"a"}, []string{"gpu", "ssd", "x,y"}, "a", []string{"x,y", "gpu"}, true},
			{"caps equal", []string{"a"}, []string{"gpu"}, "a", []string{"gpu"}, true},
			{"cap missing", []string{"a"}, []string{"gpu"}, "a", []string{"gpu", "ssd"}, false},
			{"comma is not a separator", []string{"a"}, []string{"x", "y"}, "a", []string{"x,y"}, false},
			{"lane with comma", []string{"a,b"}, nil, "a,b", nil, true},
			{"lane prefix is not a match", []string{"a,b"}, nil, "a", nil, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				s, _ := b.newStore(t)
				worker(t, s, "ns", "i", tc.lanes, tc.caps)
				id := create(t, s, CreateExecutionArgs{Lane: tc.execLane, RequiredCapabilities: tc.execCaps})
				l, err := s.ClaimExecution(context.Background(), ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Minute, Now: t0})
				if !tc.claimable {
					wantErr(t, err, ErrNoWork)
					return
				}
				must(t, err)
				if l.ExecutionID != id {
					t.Fatalf("claimed %s, want %s", l.ExecutionID, id)
				}
			})
		}
	})
}

func TestClaimOrder(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		worker(t, s, "ns", "i", []string{"a", "b"}, []string{"gpu"})
		// Created in this order; expected claim order: priority desc, then oldest.
		low := create(t, s, CreateExecutionArgs{Lane: "a", Priority: 1, Now: t0})
		highNew := create(t, s, CreateExecutionArgs{Lane: "b", Priority: 5, Now: t0.Add(2 * time.Second)})
		highOld := create(t, s, CreateExecutionArgs{Lane: "a", Priority: 5, Now: t0.Add(time.Second)})
		create(t, s, CreateExecutionArgs{Lane: "a", Priority: 9, RequiredCapabilities: []string{"tpu"}}) // never matches
		create(t, s, CreateExecutionArgs{Lane: "c", Priority: 9})                                        // other lane
		neg := create(t, s, CreateExecutionArgs{Lane: "b", Priority: -1, Now: t0})
		sameMs1 := create(t, s, CreateExecutionArgs{Lane: "a", Priority: 0, Now: t0.Add(time.Minute)})
		sameMs2 := create(t, s, CreateExecutionArgs{Lane: "b", Priority: 0, Now: t0.Add(time.Minute)})
		want := []uuid.UUID{highOld, highNew, low, sameMs1, sameMs2, neg}
		for i, w := range want {
			l := claim(t, s, "i", t0.Add(time.Hour-time.Minute))
			if l.ExecutionID != w {
				t.Fatalf("claim %d got %s, want %s", i, l.ExecutionID, w)
			}
		}
		_, err := s.ClaimExecution(ctx, ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Minute, Now: t0})
		wantErr(t, err, ErrNoWork)
	})
}

func TestLeaseLifecycle(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, clock := b.newStore(t)
		worker(t, s, "ns", "i", []string{"default"}, nil)
		id := create(t, s, CreateExecutionArgs{Payload: []byte("job"), MaxAttempts: 3})
		clock.Advance(time.Second)
		l, err := s.ClaimExecution(ctx, ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: 10 * time.Second})
		must(t, err)
		if l.ExecutionID != id || l.AttemptIndex != 1 || l.Epoch < 1 || l.LeaseID == uuid.Nil || l.Namespace != "ns" ||
			l.InstanceID != "i" || l.Lane != "default" || string(l.Payload) != "job" || !l.ExpiresAt.Equal(t0.Add(11*time.Second)) {
			t.Fatalf("lease %+v", l)
		}
		e, err := s.GetExecution(ctx, id)
		must(t, err)
		if e.State != ExecutionRunning || e.Attempts != 1 {
			t.Fatalf("after claim: %+v", e)
		}

		// Renew before expiry moves the expiry; at expiry the lease is lost.
		exp, err := s.RenewLease(ctx, RenewLeaseArgs{Lease: l, TTL: 20 * time.Second, Now: t0.Add(11*time.Second - time.Millisecond)})
		must(t, err)
		if !exp.Equal(t0.Add(31*time.Second - time.Millisecond)) {
			t.Fatalf("renewed to %v", exp)
		}
		_, err = s.RenewLease(ctx, RenewLeaseArgs{Lease: l, TTL: time.Second, Now: exp})
		wantErr(t, err, ErrLeaseLost)
		wantErr(t, s.CompleteExecution(ctx, CompleteArgs{Lease: l, Now: exp}), ErrLeaseLost)
		wantErr(t, s.FailExecution(ctx, FailArgs{Lease: l, Now: exp.Add(time.Hour)}), ErrLeaseLost)

		// A forged epoch is fenced; the real lease completes once.
		forged := l
		forged.Epoch++
		wantErr(t, s.CompleteExecution(ctx, CompleteArgs{Lease: forged, Result: []byte("evil"), Now: t0.Add(12 * time.Second)}), ErrLeaseLost)
		must(t, s.CompleteExecution(ctx, CompleteArgs{Lease: l, Result: []byte("done"), Now: t0.Add(12 * time.Second)}))
		wantErr(t, s.CompleteExecution(ctx, CompleteArgs{Lease: l, Result: []byte("again"), Now: t0.Add(12 * time.Second)}), ErrLeaseLost)
		_, err = s.RenewLease(ctx, RenewLeaseArgs{Lease: l, TTL: time.Second, Now: t0.Add(12 * time.Second)})
		wantErr(t, err, ErrLeaseLost)
		e, err = s.GetExecution(ctx, id)
		must(t, err)
		if e.State != ExecutionCompleted || string(e.Result) != "done" {
			t.Fatalf("after complete: %+v", e)
		}
		_, err = s.ClaimExecution(ctx, ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Minute})
		wantErr(t, err, ErrNoWork)
	})
}

// TestFenceComparesTheLeaseID: a lease that names the current execution and
// epoch but another lease id (the claim a database lost and then issued
// again, after a failover) is lost for every call that presents it, and
// changes nothing; the current lease is untouched by them.
func TestFenceComparesTheLeaseID(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		worker(t, s, "ns", "i", []string{"default"}, nil)
		id := create(t, s, CreateExecutionArgs{MaxAttempts: 3})
		l, err := s.ClaimExecution(ctx, ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Minute})
		must(t, err)
		forged := l
		forged.LeaseID = uuid.Must(uuid.NewV7())
		_, err = s.RenewLease(ctx, RenewLeaseArgs{Lease: forged, TTL: time.Hour})
		wantErr(t, err, ErrLeaseLost)
		wantErr(t, s.CompleteExecution(ctx, CompleteArgs{Lease: forged, Result: []byte("not mine")}), ErrLeaseLost)
		wantErr(t, s.FailExecution(ctx, FailArgs{Lease: forged, Reason: "not mine"}), ErrLeaseLost)
		wantErr(t, s.ReleaseLease(ctx, ReleaseArgs{Lease: forged}), ErrLeaseLost)
		e, err := s.GetExecution(ctx, id)
		must(t, err)
		if e.State != ExecutionRunning || e.Attempts != 1 || e.LastError != "" || e.Result != nil || !e.LeaseExpiresAt.Equal(l.ExpiresAt) {
			t.Fatalf("after the forged lease's calls: %+v", e)
		}
		must(t, s.CompleteExecution(ctx, CompleteArgs{Lease: l, Result: []byte("mine")}))
		if e, _ := s.GetExecution(ctx, id); e.State != ExecutionCompleted || string(e.Result) != "mine" {
			t.Fatalf("after the lease's completion: %+v", e)
		}
	})
}

// TestClaimableAtOnceWhateverTheClock: work made claimable at once (created
// without a RunAt, failed or reclaimed with no backoff, released, redriven
// to now) is claimable at once by a worker whose clock reads behind the
// clock that made it so, as it does on another host; work scheduled for
// later still waits for its RunAt.
func TestClaimableAtOnceWhateverTheClock(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		worker(t, s, "ns", "i", []string{"default"}, nil)
		behind := func(at time.Time) time.Time { return at.Add(-20 * time.Millisecond) }
		at := t0.Add(time.Second)
		id := create(t, s, CreateExecutionArgs{MaxAttempts: 5, Now: at})
		l := claim(t, s, "i", behind(at))
		if l.ExecutionID != id {
			t.Fatalf("claimed %s, want %s", l.ExecutionID, id)
		}
		at = at.Add(time.Second)
		must(t, s.FailExecution(ctx, FailArgs{Lease: l, Reason: "again", Now: at}))
		l = claim(t, s, "i", behind(at))
		at = at.Add(time.Second)
		must(t, s.ReleaseLease(ctx, ReleaseArgs{Lease: l, Now: at}))
		l = claim(t, s, "i", behind(at))
		at = at.Add(time.Second)
		must(t, s.CancelExecution(ctx, CancelExecutionArgs{ID: id, Reason: "stop", Now: at}))
		at = at.Add(time.Second)
		must(t, s.RetryExecution(ctx, RetryExecutionArgs{ID: id, Now: at}))
		l = claim(t, s, "i", behind(at))
		if l.ExecutionID != id || l.AttemptIndex != 3 {
			t.Fatalf("the redriven execution's lease: %+v", l)
		}

		// Scheduled work waits for its RunAt by the claimer's clock.
		runAt := at.Add(time.Minute)
		later := create(t, s, CreateExecutionArgs{RunAt: runAt, Now: at})
		_, err := s.ClaimExecution(ctx, ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Minute, Now: runAt.Add(-time.Millisecond)})
		wantErr(t, err, ErrNoWork)
		if l := claim(t, s, "i", runAt); l.ExecutionID != later {
			t.Fatalf("claimed %s at its RunAt, want %s", l.ExecutionID, later)
		}
	})
}

// dueBacklog is more due executions than one claim makes ready before it
// claims (SQLite: promoteBatch; PostgreSQL: maxPromotions rounds of 1000).
const dueBacklog = 4001

// createDue creates n executions of one lane whose RunAt, given by the
// caller, the creator's clock has passed, in batches.
func createDue(t *testing.T, s *Store, lane string, n, priority int, runAt, now time.Time) {
	t.Helper()
	for n > 0 {
		k := min(n, 10000)
		items := make([]CreateExecutionArgs, k)
		for i := range items {
			items[i] = CreateExecutionArgs{Namespace: "ns", Lane: lane, Priority: priority, RunAt: runAt, Now: now}
		}
		_, err := s.CreateExecutions(context.Background(), items)
		must(t, err)
		n -= k
	}
}

// Work given a RunAt its creator's clock has reached (RunAt: time.Now(), as
// callers write it) is claimable at once, as work given none is: a backlog
// of such work in a lane the worker does not serve, or of lower priority,
// never hides the worker's best execution behind a claim's bounded
// promotion of scheduled work.
func TestClaimTakesDueRunAtWorkAtOnce(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		worker(t, s, "ns", "i", []string{"default"}, nil)
		at := t0.Add(time.Second)
		createDue(t, s, "other", dueBacklog, 0, at.Add(-time.Second), at)
		createDue(t, s, "default", dueBacklog, 0, at.Add(-time.Second), at)
		urgent := create(t, s, CreateExecutionArgs{Priority: 10, RunAt: at, Now: at})
		// Behind it, even by a claimer whose clock reads 20 ms earlier.
		l, err := s.ClaimExecution(ctx, ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Minute, Now: at.Add(-20 * time.Millisecond)})
		must(t, err)
		if l.ExecutionID != urgent {
			e, err := s.GetExecution(ctx, l.ExecutionID)
			must(t, err)
			t.Fatalf("claimed %s (priority %d, lane %s), want %s (priority 10)", l.ExecutionID, e.Priority, l.Lane, urgent)
		}
	})
}

func TestRetriesUpToMaxAttempts(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		worker(t, s, "ns", "i", []string{"default"}, nil)
		id := create(t, s, CreateExecutionArgs{MaxAttempts: 3})
		var prev Lease
		for attempt := 1; attempt <= 3; attempt++ {
			l := claim(t, s, "i", t0)
			if l.AttemptIndex != attempt || (attempt > 1 && (l.Epoch <= prev.Epoch || l.LeaseID == prev.LeaseID)) {
				t.Fatalf("attempt %d: lease %+v after %+v", attempt, l, prev)
			}
			if attempt > 1 {
				// The previous attempt's lease is fenced.
				_, err := s.RenewLease(ctx, RenewLeaseArgs{Lease: prev, TTL: time.Minute, Now: t0})
				wantErr(t, err, ErrLeaseLost)
			}
			reason := fmt.Sprintf("boom %d\nwith a trace", attempt)
			must(t, s.FailExecution(ctx, FailArgs{Lease: l, Reason: reason, Now: t0}))
			e, err := s.GetExecution(ctx, id)
			must(t, err)
			wantState := ExecutionWaiting
			if attempt == 3 {
				wantState = ExecutionFailed
			}
			if e.State != wantState || e.Attempts != attempt || e.LastError != reason {
				t.Fatalf("after failure %d: %+v", attempt, e)
			}
			prev = l
		}
		_, err := s.ClaimExecution(ctx, ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Minute, Now: t0})
		wantErr(t, err, ErrNoWork)
	})
}

func TestExpiredLeaseListing(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		for _, ns := range []string{"a", "b"} {
			_, err := s.RegisterWorker(ctx, RegisterWorkerArgs{Namespace: ns, WorkerID: "w", InstanceID: "i", Lanes: []string{"l"}, TTL: time.Hour, Now: t0})
			must(t, err)
		}
		// 9 leases: expiries tie in threes; namespaces alternate.
		var want []ExpiredLease
		for k := range 9 {
			ns := []string{"a", "b"}[k%2]
			_, err := s.CreateExecution(ctx, CreateExecutionArgs{Namespace: ns, Lane: "l", Now: t0})
			must(t, err)
			ttl := time.Duration(1+k/3) * time.Second
			l, err := s.ClaimExecution(ctx, ClaimArgs{Namespace: ns, InstanceID: "i", LeaseTTL: ttl, Now: t0})
			must(t, err)
			want = append(want, ExpiredLease{ExecutionID: l.ExecutionID, LeaseID: l.LeaseID, AttemptIndex: 1, Epoch: l.Epoch,
				Namespace: ns, InstanceID: "i", ExpiresAt: l.ExpiresAt})
		}
		slices.SortFunc(want, func(x, y ExpiredLease) int {
			if c := x.ExpiresAt.Compare(y.ExpiresAt); c != 0 {
				return c
			}
			return strings.Compare(x.ExecutionID.String(), y.ExecutionID.String())
		})
		collect := func(a ListExpiredLeasesArgs) ([]ExpiredLease, int) {
			var out []ExpiredLease
			pages := 0
			for {
				page, err := s.ListExpiredLeases(ctx, a)
				must(t, err)
				pages++
				out = append(out, page.Leases...)
				if page.Next == "" {
					return out, pages
				}
				if len(page.Leases) != a.Limit {
					t.Fatalf("short page with a cursor")
				}
				a.After = page.Next
			}
		}
		filter := func(ns string, asOf time.Time) []ExpiredLease {
			var out []ExpiredLease
			for _, l := range want {
				if (ns == "" || l.Namespace == ns) && !l.ExpiresAt.After(asOf) {
					out = append(out, l)
				}
			}
			return out
		}
		for _, tc := range []struct {
			ns        string
			asOf      time.Duration
			limit     int
			wantPages int
		}{
			{"", 3 * time.Second, 3, 3}, // exactly full last page
			{"", 3 * time.Second, 2, 5},
			{"", 3 * time.Second, 0, 1},
			{"", 2 * time.Second, 4, 2},     // only leases expired by then
			{"", time.Second - 1, 4, 1},     // nothing expired yet
			{"a", 3 * time.Second, 2, 3},    // 5 leases in a
			{"b", 3 * time.Second, 4, 1},    // 4 leases in b, exactly one full page
			{"b", 2 * time.Second, 10, 1},   // partial
			{"zzz", 3 * time.Second, 10, 1}, // unknown namespace
		} {
			t.Run(fmt.Sprintf("ns=%q asOf=%v limit=%d", tc.ns, tc.asOf, tc.limit), func(t *testing.T) {
				asOf := t0.Add(tc.asOf)
				got, pages := collect(ListExpiredLeasesArgs{AsOf: asOf, Namespace: tc.ns, Limit: tc.limit})
				exp := filter(tc.ns, asOf)
				if !slices.Equal(got, exp) || pages != tc.wantPages {
					t.Fatalf("got %d leases in %d pages, want %d in %d\n got %+v\nwant %+v", len(got), pages, len(exp), tc.wantPages, got, exp)
				}
			})
		}
		// Lease ids are stable across calls.
		again, _ := collect(ListExpiredLeasesArgs{AsOf: t0.Add(time.Hour)})
		if !slices.Equal(again, want) {
			t.Fatal("a second listing differs")
		}
	})
}

func TestReclaim(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		worker(t, s, "ns", "i", []string{"default"}, nil)
		retry := create(t, s, CreateExecutionArgs{MaxAttempts: 2, Now: t0})
		once := create(t, s, CreateExecutionArgs{MaxAttempts: 1, Now: t0.Add(time.Millisecond)})
		// Both claimable from t0+1ms (RunAt = creation time); leases until t0+1m+1ms.
		l1 := claim(t, s, "i", t0.Add(time.Millisecond))
		l2 := claim(t, s, "i", t0.Add(time.Millisecond))
		if l1.ExecutionID != retry || l2.ExecutionID != once {
			t.Fatal("unexpected claim order")
		}
		n, err := s.ReclaimExpiredLeases(ctx, t0.Add(time.Minute), 0)
		must(t, err)
		if n != 0 {
			t.Fatalf("reclaimed %d live leases", n)
		}
		n, err = s.ReclaimExpiredLeases(ctx, t0.Add(time.Minute+time.Millisecond), 1) // limit 1
		must(t, err)
		if n != 1 {
			t.Fatalf("reclaimed %d with limit 1", n)
		}
		n, err = s.ReclaimExpiredLeases(ctx, t0.Add(time.Minute+time.Millisecond), 0)
		must(t, err)
		if n != 1 {
			t.Fatalf("reclaimed %d, want the remaining 1", n)
		}
		e, err := s.GetExecution(ctx, retry)
		must(t, err)
		if e.State != ExecutionWaiting || e.ReclaimCount != 1 || e.Attempts != 1 {
			t.Fatalf("retryable after reclaim: %+v", e)
		}
		e, err = s.GetExecution(ctx, once)
		must(t, err)
		if e.State != ExecutionFailed || !strings.Contains(e.LastError, "lease expired") {
			t.Fatalf("exhausted after reclaim: %+v", e)
		}
		// The old holders are fenced, even before anyone reclaims the work again.
		for _, l := range []Lease{l1, l2} {
			wantErr(t, s.CompleteExecution(ctx, CompleteArgs{Lease: l, Now: t0}), ErrLeaseLost)
			_, err := s.RenewLease(ctx, RenewLeaseArgs{Lease: l, TTL: time.Hour, Now: t0})
			wantErr(t, err, ErrLeaseLost)
		}
		page, err := s.ListExpiredLeases(ctx, ListExpiredLeasesArgs{AsOf: t0.Add(time.Hour)})
		must(t, err)
		if len(page.Leases) != 0 {
			t.Fatalf("reclaimed leases still listed: %+v", page.Leases)
		}
		l3 := claim(t, s, "i", t0.Add(2*time.Minute))
		if l3.ExecutionID != retry || l3.AttemptIndex != 2 || l3.Epoch <= l1.Epoch {
			t.Fatalf("re-claim: %+v", l3)
		}
		wantErr(t, s.FailExecution(ctx, FailArgs{Lease: l1, Now: t0.Add(2 * time.Minute)}), ErrLeaseLost)
		must(t, s.CompleteExecution(ctx, CompleteArgs{Lease: l3, Now: t0.Add(2 * time.Minute)}))
	})
}

func TestDeadWorkersLeasesExpireAtOnce(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		for _, how := range []string{"marked dead", "swept"} {
			t.Run(how, func(t *testing.T) {
				s, _ := b.newStore(t)
				_, err := s.RegisterWorker(ctx, RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "doomed", Lanes: []string{"default"}, TTL: 10 * time.Second, Now: t0})
				must(t, err)
				worker(t, s, "ns", "other", []string{"default"}, nil)
				create(t, s, CreateExecutionArgs{})
				create(t, s, CreateExecutionArgs{})
				dl := claim(t, s, "doomed", t0) // lease until t0+1m
				ol := claim(t, s, "other", t0)
				at := t0.Add(10 * time.Second)
				if how == "marked dead" {
					must(t, s.MarkWorkerDead(ctx, MarkWorkerDeadArgs{Namespace: "ns", InstanceID: "doomed", Reason: "oom", Now: at}))
				} else {
					n, err := s.SweepExpiredWorkers(ctx, at)
					must(t, err)
					if n != 1 {
						t.Fatalf("swept %d", n)
					}
				}
				page, err := s.ListExpiredLeases(ctx, ListExpiredLeasesArgs{AsOf: at})
				must(t, err)
				if len(page.Leases) != 1 || page.Leases[0].LeaseID != dl.LeaseID || !page.Leases[0].ExpiresAt.Equal(at) {
					t.Fatalf("expired leases %+v", page.Leases)
				}
				wantErr(t, s.CompleteExecution(ctx, CompleteArgs{Lease: dl, Now: at}), ErrLeaseLost)
				// The ended lease is lost for good: a call that passes a time
				// before the death does not bring it back.
				before := at.Add(-5 * time.Second)
				_, err = s.RenewLease(ctx, RenewLeaseArgs{Lease: dl, TTL: time.Hour, Now: before})
				wantErr(t, err, ErrLeaseLost)
				wantErr(t, s.CompleteExecution(ctx, CompleteArgs{Lease: dl, Now: before}), ErrLeaseLost)
				wantErr(t, s.FailExecution(ctx, FailArgs{Lease: dl, Reason: "x", Now: before}), ErrLeaseLost)
				page, err = s.ListExpiredLeases(ctx, ListExpiredLeasesArgs{AsOf: at})
				must(t, err)
				if len(page.Leases) != 1 || !page.Leases[0].ExpiresAt.Equal(at) {
					t.Fatalf("after the dead holder's calls: expired leases %+v", page.Leases)
				}
				n, err := s.ReclaimExpiredLeases(ctx, at, 0)
				must(t, err)
				if n != 1 {
					t.Fatalf("reclaimed %d", n)
				}
				// The live worker's lease is untouched.
				_, err = s.RenewLease(ctx, RenewLeaseArgs{Lease: ol, TTL: time.Minute, Now: at})
				must(t, err)
			})
		}
	})
}

func TestConcurrentClaimsAreExclusive(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		const workers, executions = 8, 300
		for w := range workers {
			worker(t, s, "ns", fmt.Sprintf("w%d", w), []string{"default"}, nil)
		}
		for range executions {
			create(t, s, CreateExecutionArgs{})
		}
		var mu sync.Mutex
		claimed := map[uuid.UUID]int{}
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					l, err := s.ClaimExecution(ctx, ClaimArgs{Namespace: "ns", InstanceID: fmt.Sprintf("w%d", w), LeaseTTL: time.Minute, Now: t0})
					if err != nil {
						if !errors.Is(err, ErrNoWork) {
							errs <- err
						}
						return
					}
					mu.Lock()
					claimed[l.ExecutionID]++
					mu.Unlock()
					if err := s.CompleteExecution(ctx, CompleteArgs{Lease: l, Now: t0}); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if len(claimed) != executions {
			t.Fatalf("%d executions claimed, want %d", len(claimed), executions)
		}
		for id, n := range claimed {
			if n != 1 {
				t.Fatalf("%s claimed %d times", id, n)
			}
		}
	})
}
