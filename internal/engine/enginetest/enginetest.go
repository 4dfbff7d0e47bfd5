// Package enginetest holds the tests every engine passes at the seam (below
// service's conformance suite), in the manner of River's riverdrivertest:
// one test per method of engine.Engine and engine.Queries, named after the
// method, its behaviours as subtests (workers.go, executions.go, leases.go,
// claim.go, fleet.go, agents.go, stats.go, engine.go), plus the tests that
// cross methods: the translation of constraint violations, the fences'
// comparison of lease ids and the claims of a lane's turns against a model. A guard fails when a method has no test. Each
// engine's tests call Run with a Harness of its own.
package enginetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/rosterdb/roster/internal/engine"
)

// Harness is how the seam tests reach an engine.
type Harness struct {
	// Fresh returns the location of a new, empty database.
	Fresh func(t *testing.T) string
	// Open opens an engine on loc, closed when the test ends. Two engines
	// opened on one location share the database.
	Open func(t *testing.T, loc string) engine.Engine
	// Exec runs SQL on loc outside roster (fixtures).
	Exec func(t *testing.T, loc, sql string)
	// Refuse is SQL that makes the database refuse (with an error of its
	// own, as a broken row would) any change that stores the result "boom"
	// in an execution.
	Refuse string
}

// Run runs the seam tests, each on a fresh database: the tests across
// methods, then the table of per-method tests in the order of the methods'
// names, then the guard that every method has a test.
func Run(t *testing.T, h Harness) {
	open := func(t *testing.T) engine.Engine { return h.Open(t, h.Fresh(t)) }
	t.Run("Translate", func(t *testing.T) { testTranslate(t, open(t)) })
	t.Run("FencesCompareTheLeaseID", func(t *testing.T) { testFenceLeaseID(t, h) })
	t.Run("TurnsFollowTheModel", func(t *testing.T) { testTurnsFollowTheModel(t, h) })
	tests := methodTests()
	runMethodTests(t, h, tests)
	t.Run("EveryMethodHasATest", func(t *testing.T) { testEveryMethodHasATest(t, tests) })
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// testTranslate: unique and CHECK violations come back named, no rows as
// ErrNoRows.
func testTranslate(t *testing.T, e engine.Engine) {
	ctx := context.Background()
	insert := func(a engine.Agent) error {
		return e.Write(ctx, func(ctx context.Context, q engine.Queries) error { return q.AgentInsert(ctx, a) })
	}
	base := engine.Agent{
		ID: "a", State: "running", Provider: "p", ProviderSessionID: "s", OwnerActor: "o",
		OwnerPeerClass: "c", OwnerWriteNamespace: "ns", SpawnFingerprint: "f", IdempotencyKey: "k",
	}
	must(t, insert(base))
	for _, tc := range []struct {
		name string
		edit func(a *engine.Agent)
		want engine.Constraint
	}{
		{"id", func(a *engine.Agent) { a.ProviderSessionID, a.IdempotencyKey = "s2", "k2" }, engine.UniqueAgentID},
		{"live session", func(a *engine.Agent) { a.ID, a.IdempotencyKey = "b", "k2" }, engine.UniqueAgentLiveProviderSession},
		{"idempotency", func(a *engine.Agent) { a.ID, a.ProviderSessionID = "b", "s2" }, engine.UniqueAgentIdempotency},
		{"check", func(a *engine.Agent) {
			a.ID, a.ProviderSessionID, a.IdempotencyKey, a.State = "b", "s2", "k2", "zombie"
		}, engine.CheckViolation},
	} {
		a := base
		tc.edit(&a)
		if err := insert(a); !engine.IsConstraint(err, tc.want) {
			t.Errorf("%s: err = %v, want constraint %s", tc.name, err, tc.want)
		}
	}
	err := e.Read(ctx, func(ctx context.Context, q engine.Queries) error {
		_, err := q.AgentGet(ctx, "nobody")
		return err
	})
	if !errors.Is(err, engine.ErrNoRows) {
		t.Fatalf("err = %v, want ErrNoRows", err)
	}
}

// fixture registers worker "i" of namespace "ns" serving lane "l" (alive
// from 1 ms for 100 s) unless it is, and adds n executions of lane "l"
// claimable from 1 ms, each with maxAttempts.
func fixture(t *testing.T, e engine.Engine, n int, maxAttempts int64) []uuid.UUID {
	t.Helper()
	var ids []uuid.UUID
	must(t, e.Write(context.Background(), func(ctx context.Context, q engine.Queries) error {
		err := q.WorkerRegister(ctx, engine.Worker{Namespace: "ns", InstanceID: "i", WorkerID: "w", Lanes: []string{"l"}, LastHeartbeatMs: 1, TTLMs: 100000})
		if err != nil && !errors.Is(err, engine.ErrNoRows) {
			return err
		}
		for range n {
			id, _ := uuid.NewV7()
			if err := q.ExecutionInsert(ctx, engine.Execution{ID: id, Namespace: "ns", Lane: "l", MaxAttempts: maxAttempts, CreatedAtMs: 1, RunAtMs: 1}); err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return nil
	}))
	return ids
}

// claimParams asks for n leases for worker "i" at now, expiring 1000 ms later.
func claimParams(n int, now int64) engine.ClaimParams {
	p := engine.ClaimParams{Namespace: "ns", InstanceID: "i", NowMs: now, ExpiresAtMs: now + 1000}
	for range n {
		p.LeaseIDs = append(p.LeaseIDs, uuid.New())
	}
	return p
}

func claim(t *testing.T, e engine.Engine, n int, now int64) []engine.ClaimedLease {
	t.Helper()
	res, err := e.ExecutionClaim(context.Background(), claimParams(n, now))
	must(t, err)
	return res.Leases
}

func ref(l engine.ClaimedLease) engine.LeaseRef {
	return engine.LeaseRef{ExecutionID: l.ExecutionID, LeaseID: l.LeaseID, Epoch: l.Epoch}
}

func get(t *testing.T, e engine.Engine, id uuid.UUID) engine.Execution {
	t.Helper()
	var x engine.Execution
	must(t, e.Read(context.Background(), func(ctx context.Context, q engine.Queries) error {
		var err error
		x, err = q.ExecutionGet(ctx, id)
		return err
	}))
	return x
}

// testLeaseCompleteMany: a stale epoch, an unknown execution and a good lease
// in one call complete only the good one.
func testLeaseCompleteMany(t *testing.T, e engine.Engine) {
	ctx := context.Background()
	fixture(t, e, 2, 1)
	claimed := claim(t, e, 2, 2)
	if len(claimed) != 2 {
		t.Fatalf("claimed %d", len(claimed))
	}
	var done []engine.LeaseRef
	must(t, e.Write(ctx, func(ctx context.Context, q engine.Queries) error {
		var err error
		done, err = q.LeaseCompleteMany(ctx, []engine.LeaseRef{
			ref(claimed[0]),
			{ExecutionID: claimed[1].ExecutionID, Epoch: claimed[1].Epoch + 1}, // stale
			{ExecutionID: uuid.New(), Epoch: 1},                                // unknown
		}, [][]byte{[]byte("a"), []byte("b"), []byte("c")}, 3)
		return err
	}))
	if len(done) != 1 || done[0] != ref(claimed[0]) {
		t.Fatalf("completed %v", done)
	}
	first, second := get(t, e, claimed[0].ExecutionID), get(t, e, claimed[1].ExecutionID)
	if first.State != "completed" || string(first.Result) != "a" || second.State != "running" || second.Result != nil {
		t.Fatalf("after the batch: %+v / %+v", first, second)
	}
}

// testCompleteOldAndCurrent: an old lease and the current lease of one
// execution in one batch: only the current one completes, with its own
// result, whatever the order.
func testCompleteOldAndCurrent(t *testing.T, e engine.Engine) {
	ctx := context.Background()
	for _, oldFirst := range []bool{true, false} {
		ids := fixture(t, e, 1, 2)
		old := claim(t, e, 1, 2)[0]
		must(t, e.Write(ctx, func(ctx context.Context, q engine.Queries) error {
			return q.LeaseFail(ctx, ref(old), 3, "first attempt")
		}))
		cur := claim(t, e, 1, 4)[0]
		if cur.ExecutionID != ids[0] || cur.Epoch != old.Epoch+1 {
			t.Fatalf("second claim %+v after %+v", cur, old)
		}
		leases := []engine.LeaseRef{ref(old), ref(cur)}
		results := [][]byte{[]byte("old"), []byte("current")}
		if !oldFirst {
			leases[0], leases[1] = leases[1], leases[0]
			results[0], results[1] = results[1], results[0]
		}
		var done []engine.LeaseRef
		must(t, e.Write(ctx, func(ctx context.Context, q engine.Queries) error {
			var err error
			done, err = q.LeaseCompleteMany(ctx, leases, results, 5)
			return err
		}))
		if len(done) != 1 || done[0] != ref(cur) {
			t.Fatalf("completed %v, want only %v", done, ref(cur))
		}
		if x := get(t, e, ids[0]); x.State != "completed" || string(x.Result) != "current" {
			t.Fatalf("oldFirst=%v: %s with result %q, want the current lease's", oldFirst, x.State, x.Result)
		}
	}
}

// testFenceLeaseID: a database that lost its last commits (an asynchronous
// standby promoted after its primary died) issues an epoch a second time.
// The holder of the lost claim presents the same execution and epoch as the
// new holder, but not the same lease id: every fence refuses it and leaves
// the new holder's lease as it was, and the new holder's lease passes.
func testFenceLeaseID(t *testing.T, h Harness) {
	ctx := context.Background()
	loc := h.Fresh(t)
	e := h.Open(t, loc)
	ids := fixture(t, e, 1, 3)
	stale := claim(t, e, 1, 2)[0]
	// The claim is lost: the row is as it was before it.
	h.Exec(t, loc, `UPDATE executions SET state = 'waiting', attempts = 0, epoch = 0, lease_id = NULL, holder = NULL,
		claimed_at_ms = NULL, expires_at_ms = NULL, ready = (1 = 1) WHERE id = '`+ids[0].String()+`'`)
	cur := claim(t, e, 1, 3)[0]
	if cur.Epoch != stale.Epoch || cur.LeaseID == stale.LeaseID {
		t.Fatalf("the second claim took epoch %d lease %s; the lost one epoch %d lease %s", cur.Epoch, cur.LeaseID, stale.Epoch, stale.LeaseID)
	}
	old := ref(stale)
	write := func(fn func(q engine.Queries) error) error {
		return e.Write(ctx, func(ctx context.Context, q engine.Queries) error { return fn(q) })
	}
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"LeaseRenew", func() error {
			return write(func(q engine.Queries) error { _, err := q.LeaseRenew(ctx, old, 4, 5000); return err })
		}},
		{"LeaseComplete", func() error {
			return write(func(q engine.Queries) error { return q.LeaseComplete(ctx, old, 4, []byte("stale")) })
		}},
		{"LeaseCompleteMany", func() error {
			return write(func(q engine.Queries) error {
				done, err := q.LeaseCompleteMany(ctx, []engine.LeaseRef{old}, [][]byte{[]byte("stale")}, 4)
				if err == nil && len(done) > 0 {
					return nil
				}
				return engine.ErrNoRows
			})
		}},
		{"LeaseFail", func() error { return write(func(q engine.Queries) error { return q.LeaseFail(ctx, old, 4, "stale") }) }},
		{"LeaseRelease", func() error { return write(func(q engine.Queries) error { return q.LeaseRelease(ctx, old, 4) }) }},
		{"Settle complete", func() error {
			return e.Settle(ctx, 4, []engine.Outcome{{Lease: old, Result: []byte("stale")}}, nil).Errs[0]
		}},
		{"Settle fail", func() error {
			return e.Settle(ctx, 4, []engine.Outcome{{Lease: old, Fail: true, Reason: "stale"}}, nil).Errs[0]
		}},
	} {
		if err := tc.call(); !errors.Is(err, engine.ErrNoRows) {
			t.Errorf("%s with the lost claim's lease: err = %v, want ErrNoRows", tc.name, err)
		}
		x := get(t, e, ids[0])
		if x.State != "running" || x.Result != nil || x.LastError != "" || x.ExpiresAtMs != cur.ExpiresAtMs || x.Attempts != 1 {
			t.Fatalf("after %s with the lost claim's lease: %+v", tc.name, x)
		}
	}
	res := e.Settle(ctx, 5, []engine.Outcome{{Lease: ref(cur), Result: []byte("current")}}, nil)
	if res.Errs[0] != nil {
		t.Fatalf("the current lease: %v", res.Errs[0])
	}
	if x := get(t, e, ids[0]); x.State != "completed" || string(x.Result) != "current" {
		t.Fatalf("after the current lease completed: %s %q", x.State, x.Result)
	}
}

