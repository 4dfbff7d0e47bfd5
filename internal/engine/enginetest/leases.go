package enginetest

import (
	"context"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/rosterdb/roster/internal/engine"
)

// leaseTests are the tests of the calls that present, look up, revoke and
// reclaim leases.
func leaseTests() map[string]methodTest {
	return map[string]methodTest{
		"LeaseRenew": func(t *testing.T, h Harness) {
			t.Run("OwnLease", func(t *testing.T) { testLeaseRenew(t, h) })
			t.Run("Timeout", func(t *testing.T) { testTimeoutOwnLease(t, h) })
		},
		"LeaseComplete":            testLeaseComplete,
		"LeaseCompleteMany":        testLeaseCompleteManyMethod,
		"LeaseRelease":             testLeaseRelease,
		"LeaseFindHeld":            testLeaseFindHeld,
		"LeaseGetOutcome":          testLeaseGetOutcome,
		"WorkerNextRunAt":          testWorkerNextRunAt,
		"LeaseFail":                testLeaseFail,
		"LeaseRevokeHeldBy":        testLeaseRevokeHeldBy,
		"LeaseListExpired":         testLeaseListExpired,
		"LeaseReclaimBatch":        testLeaseReclaimBatch,
		"LeaseHolderExpiry":        testLeaseHolderExpiry,
		"LeaseRevokeLapsedBound":   testLeaseRevokeLapsedBound,
		"LeaseRevokeBoundOfLapsed": testLeaseRevokeBoundOfLapsed,
	}
}

// leased is an env with worker "i" of namespace "ns" serving lane "l"
// (alive from 1 ms for 10⁶ ms) and n executions of that lane, each with
// maxAttempts and backoff, claimed at 2 ms under leases expiring at 1000 ms.
func leased(t *testing.T, h Harness, n int, maxAttempts, backoff int64) (*env, []engine.ClaimedLease) {
	t.Helper()
	v := setup(t, h)
	v.register("ns", "i", []string{"l"}, nil, 1, 1000000)
	for range n {
		e := v.execution("ns", "l")
		e.MaxAttempts, e.RetryBackoffMs = maxAttempts, backoff
		v.insert(e)
	}
	ls := v.claimAt("ns", "i", n, 2, 1000)
	if len(ls) != n {
		t.Fatalf("claimed %d of %d", len(ls), n)
	}
	return v, ls
}

// stale returns l's lease with its epoch, then its lease id, made wrong.
func stale(l engine.ClaimedLease) (epoch, leaseID engine.LeaseRef) {
	epoch, leaseID = ref(l), ref(l)
	epoch.Epoch++
	leaseID.LeaseID = uuid.New()
	return epoch, leaseID
}

// testLeaseRenew: the current lease's expiry moves; an expired, revoked or
// stale lease is ErrNoRows and changes nothing.
func testLeaseRenew(t *testing.T, h Harness) {
	v, ls := leased(t, h, 2, 1, 0)
	renew := func(l engine.LeaseRef, now, expires int64) error {
		return v.tryLease(func(ctx context.Context, q engine.Queries) error {
			_, err := q.LeaseRenew(ctx, l, now, expires)
			return err
		})
	}
	t.Run("Current", func(t *testing.T) {
		must(t, renew(ref(ls[0]), 500, 2000))
		if x := v.get(ls[0].ExecutionID); x.ExpiresAtMs != 2000 || x.State != "running" || x.ClaimedAtMs != 2 {
			t.Fatalf("after renew %+v", x)
		}
	})
	t.Run("Stale", func(t *testing.T) {
		epoch, leaseID := stale(ls[0])
		wantNoRows(t, "stale epoch", renew(epoch, 600, 3000))
		wantNoRows(t, "other lease id", renew(leaseID, 600, 3000))
		if x := v.get(ls[0].ExecutionID); x.ExpiresAtMs != 2000 {
			t.Fatalf("a stale renew moved the expiry: %+v", x)
		}
	})
	t.Run("Expired", func(t *testing.T) {
		wantNoRows(t, "renew at expiry", renew(ref(ls[1]), 1000, 3000))
		if x := v.get(ls[1].ExecutionID); x.ExpiresAtMs != 1000 {
			t.Fatalf("a renew of an expired lease moved it: %+v", x)
		}
	})
	t.Run("Revoked", func(t *testing.T) {
		v.write(func(ctx context.Context, q engine.Queries) error {
			return q.LeaseRevokeHeldBy(ctx, []engine.WorkerKey{wk("ns", "i")}, 700)
		})
		wantNoRows(t, "renew of a revoked lease", renew(ref(ls[0]), 600, 3000))
	})
}

