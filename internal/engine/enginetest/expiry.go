package enginetest

// Expired leases: revoke, list and reclaim, registered by leaseTests.

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/rosterdb/roster/internal/engine"
)

// testLeaseRevokeHeldBy: every running lease of the instances ends for good
// at now (expired, never renewed or completed); others' leases are
// untouched.
func testLeaseRevokeHeldBy(t *testing.T, h Harness) {
	v, ls := leased(t, h, 2, 1, 0)
	v.register("ns", "j", []string{"l"}, nil, 1, 1000000)
	v.insert(v.execution("ns", "l"))
	theirs := v.claimAt("ns", "j", 1, 3, 1000)[0]
	v.write(func(ctx context.Context, q engine.Queries) error {
		return q.LeaseRevokeHeldBy(ctx, []engine.WorkerKey{wk("ns", "i"), wk("other", "j")}, 100)
	})
	t.Run("Revoked", func(t *testing.T) {
		for _, l := range ls {
			x := v.get(l.ExecutionID)
			if x.State != "running" || x.ExpiresAtMs != 100 {
				t.Fatalf("revoked %+v: want running, expired at 100", x)
			}
			wantNoRows(t, "renew", v.tryLease(func(ctx context.Context, q engine.Queries) error {
				_, err := q.LeaseRenew(ctx, ref(l), 50, 5000)
				return err
			}))
			wantNoRows(t, "complete", v.tryLease(func(ctx context.Context, q engine.Queries) error {
				return q.LeaseComplete(ctx, ref(l), 50, nil)
			}))
			wantNoRows(t, "fail", v.tryLease(func(ctx context.Context, q engine.Queries) error { return q.LeaseFail(ctx, ref(l), 50, "x") }))
		}
		expired := readGet(v, func(ctx context.Context, q engine.Queries) ([]engine.ExpiredLease, error) {
			return q.LeaseListExpired(ctx, engine.ExpiredLeaseListParams{AsOfMs: 100, AfterExpiresAtMs: math.MinInt64, Limit: 10})
		})
		if len(expired) != 2 {
			t.Fatalf("expired %+v, want the two revoked leases", expired)
		}
	})
	t.Run("OthersUntouched", func(t *testing.T) {
		if x := v.get(theirs.ExecutionID); x.ExpiresAtMs != 1000 {
			t.Fatalf("another worker's lease %+v", x)
		}
		must(t, v.tryLease(func(ctx context.Context, q engine.Queries) error {
			_, err := q.LeaseRenew(ctx, ref(theirs), 200, 2000)
			return err
		}))
	})
	t.Run("EarlierExpiryKept", func(t *testing.T) {
		v.write(func(ctx context.Context, q engine.Queries) error {
			return q.LeaseRevokeHeldBy(ctx, []engine.WorkerKey{wk("ns", "j")}, 5000)
		})
		if x := v.get(theirs.ExecutionID); x.ExpiresAtMs != 2000 {
			t.Fatalf("a revoke after the expiry moved it: %+v", x)
		}
	})
}

// testLeaseListExpired: a keyset page of the running leases expired by
// AsOf, by (expiry, execution id), of one namespace or all.
func testLeaseListExpired(t *testing.T, h Harness) {
	v := setup(t, h)
	v.register("a", "i", []string{"l"}, nil, 1, 1000000)
	v.register("b", "j", []string{"l"}, nil, 1, 1000000)
	var ls []engine.ClaimedLease
	for _, c := range []struct {
		ns, inst string
		expires  int64
	}{{"a", "i", 300}, {"b", "j", 100}, {"a", "i", 200}, {"a", "i", 200}, {"b", "j", 5000}} {
		v.insert(v.execution(c.ns, "l"))
		ls = append(ls, v.claimAt(c.ns, c.inst, 1, 2, c.expires)...)
	}
	if len(ls) != 5 {
		t.Fatalf("claimed %d", len(ls))
	}
	// Order: 100 (b), then the two at 200 by id, then 300.
	at200 := sortedIDs([]uuid.UUID{ls[2].ExecutionID, ls[3].ExecutionID})
	list := func(p engine.ExpiredLeaseListParams) []engine.ExpiredLease {
		return readGet(v, func(ctx context.Context, q engine.Queries) ([]engine.ExpiredLease, error) {
			return q.LeaseListExpired(ctx, p)
		})
	}
	ids := func(es []engine.ExpiredLease) []uuid.UUID {
		out := []uuid.UUID{}
		for _, e := range es {
			out = append(out, e.ExecutionID)
		}
		return out
	}
	start := engine.ExpiredLeaseListParams{AfterExpiresAtMs: math.MinInt64, AfterExecutionID: uuid.Nil}
	for _, tc := range []struct {
		name string
		edit func(p *engine.ExpiredLeaseListParams)
		want []uuid.UUID
	}{
		{"All", func(p *engine.ExpiredLeaseListParams) { p.AsOfMs, p.Limit = 1000, 10 },
			[]uuid.UUID{ls[1].ExecutionID, at200[0], at200[1], ls[0].ExecutionID}},
		{"AsOf", func(p *engine.ExpiredLeaseListParams) { p.AsOfMs, p.Limit = 200, 10 },
			[]uuid.UUID{ls[1].ExecutionID, at200[0], at200[1]}},
		{"Namespace", func(p *engine.ExpiredLeaseListParams) { p.Namespace, p.AsOfMs, p.Limit = "a", 1000, 10 },
			[]uuid.UUID{at200[0], at200[1], ls[0].ExecutionID}},
		{"Limit", func(p *engine.ExpiredLeaseListParams) { p.AsOfMs, p.Limit = 1000, 2 },
			[]uuid.UUID{ls[1].ExecutionID, at200[0]}},
		{"AfterSameExpiry", func(p *engine.ExpiredLeaseListParams) {
			p.AsOfMs, p.Limit, p.AfterExpiresAtMs, p.AfterExecutionID = 1000, 10, 200, at200[0]
		}, []uuid.UUID{at200[1], ls[0].ExecutionID}},
		{"AfterLast", func(p *engine.ExpiredLeaseListParams) {
			p.AsOfMs, p.Limit, p.AfterExpiresAtMs, p.AfterExecutionID = 1000, 10, 300, ls[0].ExecutionID
		}, []uuid.UUID{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := start
			tc.edit(&p)
			if got := ids(list(p)); !slices.Equal(got, tc.want) {
				t.Fatalf("LeaseListExpired(%+v) = %s, want %s", p, fmtIDs(got), fmtIDs(tc.want))
			}
		})
	}
	t.Run("Fields", func(t *testing.T) {
		p := start
		p.Namespace, p.AsOfMs, p.Limit = "b", 1000, 10
		got := list(p)
		want := engine.ExpiredLease{ExecutionID: ls[1].ExecutionID, LeaseID: ls[1].LeaseID, AttemptIndex: 1, Epoch: ls[1].Epoch,
			Namespace: "b", InstanceID: "j", ExpiresAtMs: 100}
		if len(got) != 1 || got[0] != want {
			t.Fatalf("expired %+v, want %+v", got, want)
		}
	})
	t.Run("EndedLeasesLeftOut", func(t *testing.T) {
		v.complete(ls[4], 10, nil)
		p := start
		p.AsOfMs, p.Limit = 100000, 10
		if got := ids(list(p)); slices.Contains(got, ls[4].ExecutionID) || len(got) != 4 {
			t.Fatalf("expired %s: want the four running leases", fmtIDs(got))
		}
	})
}