// testSettleIsolatesEachOutcome: in one Settle, a lost lease, a row the
// database refuses, a completion and a failure, then a claim: the refused
// one alone fails, the lost one alone is ErrNoRows, the rest is written and
// the claim takes the remaining execution.
func testSettleIsolates(t *testing.T, h Harness) {
	loc := h.Fresh(t)
	e := h.Open(t, loc)
	h.Exec(t, loc, h.Refuse)
	ids := fixture(t, e, 5, 2)
	ls := claim(t, e, 4, 2)
	if len(ls) != 4 {
		t.Fatalf("claimed %d", len(ls))
	}
	lost := ref(ls[0])
	lost.Epoch++
	outcomes := []engine.Outcome{
		{Lease: lost, Result: []byte("never")},
		{Lease: ref(ls[1]), Result: []byte("boom")},
		{Lease: ref(ls[2]), Result: []byte("fine")},
		{Lease: ref(ls[3]), Fail: true, Reason: "no luck"},
	}
	claimP := claimParams(2, 3)
	res := e.Settle(context.Background(), 3, outcomes, &claimP)
	if !errors.Is(res.Errs[0], engine.ErrNoRows) {
		t.Errorf("lost lease: %v, want ErrNoRows", res.Errs[0])
	}
	if res.Errs[1] == nil || errors.Is(res.Errs[1], engine.ErrNoRows) || engine.Transient(res.Errs[1]) {
		t.Errorf("refused row: %v, want an error of its own", res.Errs[1])
	}
	if res.Errs[2] != nil || res.Errs[3] != nil {
		t.Errorf("good outcomes: %v, %v", res.Errs[2], res.Errs[3])
	}
	if res.ClaimErr != nil {
		t.Fatalf("claim: %v", res.ClaimErr)
	}
	// The failed one waits again (2 attempts): the claim takes it and the
	// fifth execution.
	got := map[uuid.UUID]bool{}
	for _, l := range res.Claim.Leases {
		got[l.ExecutionID] = true
	}
	if len(got) != 2 || !got[ls[3].ExecutionID] || !got[ids[4]] {
		t.Errorf("the claim took %v, want %s and %s", res.Claim.Leases, ls[3].ExecutionID, ids[4])
	}
	if x := get(t, e, ls[2].ExecutionID); x.State != "completed" || string(x.Result) != "fine" {
		t.Errorf("good completion: %+v", x)
	}
	if x := get(t, e, ls[1].ExecutionID); x.State != "running" || x.Result != nil {
		t.Errorf("refused completion: %+v", x)
	}
	if x := get(t, e, ls[0].ExecutionID); x.State != "running" {
		t.Errorf("the lost lease's execution: %+v", x)
	}
}