// testLeaseComplete: the current lease ends its execution completed with the
// result, the lease staying on the row; a second complete, an expired or a
// stale lease is ErrNoRows and writes nothing.
func testLeaseComplete(t *testing.T, h Harness) {
	v, ls := leased(t, h, 3, 2, 0)
	complete := func(l engine.LeaseRef, now int64, result []byte) error {
		return v.e.WriteOne(v.ctx, func(ctx context.Context, q engine.Queries) error { return q.LeaseComplete(ctx, l, now, result) })
	}
	t.Run("Current", func(t *testing.T) {
		must(t, complete(ref(ls[0]), 10, []byte("done")))
		x := v.get(ls[0].ExecutionID)
		if x.State != "completed" || string(x.Result) != "done" || x.FinishedAtMs != 10 || x.Attempts != 1 ||
			x.Holder != "i" || x.ClaimedAtMs != 2 || x.ExpiresAtMs != 1000 {
			t.Fatalf("after complete %+v", x)
		}
	})
	t.Run("NilResult", func(t *testing.T) {
		must(t, complete(ref(ls[1]), 10, nil))
		if x := v.get(ls[1].ExecutionID); x.State != "completed" || x.Result != nil {
			t.Fatalf("after complete with no result %+v", x)
		}
	})
	t.Run("Twice", func(t *testing.T) {
		wantNoRows(t, "second complete", complete(ref(ls[0]), 11, []byte("again")))
		if x := v.get(ls[0].ExecutionID); string(x.Result) != "done" || x.FinishedAtMs != 10 {
			t.Fatalf("the second complete changed it: %+v", x)
		}
	})
	t.Run("Stale", func(t *testing.T) {
		epoch, leaseID := stale(ls[2])
		wantNoRows(t, "stale epoch", complete(epoch, 12, []byte("x")))
		wantNoRows(t, "other lease id", complete(leaseID, 12, []byte("x")))
		if x := v.get(ls[2].ExecutionID); x.State != "running" || x.Result != nil {
			t.Fatalf("a stale complete changed it: %+v", x)
		}
	})
	t.Run("Expired", func(t *testing.T) {
		wantNoRows(t, "complete at expiry", complete(ref(ls[2]), 1000, []byte("late")))
		if x := v.get(ls[2].ExecutionID); x.State != "running" || x.Result != nil {
			t.Fatalf("a late complete changed it: %+v", x)
		}
	})
}

