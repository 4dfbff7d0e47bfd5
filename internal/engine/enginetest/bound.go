package enginetest

// Bound leases (alive while their holder's registration is) and run
// timeouts (a deadline no renewal passes), registered by leaseTests.

import (
	"context"
	"math"
	"testing"

	"github.com/rosterdb/roster/internal/engine"
)

// boundEnv is an env with worker "i" of namespace "ns" (alive from 10 ms
// for 1000 ms: until 1010) holding bound leases on n executions of lane
// "l", claimed at 20 ms; timeoutMs > 0 gives each execution that timeout.
func boundEnv(t *testing.T, h Harness, n int, timeoutMs int64) (*env, []engine.ClaimedLease) {
	t.Helper()
	v := setup(t, h)
	v.register("ns", "i", []string{"l"}, nil, 10, 1000)
	for range n {
		e := v.execution("ns", "l")
		e.MaxAttempts, e.TimeoutMs = 3, timeoutMs
		v.insert(e)
	}
	p := params("ns", "i", n, 20, 0)
	p.Bound = true
	res, err := v.e.ExecutionClaim(v.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Leases) != n {
		t.Fatalf("claimed %d of %d", len(res.Leases), n)
	}
	return v, res.Leases
}

func (v *env) heartbeat(ns, inst string, now int64) {
	v.t.Helper()
	v.write(func(ctx context.Context, q engine.Queries) error {
		_, err := q.WorkerHeartbeat(ctx, wk(ns, inst), now, false)
		return err
	})
}

func (v *env) holderExpiry(l engine.ClaimedLease, now int64) (int64, error) {
	return tryRead(v, func(ctx context.Context, q engine.Queries) (int64, error) {
		return q.LeaseHolderExpiry(ctx, ref(l), now)
	})
}

func (v *env) expired(asOf int64) []engine.ExpiredLease {
	v.t.Helper()
	return readGet(v, func(ctx context.Context, q engine.Queries) ([]engine.ExpiredLease, error) {
		return q.LeaseListExpired(ctx, engine.ExpiredLeaseListParams{AsOfMs: asOf, AfterExpiresAtMs: math.MinInt64, Limit: 100})
	})
}

// testLeaseHolderExpiry: a bound lease is claimed with no expiry of its own
// (the holder's at the claim is reported), its expiry moves with the
// holder's heartbeats at no write of its own, its fence holds while the
// holder is alive and fails once it lapsed; a lease of its own is not bound.
func testLeaseHolderExpiry(t *testing.T, h Harness) {
	v, ls := boundEnv(t, h, 2, 0)
	l := ls[0]
	if l.ExpiresAtMs != 1010 || l.DeadlineMs != 0 {
		t.Fatalf("claimed %+v: want the holder's expiry 1010 and no deadline", l)
	}
	if x := v.get(l.ExecutionID); !x.Bound || x.ExpiresAtMs != engine.NeverMs {
		t.Fatalf("stored %+v: want bound with no expiry of its own", x)
	}
	if got, err := v.holderExpiry(l, 500); err != nil || got != 1010 {
		t.Fatalf("holder expiry at 500 = %d, %v; want 1010", got, err)
	}
	v.heartbeat("ns", "i", 900)
	if got, err := v.holderExpiry(l, 1500); err != nil || got != 1900 {
		t.Fatalf("holder expiry after a heartbeat at 900 = %d, %v; want 1900", got, err)
	}
	if x := v.get(l.ExecutionID); x.ExpiresAtMs != engine.NeverMs {
		t.Fatalf("a heartbeat wrote to the lease: %+v", x)
	}
	// A renewal of its own does not apply to a bound lease.
	wantNoRows(t, "renew bound", v.tryLease(func(ctx context.Context, q engine.Queries) error {
		_, err := q.LeaseRenew(ctx, ref(l), 1000, 5000)
		return err
	}))
	must(t, v.tryLease(func(ctx context.Context, q engine.Queries) error { return q.LeaseComplete(ctx, ref(l), 1800, nil) }))
	// Lapsed holder: the remaining lease is lost to every call.
	other := ls[1]
	_, err := v.holderExpiry(other, 1900)
	wantNoRows(t, "holder expiry once lapsed", err)
	for name, call := range map[string]func(ctx context.Context, q engine.Queries) error{
		"complete": func(ctx context.Context, q engine.Queries) error { return q.LeaseComplete(ctx, ref(other), 1900, nil) },
		"fail":     func(ctx context.Context, q engine.Queries) error { return q.LeaseFail(ctx, ref(other), 1900, "x") },
		"release":  func(ctx context.Context, q engine.Queries) error { return q.LeaseRelease(ctx, ref(other), 1900) },
		"snooze":   func(ctx context.Context, q engine.Queries) error { return q.LeaseSnooze(ctx, ref(other), 1900, 5000) },
	} {
		wantNoRows(t, name+" once the holder lapsed", v.tryLease(call))
	}
}