// testLeaseReclaimBatch: up to batch expired leases end, soonest first: the
// execution waits again (after its backoff) while attempts remain, else ends
// failed; either way the reclaim is counted. Unexpired leases stay.
func testLeaseReclaimBatch(t *testing.T, h Harness) {
	v := setup(t, h)
	v.register("ns", "i", []string{"l"}, nil, 1, 1000000)
	retry := v.execution("ns", "l")
	retry.MaxAttempts, retry.RetryBackoffMs = 2, 50
	last, later := v.execution("ns", "l"), v.execution("ns", "l")
	v.insert(retry)
	lr := v.claimAt("ns", "i", 1, 2, 100)[0]
	v.insert(last)
	ll := v.claimAt("ns", "i", 1, 2, 200)[0]
	v.insert(later)
	lt := v.claimAt("ns", "i", 1, 2, 5000)[0]
	reclaim := func(now int64, batch int) []uuid.UUID {
		return writeGet(v, func(ctx context.Context, q engine.Queries) ([]uuid.UUID, error) {
			return q.LeaseReclaimBatch(ctx, now, batch)
		})
	}
	t.Run("SoonestFirst", func(t *testing.T) {
		if got := reclaim(1000, 1); !slices.Equal(got, []uuid.UUID{lr.ExecutionID}) {
			t.Fatalf("first batch %s, want %s", fmtIDs(got), fmtIDs([]uuid.UUID{lr.ExecutionID}))
		}
		x := v.get(retry.ID)
		if x.State != "waiting" || x.ReclaimCount != 1 || x.LastError != "lease expired" || x.RunAtMs != 1050 || x.Attempts != 1 {
			t.Fatalf("reclaimed with an attempt left %+v", x)
		}
	})
	t.Run("LastAttempt", func(t *testing.T) {
		if got := reclaim(1000, 10); !slices.Equal(got, []uuid.UUID{ll.ExecutionID}) {
			t.Fatalf("second batch %s", fmtIDs(got))
		}
		x := v.get(last.ID)
		if x.State != "failed" || x.ReclaimCount != 1 || x.LastError != "lease expired" || x.FinishedAtMs != 1000 {
			t.Fatalf("reclaimed on its last attempt %+v", x)
		}
	})
	t.Run("UnexpiredStays", func(t *testing.T) {
		if got := reclaim(1000, 10); len(got) != 0 {
			t.Fatalf("third batch %s, want none", fmtIDs(got))
		}
		if x := v.get(lt.ExecutionID); x.State != "running" || lt.ExecutionID != later.ID {
			t.Fatalf("an unexpired lease was reclaimed: %+v", x)
		}
	})
	t.Run("ReclaimedLeaseFenced", func(t *testing.T) {
		wantNoRows(t, "complete of a reclaimed lease", v.tryLease(func(ctx context.Context, q engine.Queries) error {
			return q.LeaseComplete(ctx, ref(lr), 900, nil)
		}))
	})
	t.Run("ClaimableAfterBackoff", func(t *testing.T) {
		if got := v.claimAt("ns", "i", 1, 1049, 3000); len(got) != 0 {
			t.Fatalf("claimed %v before the backoff ended", got)
		}
		got := v.claimAt("ns", "i", 1, 1050, 3000)
		if len(got) != 1 || got[0].ExecutionID != retry.ID || got[0].AttemptIndex != 2 {
			t.Fatalf("claimed %+v after the backoff", got)
		}
		v.sound()
	})
}