// testLeaseCompleteManyMethod: every current lease of a batch completes with
// its own result; lost ones are left out; an empty batch completes nothing.
func testLeaseCompleteManyMethod(t *testing.T, h Harness) {
	t.Run("Batch", func(t *testing.T) {
		v, ls := leased(t, h, 3, 1, 0)
		done := writeGet(v, func(ctx context.Context, q engine.Queries) ([]engine.LeaseRef, error) {
			return q.LeaseCompleteMany(ctx, []engine.LeaseRef{ref(ls[2]), ref(ls[0])}, [][]byte{[]byte("c"), nil}, 10)
		})
		if len(done) != 2 || !slices.Contains(done, ref(ls[0])) || !slices.Contains(done, ref(ls[2])) {
			t.Fatalf("completed %v", done)
		}
		if x := v.get(ls[2].ExecutionID); x.State != "completed" || string(x.Result) != "c" || x.FinishedAtMs != 10 {
			t.Errorf("first item %+v", x)
		}
		if x := v.get(ls[0].ExecutionID); x.State != "completed" || x.Result != nil {
			t.Errorf("second item %+v", x)
		}
		if x := v.get(ls[1].ExecutionID); x.State != "running" {
			t.Errorf("the execution left out %+v", x)
		}
		again := writeGet(v, func(ctx context.Context, q engine.Queries) ([]engine.LeaseRef, error) {
			return q.LeaseCompleteMany(ctx, []engine.LeaseRef{ref(ls[0]), ref(ls[1])}, [][]byte{[]byte("x"), []byte("b")}, 11)
		})
		if len(again) != 1 || again[0] != ref(ls[1]) {
			t.Fatalf("second batch completed %v, want only %v", again, ref(ls[1]))
		}
		if x := v.get(ls[0].ExecutionID); x.Result != nil || x.FinishedAtMs != 10 {
			t.Errorf("a completed lease completed again: %+v", x)
		}
	})
	t.Run("Expired", func(t *testing.T) {
		v, ls := leased(t, h, 1, 1, 0)
		done := writeGet(v, func(ctx context.Context, q engine.Queries) ([]engine.LeaseRef, error) {
			return q.LeaseCompleteMany(ctx, []engine.LeaseRef{ref(ls[0])}, [][]byte{[]byte("late")}, 1000)
		})
		if len(done) != 0 || v.get(ls[0].ExecutionID).State != "running" {
			t.Fatalf("an expired lease completed: %v", done)
		}
	})
	t.Run("Empty", func(t *testing.T) {
		v := setup(t, h)
		done := writeGet(v, func(ctx context.Context, q engine.Queries) ([]engine.LeaseRef, error) {
			return q.LeaseCompleteMany(ctx, nil, nil, 10)
		})
		if len(done) != 0 {
			t.Fatalf("completed %v", done)
		}
	})
	t.Run("LeaseGivenTwice", func(t *testing.T) {
		// A lease given twice is completed (and reported) once.
		v, ls := leased(t, h, 2, 1, 0)
		done := writeGet(v, func(ctx context.Context, q engine.Queries) ([]engine.LeaseRef, error) {
			return q.LeaseCompleteMany(ctx, []engine.LeaseRef{ref(ls[0]), ref(ls[0]), ref(ls[1])}, [][]byte{[]byte("a"), []byte("a"), nil}, 10)
		})
		if len(done) != 2 || !slices.Contains(done, ref(ls[0])) || !slices.Contains(done, ref(ls[1])) {
			t.Fatalf("completed %v, want each lease once", done)
		}
		if x := v.get(ls[0].ExecutionID); x.State != "completed" || string(x.Result) != "a" {
			t.Errorf("the lease given twice: %+v", x)
		}
	})
	t.Run("FencesEachLease", func(t *testing.T) { testLeaseCompleteMany(t, h.Open(t, h.Fresh(t))) })
	t.Run("OldAndCurrentLease", func(t *testing.T) { testCompleteOldAndCurrent(t, h.Open(t, h.Fresh(t))) })
}