// testClaimNextRunAt: a claim that comes up short says when the worker's
// next scheduled execution becomes claimable; a worker that is not alive is
// ErrNoRows.
func testClaimNextRunAt(t *testing.T, e engine.Engine) {
	ctx := context.Background()
	fixture(t, e, 1, 1)
	must(t, e.Write(ctx, func(ctx context.Context, q engine.Queries) error {
		for _, at := range []int64{9000, 5000} {
			id, _ := uuid.NewV7()
			if err := q.ExecutionInsert(ctx, engine.Execution{ID: id, Namespace: "ns", Lane: "l", MaxAttempts: 1, CreatedAtMs: 1, RunAtMs: at}); err != nil {
				return err
			}
		}
		return nil
	}))
	res, err := e.ExecutionClaim(ctx, claimParams(3, 2))
	must(t, err)
	if len(res.Leases) != 1 || res.NextRunAtMs != 5000 {
		t.Fatalf("claimed %d, next %d; want 1 and 5000", len(res.Leases), res.NextRunAtMs)
	}
	res, err = e.ExecutionClaim(ctx, claimParams(1, 3))
	must(t, err)
	if len(res.Leases) != 0 || res.NextRunAtMs != 5000 {
		t.Fatalf("idle claim: %d leases, next %d", len(res.Leases), res.NextRunAtMs)
	}
	if _, err := e.ExecutionClaim(ctx, claimParams(1, 200000)); !errors.Is(err, engine.ErrNoRows) {
		t.Fatalf("claim by a lapsed worker: %v, want ErrNoRows", err)
	}
}

