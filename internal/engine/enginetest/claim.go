package enginetest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/rosterdb/roster/internal/engine"
)

// claimTests are the tests of claiming (Engine.ExecutionClaim) and of
// settling outcomes with a claim (Engine.Settle, whose claim is the same).
func claimTests() map[string]methodTest {
	return map[string]methodTest{
		"ExecutionClaim": func(t *testing.T, h Harness) {
			testClaims(t, h, func(v *env, p engine.ClaimParams) (engine.ClaimResult, error) { return v.e.ExecutionClaim(v.ctx, p) })
			t.Run("NextRunAt", func(t *testing.T) { testClaimNextRunAt(t, h.Open(t, h.Fresh(t))) })
			t.Run("NoExecutionTwice", func(t *testing.T) { testClaimNoExecutionTwice(t, h) })
			t.Run("Metadata", func(t *testing.T) {
				testClaimMetadata(t, h, func(v *env, p engine.ClaimParams) (engine.ClaimResult, error) { return v.e.ExecutionClaim(v.ctx, p) })
			})
			t.Run("Bound", func(t *testing.T) {
				testClaimBound(t, h, func(v *env, p engine.ClaimParams) (engine.ClaimResult, error) { return v.e.ExecutionClaim(v.ctx, p) })
			})
		},
		"Settle": func(t *testing.T, h Harness) {
			testSettle(t, h)
			t.Run("ClaimMetadata", func(t *testing.T) {
				testClaimMetadata(t, h, func(v *env, p engine.ClaimParams) (engine.ClaimResult, error) {
					// A settle with an outcome, so that the claim rides in its batch.
					v.register("ns", "other", []string{"none"}, nil, 1, 1000000)
					res := v.e.Settle(v.ctx, p.NowMs, []engine.Outcome{{Lease: engine.LeaseRef{ExecutionID: uuid.New(), LeaseID: uuid.New(), Epoch: 1}}}, &p)
					return res.Claim, res.ClaimErr
				})
			})
			t.Run("ClaimBound", func(t *testing.T) {
				testClaimBound(t, h, func(v *env, p engine.ClaimParams) (engine.ClaimResult, error) {
					v.register("ns", "other", []string{"none"}, nil, 1, 1000000)
					res := v.e.Settle(v.ctx, p.NowMs, []engine.Outcome{{Lease: engine.LeaseRef{ExecutionID: uuid.New(), LeaseID: uuid.New(), Epoch: 1}}}, &p)
					return res.Claim, res.ClaimErr
				})
			})
		},
	}
}

// claimFunc claims through one of the seam's claim paths.
type claimFunc func(v *env, p engine.ClaimParams) (engine.ClaimResult, error)