// testLeaseRelease: a released lease gives its attempt back and stays
// fenced; stale and revoked leases are ErrNoRows.
func testLeaseRelease(t *testing.T, h Harness) {
	t.Run("GivesTheAttemptBack", func(t *testing.T) { testRelease(t, h.Open(t, h.Fresh(t))) })
	t.Run("KeepsRunAtAndPayload", func(t *testing.T) {
		v := setup(t, h)
		v.register("ns", "i", []string{"l"}, nil, 1, 1000000)
		e := v.execution("ns", "l")
		e.CreatedAtMs, e.RunAtMs, e.Payload, e.MaxAttempts = 1, 300, []byte("p"), 2
		v.insert(e)
		l := v.claimAt("ns", "i", 1, 300, 1000)[0]
		must(t, v.tryLease(func(ctx context.Context, q engine.Queries) error { return q.LeaseRelease(ctx, ref(l), 310) }))
		x := v.get(e.ID)
		if x.State != "waiting" || x.Attempts != 0 || x.RunAtMs != 300 || x.FinishedAtMs != 0 || x.LastError != "" {
			t.Fatalf("after release %+v", x)
		}
		// Ready again at once, by any clock: a claim at an earlier time takes it.
		again := v.claimAt("ns", "i", 1, 100, 1000)
		if len(again) != 1 || again[0].ExecutionID != e.ID || string(again[0].Payload) != "p" || again[0].AttemptIndex != 1 {
			t.Fatalf("claim after release %+v", again)
		}
	})
	t.Run("Stale", func(t *testing.T) {
		v, ls := leased(t, h, 1, 1, 0)
		epoch, leaseID := stale(ls[0])
		for _, l := range []engine.LeaseRef{epoch, leaseID} {
			wantNoRows(t, "stale release", v.tryLease(func(ctx context.Context, q engine.Queries) error { return q.LeaseRelease(ctx, l, 10) }))
		}
		if x := v.get(ls[0].ExecutionID); x.State != "running" || x.Attempts != 1 {
			t.Fatalf("a stale release changed it: %+v", x)
		}
	})
	t.Run("Revoked", func(t *testing.T) {
		v, ls := leased(t, h, 1, 1, 0)
		v.write(func(ctx context.Context, q engine.Queries) error {
			return q.LeaseRevokeHeldBy(ctx, []engine.WorkerKey{wk("ns", "i")}, 5)
		})
		wantNoRows(t, "release of a revoked lease", v.tryLease(func(ctx context.Context, q engine.Queries) error {
			return q.LeaseRelease(ctx, ref(ls[0]), 4)
		}))
	})
}

// testLeaseFindHeld: the leases among those asked that the worker holds now;
// not another worker's, nor ended ones, nor unknown ids.
func testLeaseFindHeld(t *testing.T, h Harness) {
	v, ls := leased(t, h, 3, 1, 0)
	v.register("ns", "j", []string{"l"}, nil, 1, 1000000)
	other := v.insert(v.execution("ns", "l"))
	theirs := v.claimAt("ns", "j", 1, 3, 1000)[0]
	if theirs.ExecutionID != other[0] {
		t.Fatalf("worker j claimed %v", theirs)
	}
	find := func(k engine.WorkerKey, ids ...uuid.UUID) []engine.LeaseRef {
		return readGet(v, func(ctx context.Context, q engine.Queries) ([]engine.LeaseRef, error) {
			return q.LeaseFindHeld(ctx, k, ids)
		})
	}
	t.Run("Held", func(t *testing.T) {
		got := find(wk("ns", "i"), ls[0].LeaseID, ls[2].LeaseID, uuid.New(), theirs.LeaseID)
		if len(got) != 2 || !slices.Contains(got, ref(ls[0])) || !slices.Contains(got, ref(ls[2])) {
			t.Fatalf("held %v, want %v and %v", got, ref(ls[0]), ref(ls[2]))
		}
	})
	t.Run("OtherWorker", func(t *testing.T) {
		if got := find(wk("ns", "j"), ls[0].LeaseID, theirs.LeaseID); len(got) != 1 || got[0] != ref(theirs) {
			t.Fatalf("worker j holds %v, want only %v", got, ref(theirs))
		}
		if got := find(wk("other", "i"), ls[0].LeaseID); len(got) != 0 {
			t.Fatalf("a worker of another namespace holds %v", got)
		}
	})
	t.Run("Ended", func(t *testing.T) {
		v.complete(ls[0], 10, nil)
		if got := find(wk("ns", "i"), ls[0].LeaseID, ls[1].LeaseID); len(got) != 1 || got[0] != ref(ls[1]) {
			t.Fatalf("held %v, want only %v", got, ref(ls[1]))
		}
	})
	t.Run("None", func(t *testing.T) {
		if got := find(wk("ns", "i")); len(got) != 0 {
			t.Fatalf("held %v of no lease ids", got)
		}
	})
}