// testLeaseRevokeLapsedBound: the bound leases of a lapsed holder are
// listed as expired at the holder's expiry (before any revoke), then
// revoked there for good; an alive holder's bound leases and leases of
// their own are untouched; a timeout cuts a bound lease at its deadline.
func testLeaseRevokeLapsedBound(t *testing.T, h Harness) {
	v, ls := boundEnv(t, h, 2, 0)
	v.register("ns", "j", []string{"l"}, nil, 10, 100000)
	v.insert(v.execution("ns", "l"))
	p := params("ns", "j", 1, 30, 0)
	p.Bound = true
	res, err := v.e.ExecutionClaim(v.ctx, p)
	if err != nil || len(res.Leases) != 1 {
		t.Fatalf("claim of j: %+v, %v", res, err)
	}
	alive := res.Leases[0]
	if got := v.expired(1009); len(got) != 0 {
		t.Fatalf("expired before the holder lapsed: %+v", got)
	}
	got := v.expired(2000)
	if len(got) != 2 || got[0].ExpiresAtMs != 1010 || got[1].ExpiresAtMs != 1010 || got[0].InstanceID != "i" {
		t.Fatalf("expired at 2000 = %+v; want i's two leases at 1010", got)
	}
	var n int
	v.write(func(ctx context.Context, q engine.Queries) error {
		var err error
		n, err = q.LeaseRevokeLapsedBound(ctx, 2000, 100)
		return err
	})
	if n != 2 {
		t.Fatalf("revoked %d, want 2", n)
	}
	for _, l := range ls {
		if x := v.get(l.ExecutionID); x.ExpiresAtMs != 1010 {
			t.Fatalf("revoked %+v: want expiry 1010", x)
		}
	}
	if again := v.expired(2000); len(again) != 2 || again[0].ExpiresAtMs != 1010 {
		t.Fatalf("after the revoke: %+v; want the same two, once each", again)
	}
	// Even once the holder heartbeats again (it cannot: lapsed) or registers
	// anew, a revoked lease stays lost.
	v.register("ns", "i", []string{"l"}, nil, 3000, 1000)
	wantNoRows(t, "complete after re-register", v.tryLease(func(ctx context.Context, q engine.Queries) error {
		return q.LeaseComplete(ctx, ref(ls[0]), 3001, nil)
	}))
	if _, err := v.holderExpiry(alive, 2000); err != nil {
		t.Fatalf("the alive holder's bound lease was touched: %v", err)
	}
	ids := readGet(v, func(ctx context.Context, q engine.Queries) ([]engine.ExpiredLease, error) {
		return q.LeaseListExpired(ctx, engine.ExpiredLeaseListParams{AsOfMs: 2000, Namespace: "other", AfterExpiresAtMs: math.MinInt64, Limit: 10})
	})
	if len(ids) != 0 {
		t.Fatalf("another namespace's list: %+v", ids)
	}

	t.Run("Deadline", func(t *testing.T) {
		v, ls := boundEnv(t, h, 1, 300)
		l := ls[0]
		if l.DeadlineMs != 320 || l.ExpiresAtMs != 320 {
			t.Fatalf("claimed %+v: want deadline and expiry 320", l)
		}
		if got, err := v.holderExpiry(l, 100); err != nil || got != 320 {
			t.Fatalf("holder expiry = %d, %v; want the deadline 320", got, err)
		}
		_, err := v.holderExpiry(l, 320)
		wantNoRows(t, "at the deadline", err)
		if got := v.expired(320); len(got) != 1 || got[0].ExpiresAtMs != 320 {
			t.Fatalf("expired at the deadline: %+v", got)
		}
		if got := v.expired(2000); len(got) != 1 || got[0].ExpiresAtMs != 320 {
			t.Fatalf("expired after the holder lapsed too: %+v; want once, at the deadline", got)
		}
		reclaimed := writeGet(v, func(ctx context.Context, q engine.Queries) (int, error) {
			ids, err := q.LeaseReclaimBatch(ctx, 400, 10)
			return len(ids), err
		})
		if x := v.get(l.ExecutionID); reclaimed != 1 || x.State != "waiting" || x.LastError != "timed out" || x.ReclaimCount != 1 {
			t.Fatalf("reclaimed %d: %+v; want waiting, timed out", reclaimed, x)
		}
	})
}

// testLeaseRevokeBoundOfLapsed: before a lapsed row is taken over, its
// bound leases end at its expiry; an alive holder's are untouched.
func testLeaseRevokeBoundOfLapsed(t *testing.T, h Harness) {
	v, ls := boundEnv(t, h, 1, 0)
	v.write(func(ctx context.Context, q engine.Queries) error {
		return q.LeaseRevokeBoundOfLapsed(ctx, wk("ns", "i"), 500)
	})
	if x := v.get(ls[0].ExecutionID); x.ExpiresAtMs != engine.NeverMs || x.State != "running" {
		t.Fatalf("an alive holder's lease was revoked: %+v", x)
	}
	v.write(func(ctx context.Context, q engine.Queries) error {
		return q.LeaseRevokeBoundOfLapsed(ctx, wk("ns", "i"), 1500)
	})
	if x := v.get(ls[0].ExecutionID); x.ExpiresAtMs != 1010 {
		t.Fatalf("a lapsed holder's lease: %+v; want expired at 1010", x)
	}
	v.register("ns", "i", []string{"l"}, nil, 1500, 1000)
	_, err := v.holderExpiry(ls[0], 1600)
	wantNoRows(t, "the old registration's lease in the new one", err)
}