// testRelease: a released lease gives its attempt back and stays fenced; the
// next claim takes the execution under a new epoch.
func testRelease(t *testing.T, e engine.Engine) {
	ctx := context.Background()
	ids := fixture(t, e, 1, 1)
	l := claim(t, e, 1, 2)[0]
	release := func(l engine.LeaseRef, now int64) error {
		return e.Write(ctx, func(ctx context.Context, q engine.Queries) error { return q.LeaseRelease(ctx, l, now) })
	}
	must(t, release(ref(l), 3))
	x := get(t, e, ids[0])
	if x.State != "waiting" || x.Attempts != 0 || x.RunAtMs != 1 {
		t.Fatalf("released: %+v", x)
	}
	if err := release(ref(l), 4); !errors.Is(err, engine.ErrNoRows) {
		t.Fatalf("second release: %v", err)
	}
	if err := e.Write(ctx, func(ctx context.Context, q engine.Queries) error {
		return q.LeaseComplete(ctx, ref(l), 4, nil)
	}); !errors.Is(err, engine.ErrNoRows) {
		t.Fatalf("complete of a released lease: %v", err)
	}
	again := claim(t, e, 1, 5)[0]
	if again.Epoch != l.Epoch+1 || again.AttemptIndex != 1 {
		t.Fatalf("claim after release: %+v (released %+v)", again, l)
	}
	// An expired lease cannot be released.
	if err := release(ref(again), 5000); !errors.Is(err, engine.ErrNoRows) {
		t.Fatalf("release of an expired lease: %v", err)
	}
}