// testLeaseGetOutcome: "completed" or "failed" when the holder's outcome
// ended the lease; ErrNoRows while it runs, when it was lost (released,
// reclaimed, cancelled) and for a lease id or epoch that is not its own.
func testLeaseGetOutcome(t *testing.T, h Harness) {
	v, ls := leased(t, h, 5, 2, 0)
	outcome := func(l engine.LeaseRef) (string, error) {
		return tryRead(v, func(ctx context.Context, q engine.Queries) (string, error) { return q.LeaseGetOutcome(ctx, l) })
	}
	want := func(what string, l engine.LeaseRef, wantOutcome string) {
		t.Helper()
		got, err := outcome(l)
		if err != nil || got != wantOutcome {
			t.Errorf("%s: %q, %v; want %q", what, got, err, wantOutcome)
		}
	}
	t.Run("Running", func(t *testing.T) {
		_, err := outcome(ref(ls[0]))
		wantNoRows(t, "running lease", err)
	})
	t.Run("Completed", func(t *testing.T) {
		v.complete(ls[0], 10, nil)
		want("completed", ref(ls[0]), "completed")
		epoch, leaseID := stale(ls[0])
		_, err := outcome(epoch)
		wantNoRows(t, "completed, another epoch", err)
		_, err = outcome(leaseID)
		wantNoRows(t, "completed, another lease id", err)
	})
	t.Run("FailedWaitingAgain", func(t *testing.T) {
		v.fail(ls[1], 10, "once")
		want("failed with an attempt left", ref(ls[1]), "failed")
		// The next lease's outcome is its own.
		next := v.claimAt("ns", "i", 1, 11, 1000)[0]
		if next.ExecutionID != ls[1].ExecutionID {
			t.Fatalf("claimed %v", next)
		}
		_, err := outcome(ref(next))
		wantNoRows(t, "the next lease, running", err)
		v.complete(next, 12, nil)
		want("the first lease after the next completed", ref(ls[1]), "failed")
		want("the next lease", ref(next), "completed")
	})
	t.Run("Released", func(t *testing.T) {
		must(t, v.tryLease(func(ctx context.Context, q engine.Queries) error { return q.LeaseRelease(ctx, ref(ls[2]), 10) }))
		_, err := outcome(ref(ls[2]))
		wantNoRows(t, "released lease", err)
	})
	t.Run("Cancelled", func(t *testing.T) {
		writeGet(v, func(ctx context.Context, q engine.Queries) (bool, error) {
			return q.ExecutionCancel(ctx, ls[3].ExecutionID, "stop", 10)
		})
		_, err := outcome(ref(ls[3]))
		wantNoRows(t, "cancelled execution's lease", err)
	})
	t.Run("Reclaimed", func(t *testing.T) {
		writeGet(v, func(ctx context.Context, q engine.Queries) ([]uuid.UUID, error) {
			return q.LeaseReclaimBatch(ctx, 1000, 10)
		})
		_, err := outcome(ref(ls[4]))
		wantNoRows(t, "reclaimed lease", err)
	})
}

// testWorkerNextRunAt: the earliest RunAt after now among the scheduled
// executions of the worker's lanes (0: none); a worker not alive is
// ErrNoRows.
func testWorkerNextRunAt(t *testing.T, h Harness) {
	v := setup(t, h)
	v.register("ns", "one", []string{"a"}, nil, 1, 1000000)
	v.register("ns", "many", []string{"a", "b"}, nil, 1, 1000000)
	v.register("ns", "none", nil, nil, 1, 1000000)
	v.register("ns", "lapsed", []string{"a"}, nil, 1, 10)
	at := func(ns, lane string, runAt int64) engine.Execution {
		e := v.execution(ns, lane)
		e.CreatedAtMs, e.RunAtMs = 1, runAt
		return e
	}
	v.insert(at("ns", "a", 900), at("ns", "a", 500), at("ns", "b", 300), at("ns", "c", 100), at("other", "a", 50), at("ns", "a", 1))
	next := func(inst string, now int64) (int64, error) {
		return tryRead(v, func(ctx context.Context, q engine.Queries) (int64, error) {
			return q.WorkerNextRunAt(ctx, wk("ns", inst), now)
		})
	}
	for _, tc := range []struct {
		name, inst string
		now, want  int64
	}{
		{"OneLane", "one", 10, 500},
		{"ManyLanes", "many", 10, 300},
		{"AfterNow", "many", 300, 500},
		{"LastOne", "one", 500, 900},
		{"NoneLeft", "one", 900, 0},
		{"NoLanes", "none", 10, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := next(tc.inst, tc.now)
			must(t, err)
			if got != tc.want {
				t.Fatalf("WorkerNextRunAt(%s, %d) = %d, want %d", tc.inst, tc.now, got, tc.want)
			}
		})
	}
	t.Run("NotAlive", func(t *testing.T) {
		_, err := next("lapsed", 11)
		wantNoRows(t, "lapsed worker", err)
		_, err = next("nobody", 11)
		wantNoRows(t, "unknown worker", err)
	})
}