// testTimeoutOwnLease: a lease of its own stops at its deadline: the claim
// and every renewal are cut there, and the reclaim says "timed out".
func testTimeoutOwnLease(t *testing.T, h Harness) {
	v := setup(t, h)
	v.register("ns", "i", []string{"l"}, nil, 1, 1000000)
	e := v.execution("ns", "l")
	e.MaxAttempts, e.TimeoutMs = 2, 250
	v.insert(e)
	l := v.claimAt("ns", "i", 1, 50, 200)[0]
	if l.ExpiresAtMs != 200 || l.DeadlineMs != 300 {
		t.Fatalf("claimed %+v: want expiry 200, deadline 300", l)
	}
	if x := v.get(l.ExecutionID); x.TimeoutMs != 250 || x.DeadlineMs != 300 || x.Bound {
		t.Fatalf("stored %+v", x)
	}
	got := writeGet(v, func(ctx context.Context, q engine.Queries) (int64, error) {
		return q.LeaseRenew(ctx, ref(l), 150, 1000)
	})
	if got != 300 {
		t.Fatalf("renewed to %d, want cut at the deadline 300", got)
	}
	wantNoRows(t, "complete at the deadline", v.tryLease(func(ctx context.Context, q engine.Queries) error {
		return q.LeaseComplete(ctx, ref(l), 300, nil)
	}))
	writeGet(v, func(ctx context.Context, q engine.Queries) (int, error) {
		ids, err := q.LeaseReclaimBatch(ctx, 300, 10)
		return len(ids), err
	})
	if x := v.get(l.ExecutionID); x.LastError != "timed out" || x.State != "waiting" {
		t.Fatalf("after the reclaim: %+v", x)
	}
	atts := readGet(v, func(ctx context.Context, q engine.Queries) ([]engine.Attempt, error) {
		return q.AttemptList(ctx, l.ExecutionID)
	})
	if len(atts) != 1 || atts[0].State != "reclaimed" || atts[0].Error != "timed out" {
		t.Fatalf("attempts %+v", atts)
	}
	// A lease that expired before its deadline is "lease expired".
	l2 := v.claimAt("ns", "i", 1, 400, 500)[0]
	writeGet(v, func(ctx context.Context, q engine.Queries) (int, error) {
		ids, err := q.LeaseReclaimBatch(ctx, 600, 10)
		return len(ids), err
	})
	if x := v.get(l2.ExecutionID); x.LastError != "lease expired" {
		t.Fatalf("expired before its deadline: %+v", x)
	}
}

// testClaimBound: every claim path (a plain claim, a settle's, and the flow
// claim of a lane with limits) stores bound leases with no expiry of their
// own (or their deadline) and reports each lease's expiry as its holder's
// (or its deadline, when sooner), with the deadline.
func testClaimBound(t *testing.T, h Harness, claim claimFunc) {
	for _, flow := range []bool{false, true} {
		t.Run(map[bool]string{false: "Plain", true: "Flow"}[flow], func(t *testing.T) {
			v := setup(t, h)
			v.register("ns", "i", []string{"l"}, nil, 10, 1000)
			if flow {
				v.putLimits(engine.LaneLimits{Namespace: "ns", Lane: "l", MaxRunning: 10})
			}
			plain, timed := v.execution("ns", "l"), v.execution("ns", "l")
			timed.CreatedAtMs, timed.RunAtMs, timed.TimeoutMs = 2, 2, 300
			v.insert(plain, timed)
			p := params("ns", "i", 2, 20, 0)
			p.Bound = true
			res, err := claim(v, p)
			must(t, err)
			if len(res.Leases) != 2 {
				t.Fatalf("leases %+v", res.Leases)
			}
			if l := res.Leases[0]; l.ExpiresAtMs != 1010 || l.DeadlineMs != 0 {
				t.Fatalf("bound lease %+v: want the holder's expiry 1010, no deadline", l)
			}
			if l := res.Leases[1]; l.ExpiresAtMs != 320 || l.DeadlineMs != 320 {
				t.Fatalf("bound lease with a timeout %+v: want expiry and deadline 320", l)
			}
			if x := v.get(plain.ID); !x.Bound || x.ExpiresAtMs != engine.NeverMs {
				t.Fatalf("stored %+v", x)
			}
			if x := v.get(timed.ID); !x.Bound || x.ExpiresAtMs != 320 || x.DeadlineMs != 320 {
				t.Fatalf("stored %+v", x)
			}
		})
	}
}