// testClaims: the behaviours every claim path has: best first, lanes and
// capabilities matched, payload bytes bounded, due scheduled work
// competing, a worker not alive refused.
func testClaims(t *testing.T, h Harness, claim claimFunc) {
	mustClaim := func(t *testing.T, v *env, p engine.ClaimParams) engine.ClaimResult {
		t.Helper()
		res, err := claim(v, p)
		must(t, err)
		return res
	}
	t.Run("BestFirst", func(t *testing.T) {
		v := setup(t, h)
		v.register("ns", "i", []string{"l"}, nil, 1, 1000000)
		low, late, early, early2 := v.execution("ns", "l"), v.execution("ns", "l"), v.execution("ns", "l"), v.execution("ns", "l")
		late.Priority, late.CreatedAtMs, late.RunAtMs = 5, 3, 3
		early.Priority, early.CreatedAtMs, early.RunAtMs, early.Payload = 5, 2, 2, []byte("early")
		early2.Priority, early2.CreatedAtMs, early2.RunAtMs = 5, 2, 2
		v.insert(low, late, early, early2)
		p := params("ns", "i", 3, 10, 1010)
		res := mustClaim(t, v, p)
		if got, want := executionIDs(res.Leases), []uuid.UUID{early.ID, early2.ID, late.ID}; !slices.Equal(got, want) {
			t.Fatalf("claimed %s, want %s", fmtIDs(got), fmtIDs(want))
		}
		if res.NextRunAtMs != 0 {
			t.Errorf("NextRunAtMs %d after a full claim, want 0", res.NextRunAtMs)
		}
		for i, l := range res.Leases {
			if l.LeaseID != p.LeaseIDs[i] || l.AttemptIndex != 1 || l.Epoch != 1 || l.Namespace != "ns" || l.Lane != "l" || l.ExpiresAtMs != 1010 {
				t.Errorf("lease %d: %+v", i, l)
			}
			x := v.get(l.ExecutionID)
			if x.State != "running" || x.Holder != "i" || x.ClaimedAtMs != 10 || x.ExpiresAtMs != 1010 || x.Attempts != 1 {
				t.Errorf("claimed execution %+v", x)
			}
		}
		if string(res.Leases[0].Payload) != "early" {
			t.Errorf("payload %q, want %q", res.Leases[0].Payload, "early")
		}
		rest := mustClaim(t, v, params("ns", "i", 3, 11, 1011))
		if got := executionIDs(rest.Leases); !slices.Equal(got, []uuid.UUID{low.ID}) || rest.NextRunAtMs != 0 {
			t.Fatalf("second claim %s next %d, want %s and 0", fmtIDs(got), rest.NextRunAtMs, fmtIDs([]uuid.UUID{low.ID}))
		}
		if none := mustClaim(t, v, params("ns", "i", 1, 12, 1012)); len(none.Leases) != 0 || none.NextRunAtMs != 0 {
			t.Fatalf("claim of an empty queue %+v", none)
		}
	})
	t.Run("LanesAndCapabilities", func(t *testing.T) {
		v := setup(t, h)
		v.register("ns", "many", []string{"a", "b"}, []string{"x", "y"}, 1, 1000000)
		v.register("ns", "one", []string{"a"}, nil, 1, 1000000)
		plain, bx, axy, az, c, other, plain2 := v.execution("ns", "a"), v.execution("ns", "b"), v.execution("ns", "a"),
			v.execution("ns", "a"), v.execution("ns", "c"), v.execution("other", "a"), v.execution("ns", "a")
		bx.RequiredCapabilities, axy.RequiredCapabilities, az.RequiredCapabilities = []string{"x"}, []string{"x", "y"}, []string{"z"}
		v.insert(plain, bx, axy, az, c, other, plain2)
		res := mustClaim(t, v, params("ns", "many", 10, 10, 1010))
		if got := executionIDs(res.Leases); !sameIDs(got, []uuid.UUID{plain.ID, bx.ID, axy.ID, plain2.ID}) {
			t.Fatalf("the worker of lanes a, b with x, y claimed %s", fmtIDs(got))
		}
		for _, l := range res.Leases {
			if want := map[uuid.UUID]string{bx.ID: "b"}[l.ExecutionID]; want != "" && l.Lane != want {
				t.Errorf("lease %+v: lane %q, want %q", l, l.Lane, want)
			}
		}
		if none := mustClaim(t, v, params("ns", "one", 10, 10, 1010)); len(none.Leases) != 0 {
			t.Fatalf("the worker of lane a without capabilities claimed %s", fmtIDs(executionIDs(none.Leases)))
		}
		v2 := setup(t, h)
		v2.register("ns", "one", []string{"a"}, nil, 1, 1000000)
		ids := v2.insert(v2.execution("ns", "a"), func() engine.Execution {
			e := v2.execution("ns", "a")
			e.RequiredCapabilities = []string{"x"}
			return e
		}(), v2.execution("ns", "b"))
		if got := executionIDs(mustClaim(t, v2, params("ns", "one", 10, 10, 1010)).Leases); !slices.Equal(got, ids[:1]) {
			t.Fatalf("the worker of lane a without capabilities claimed %s, want %s", fmtIDs(got), fmtIDs(ids[:1]))
		}
	})
	t.Run("MaxBytes", func(t *testing.T) {
		v := setup(t, h)
		v.register("ns", "i", []string{"l"}, nil, 1, 1000000)
		for range 4 {
			e := v.execution("ns", "l")
			e.Payload = []byte("0123456789")
			v.insert(e)
		}
		p := params("ns", "i", 4, 10, 1010)
		p.MaxBytes = 25
		res := mustClaim(t, v, p)
		if len(res.Leases) != 2 || res.NextRunAtMs != 10 {
			t.Fatalf("claim bounded at 25 bytes: %d leases, next %d; want 2 and now (10)", len(res.Leases), res.NextRunAtMs)
		}
		p = params("ns", "i", 2, 11, 1011)
		p.MaxBytes = 5
		res = mustClaim(t, v, p)
		if len(res.Leases) != 1 || res.NextRunAtMs != 11 || len(res.Leases[0].Payload) != 10 {
			t.Fatalf("claim bounded below one payload: %d leases, next %d; want 1 and now (11)", len(res.Leases), res.NextRunAtMs)
		}
	})
	t.Run("DueScheduledCompetes", func(t *testing.T) {
		v := setup(t, h)
		v.register("ns", "i", []string{"l"}, nil, 1, 1000000)
		ready, due, future := v.execution("ns", "l"), v.execution("ns", "l"), v.execution("ns", "l")
		due.Priority, due.RunAtMs = 9, 50
		future.Priority, future.RunAtMs = 9, 70
		v.insert(ready, due, future)
		if got := executionIDs(mustClaim(t, v, params("ns", "i", 1, 60, 1060)).Leases); !slices.Equal(got, []uuid.UUID{due.ID}) {
			t.Fatalf("claimed %s, want the due scheduled one %s", fmtIDs(got), fmtIDs([]uuid.UUID{due.ID}))
		}
		res := mustClaim(t, v, params("ns", "i", 2, 60, 1060))
		if got := executionIDs(res.Leases); !slices.Equal(got, []uuid.UUID{ready.ID}) || res.NextRunAtMs != 70 {
			t.Fatalf("claimed %s next %d, want %s and 70", fmtIDs(got), res.NextRunAtMs, fmtIDs([]uuid.UUID{ready.ID}))
		}
	})
	t.Run("NotAlive", func(t *testing.T) {
		v := setup(t, h)
		v.register("ns", "i", []string{"l"}, nil, 1, 100)
		id := v.insert(v.execution("ns", "l"))[0]
		_, err := claim(v, params("ns", "i", 1, 101, 1101))
		wantNoRows(t, "claim by a lapsed worker", err)
		_, err = claim(v, params("ns", "nobody", 1, 50, 1050))
		wantNoRows(t, "claim by an unknown worker", err)
		if x := v.get(id); x.State != "waiting" || x.Attempts != 0 {
			t.Fatalf("a refused claim changed %+v", x)
		}
	})
}