// testLeaseFail: the current lease fails its attempt: the execution waits
// again (at once, or after its backoff, doubling per attempt) while
// attempts remain, else ends failed, with the reason; a stale or expired
// lease is ErrNoRows.
func testLeaseFail(t *testing.T, h Harness) {
	fail := func(v *env, l engine.LeaseRef, now int64, reason string) error {
		return v.tryLease(func(ctx context.Context, q engine.Queries) error { return q.LeaseFail(ctx, l, now, reason) })
	}
	t.Run("RetriesAtOnce", func(t *testing.T) {
		v, ls := leased(t, h, 1, 2, 0)
		must(t, fail(v, ref(ls[0]), 10, "first"))
		x := v.get(ls[0].ExecutionID)
		if x.State != "waiting" || x.Attempts != 1 || x.LastError != "first" || x.RunAtMs != 10 || x.FinishedAtMs != 0 {
			t.Fatalf("after the first failure %+v", x)
		}
		again := v.claimAt("ns", "i", 1, 10, 1000)
		if len(again) != 1 || again[0].AttemptIndex != 2 || again[0].Epoch != ls[0].Epoch+1 {
			t.Fatalf("claim after the failure %+v", again)
		}
		must(t, fail(v, ref(again[0]), 20, "second"))
		x = v.get(ls[0].ExecutionID)
		if x.State != "failed" || x.Attempts != 2 || x.LastError != "second" || x.FinishedAtMs != 20 {
			t.Fatalf("after the last failure %+v", x)
		}
		if ls := v.claimAt("ns", "i", 1, 30, 1000); len(ls) != 0 {
			t.Fatalf("claimed a failed execution: %v", ls)
		}
	})
	t.Run("Backoff", func(t *testing.T) {
		v, ls := leased(t, h, 1, 3, 100)
		must(t, fail(v, ref(ls[0]), 10, "first"))
		if x := v.get(ls[0].ExecutionID); x.State != "waiting" || x.RunAtMs != 110 {
			t.Fatalf("after the first failure %+v, want RunAt 110", x)
		}
		if got := v.claimAt("ns", "i", 1, 109, 1000); len(got) != 0 {
			t.Fatalf("claimed %v before the backoff ended", got)
		}
		second := v.claimAt("ns", "i", 1, 110, 1000)
		if len(second) != 1 {
			t.Fatal("not claimable once the backoff ended")
		}
		must(t, fail(v, ref(second[0]), 120, "second"))
		if x := v.get(ls[0].ExecutionID); x.RunAtMs != 320 {
			t.Fatalf("after the second failure RunAt %d, want 120 + 2×100", x.RunAtMs)
		}
	})
	t.Run("Stale", func(t *testing.T) {
		v, ls := leased(t, h, 1, 2, 0)
		epoch, leaseID := stale(ls[0])
		wantNoRows(t, "stale epoch", fail(v, epoch, 10, "x"))
		wantNoRows(t, "other lease id", fail(v, leaseID, 10, "x"))
		wantNoRows(t, "at expiry", fail(v, ref(ls[0]), 1000, "x"))
		if x := v.get(ls[0].ExecutionID); x.State != "running" || x.LastError != "" || x.Attempts != 1 {
			t.Fatalf("a refused failure changed it: %+v", x)
		}
		v.sound()
	})
}