// testSubscribe: a subscription hears an execution added through another
// engine on the same database.
func testSubscribe(t *testing.T, h Harness) {
	loc := h.Fresh(t)
	a, b := h.Open(t, loc), h.Open(t, loc)
	sub := a.Subscribe("ns")
	defer sub.Close()
	sub.Arm()
	fixture(t, b, 0, 1)
	// Drain what the subscription heard while it started.
	deadline := time.After(20 * time.Second)
	for {
		select {
		case <-sub.C():
			continue
		case <-time.After(200 * time.Millisecond):
		}
		break
	}
	fixture(t, b, 1, 1)
	select {
	case <-sub.C():
	case <-deadline:
		t.Fatal("the subscription did not hear the new execution")
	}
}

// testSubscribeUnarmed: a change that another engine makes while the
// subscription is not armed (its holder busy) is heard once it is armed: a
// pending notification, or a look at once for what changed since the last.
func testSubscribeUnarmed(t *testing.T, h Harness) {
	loc := h.Fresh(t)
	a, b := h.Open(t, loc), h.Open(t, loc)
	sub := a.Subscribe("ns")
	defer sub.Close()
	fixture(t, b, 0, 1)
	sub.Arm() // look once, then rest
	time.Sleep(200 * time.Millisecond)
	sub.Disarm()
	for drained := false; !drained; {
		select {
		case <-sub.C():
		case <-time.After(200 * time.Millisecond):
			drained = true
		}
	}
	fixture(t, b, 1, 1)
	time.Sleep(200 * time.Millisecond)
	sub.Arm()
	select {
	case <-sub.C():
	case <-time.After(10 * time.Second):
		t.Fatal("a change made while the subscription was not armed was never heard")
	}
}