// testClaimNoExecutionTwice: claims racing from two engines on one database
// take every execution exactly once.
func testClaimNoExecutionTwice(t *testing.T, h Harness) {
	v := setup(t, h)
	other := h.Open(t, v.loc)
	v.register("ns", "i", []string{"l"}, nil, 1, 1000000)
	v.register("ns", "j", []string{"l"}, nil, 1, 1000000)
	var want []uuid.UUID
	for range 40 {
		want = append(want, v.insert(v.execution("ns", "l"))...)
	}
	var mu sync.Mutex
	var got []uuid.UUID
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g, e := range []engine.Engine{v.e, other, v.e, other} {
		inst := []string{"i", "j"}[g%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				res, err := e.ExecutionClaim(context.Background(), params("ns", inst, 3, 10, 100000))
				if err != nil {
					errs <- err
					return
				}
				if len(res.Leases) == 0 {
					return
				}
				mu.Lock()
				got = append(got, executionIDs(res.Leases)...)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(got) != len(want) || !sameIDs(got, want) {
		t.Fatalf("claimed %d executions (%d distinct) of %d", len(got), len(slices.Compact(sortedIDs(got))), len(want))
	}
}

// testSettle: each outcome is written fenced on its own lease and reported
// in Errs; the claim runs after them (or not at all), its error its own.
func testSettle(t *testing.T, h Harness) {
	t.Run("Outcomes", func(t *testing.T) {
		v, ls := leased(t, h, 3, 2, 0)
		v.fail(ls[2], 3, "first")
		again := v.claimAt("ns", "i", 1, 4, 1000)[0] // its last attempt
		res := v.e.Settle(v.ctx, 10, []engine.Outcome{
			{Lease: ref(ls[0]), Result: []byte("r")},
			{Lease: ref(ls[1]), Fail: true, Reason: "again"},
			{Lease: ref(again), Fail: true, Reason: "for good"},
		}, nil)
		if len(res.Errs) != 3 || res.Errs[0] != nil || res.Errs[1] != nil || res.Errs[2] != nil {
			t.Fatalf("Errs %v", res.Errs)
		}
		if res.ClaimErr != nil || len(res.Claim.Leases) != 0 {
			t.Fatalf("no claim asked, got %+v, %v", res.Claim, res.ClaimErr)
		}
		if x := v.get(ls[0].ExecutionID); x.State != "completed" || string(x.Result) != "r" || x.FinishedAtMs != 10 {
			t.Errorf("completed %+v", x)
		}
		if x := v.get(ls[1].ExecutionID); x.State != "waiting" || x.LastError != "again" || x.Attempts != 1 {
			t.Errorf("failed with an attempt left %+v", x)
		}
		if x := v.get(ls[2].ExecutionID); x.State != "failed" || x.LastError != "for good" || x.FinishedAtMs != 10 {
			t.Errorf("failed on its last attempt %+v", x)
		}
		for _, c := range []struct {
			l    engine.ClaimedLease
			want string
		}{{ls[0], "completed"}, {ls[1], "failed"}, {again, "failed"}} {
			got, err := tryRead(v, func(ctx context.Context, q engine.Queries) (string, error) { return q.LeaseGetOutcome(ctx, ref(c.l)) })
			if err != nil || got != c.want {
				t.Errorf("outcome of %v: %q, %v; want %q", ref(c.l), got, err, c.want)
			}
		}
		v.sound()
	})
	t.Run("SeveralCompletionsOneLost", func(t *testing.T) {
		// Completions written together are each fenced on their own lease:
		// a lost one writes nothing and fails nothing else.
		v, ls := leased(t, h, 3, 2, 0)
		lost := ref(ls[1])
		lost.LeaseID = uuid.New()
		res := v.e.Settle(v.ctx, 10, []engine.Outcome{
			{Lease: ref(ls[0]), Result: []byte("a")},
			{Lease: lost, Result: []byte("never")},
			{Lease: ref(ls[2])},
		}, nil)
		if len(res.Errs) != 3 || res.Errs[0] != nil || !errors.Is(res.Errs[1], engine.ErrNoRows) || res.Errs[2] != nil {
			t.Fatalf("Errs %v, want nil, ErrNoRows, nil", res.Errs)
		}
		if x := v.get(ls[0].ExecutionID); x.State != "completed" || string(x.Result) != "a" {
			t.Errorf("first: %+v", x)
		}
		if x := v.get(ls[1].ExecutionID); x.State != "running" || x.Result != nil {
			t.Errorf("lost: %+v", x)
		}
		if x := v.get(ls[2].ExecutionID); x.State != "completed" || x.Result != nil {
			t.Errorf("third (no result): %+v", x)
		}
		v.sound()
	})
	t.Run("SameLeaseTwice", func(t *testing.T) {
		// Two outcomes of one lease: the completion, given first, ends it;
		// the fail after it finds the lease ended, and the other execution
		// completes.
		v, ls := leased(t, h, 2, 2, 0)
		res := v.e.Settle(v.ctx, 10, []engine.Outcome{
			{Lease: ref(ls[0]), Result: []byte("done")},
			{Lease: ref(ls[0]), Fail: true, Reason: "late"},
			{Lease: ref(ls[1]), Result: []byte("other")},
		}, nil)
		if res.Errs[0] != nil || !errors.Is(res.Errs[1], engine.ErrNoRows) || res.Errs[2] != nil {
			t.Fatalf("Errs %v, want nil, ErrNoRows, nil", res.Errs)
		}
		if x := v.get(ls[0].ExecutionID); x.State != "completed" || string(x.Result) != "done" || x.LastError != "" {
			t.Errorf("the lease given twice: %+v", x)
		}
		if x := v.get(ls[1].ExecutionID); x.State != "completed" || string(x.Result) != "other" {
			t.Errorf("the other: %+v", x)
		}
	})
	t.Run("LostLease", func(t *testing.T) {
		v, ls := leased(t, h, 1, 1, 0)
		res := v.e.Settle(v.ctx, 1000, []engine.Outcome{{Lease: ref(ls[0]), Result: []byte("late")}}, nil)
		if len(res.Errs) != 1 {
			t.Fatalf("Errs %v", res.Errs)
		}
		wantNoRows(t, "an expired lease", res.Errs[0])
		if x := v.get(ls[0].ExecutionID); x.State != "running" || x.Result != nil {
			t.Fatalf("a lost outcome was written: %+v", x)
		}
	})
	t.Run("ClaimAfterOutcomes", func(t *testing.T) {
		v, ls := leased(t, h, 1, 2, 0)
		p := params("ns", "i", 2, 10, 2000)
		res := v.e.Settle(v.ctx, 10, []engine.Outcome{{Lease: ref(ls[0]), Fail: true, Reason: "retry me"}}, &p)
		if res.Errs[0] != nil || res.ClaimErr != nil {
			t.Fatalf("Errs %v, ClaimErr %v", res.Errs, res.ClaimErr)
		}
		// The failure made its execution claimable again: the claim saw it.
		if len(res.Claim.Leases) != 1 || res.Claim.Leases[0].ExecutionID != ls[0].ExecutionID || res.Claim.Leases[0].AttemptIndex != 2 ||
			res.Claim.Leases[0].LeaseID != p.LeaseIDs[0] {
			t.Fatalf("claim %+v", res.Claim)
		}
		if x := v.get(ls[0].ExecutionID); x.State != "running" || x.ExpiresAtMs != 2000 {
			t.Fatalf("claimed again %+v", x)
		}
	})
	t.Run("ClaimOnly", func(t *testing.T) {
		v := setup(t, h)
		v.register("ns", "i", []string{"l"}, nil, 1, 1000000)
		id := v.insert(v.execution("ns", "l"))[0]
		p := params("ns", "i", 2, 10, 2000)
		res := v.e.Settle(v.ctx, 10, nil, &p)
		if len(res.Errs) != 0 || res.ClaimErr != nil || len(res.Claim.Leases) != 1 || res.Claim.Leases[0].ExecutionID != id {
			t.Fatalf("Settle with a claim alone: %+v", res)
		}
	})
	t.Run("ClaimByLapsedWorker", func(t *testing.T) {
		v, ls := leased(t, h, 1, 1, 0)
		v.register("ns", "gone", []string{"l"}, nil, 1, 5)
		p := params("ns", "gone", 1, 10, 2000)
		res := v.e.Settle(v.ctx, 10, []engine.Outcome{{Lease: ref(ls[0]), Result: []byte("ok")}}, &p)
		if res.Errs[0] != nil {
			t.Fatalf("the outcome: %v", res.Errs[0])
		}
		if !errors.Is(res.ClaimErr, engine.ErrNoRows) {
			t.Fatalf("ClaimErr %v, want ErrNoRows", res.ClaimErr)
		}
		if x := v.get(ls[0].ExecutionID); x.State != "completed" {
			t.Fatalf("the outcome beside a refused claim was not written: %+v", x)
		}
	})
	t.Run("IsolatesEachOutcome", func(t *testing.T) { testSettleIsolates(t, h) })
}
