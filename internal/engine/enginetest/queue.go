package enginetest

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/rosterdb/roster/internal/engine"
)

// queueTests are the tests of snoozes and the attempt history, and of the
// metadata an execution carries to its leases (a part of the claim's and
// the settle's tests).
func queueTests() map[string]methodTest {
	return map[string]methodTest{
		"LeaseSnooze": testLeaseSnooze,
		"AttemptList": testAttemptList,
	}
}

// testLeaseSnooze: a snoozed lease gives its attempt back, stays fenced, and
// its execution waits until the new RunAt (ready at once when it is due,
// else scheduled), recorded as snoozed; a stale, expired or revoked lease
// is ErrNoRows and changes nothing; a snooze is an outcome of Settle.
func testLeaseSnooze(t *testing.T, h Harness) {
	snooze := func(v *env, l engine.LeaseRef, now, runAt int64) error {
		return v.tryLease(func(ctx context.Context, q engine.Queries) error { return q.LeaseSnooze(ctx, l, now, runAt) })
	}
	t.Run("Later", func(t *testing.T) {
		v, ls := leased(t, h, 1, 1, 0)
		must(t, snooze(v, ref(ls[0]), 10, 500))
		x := v.get(ls[0].ExecutionID)
		if x.State != "waiting" || x.Attempts != 0 || x.RunAtMs != 500 || x.FinishedAtMs != 0 {
			t.Fatalf("after snooze %+v", x)
		}
		if got := v.claimAt("ns", "i", 1, 499, 2000); len(got) != 0 {
			t.Fatalf("claimed before its RunAt: %+v", got)
		}
		again := v.claimAt("ns", "i", 1, 500, 2000)
		if len(again) != 1 || again[0].AttemptIndex != 1 || again[0].Epoch != ls[0].Epoch+1 {
			t.Fatalf("claim at its RunAt %+v", again)
		}
		wantNoRows(t, "the snoozed lease", snooze(v, ref(ls[0]), 600, 600))
		got, err := tryRead(v, func(ctx context.Context, q engine.Queries) (string, error) { return q.LeaseGetOutcome(ctx, ref(ls[0])) })
		if err != nil || got != "snoozed" {
			t.Fatalf("outcome %q, %v", got, err)
		}
	})
	t.Run("Now", func(t *testing.T) {
		v, ls := leased(t, h, 1, 1, 0)
		must(t, snooze(v, ref(ls[0]), 10, 10))
		if again := v.claimAt("ns", "i", 1, 5, 2000); len(again) != 1 {
			t.Fatalf("a snooze until now is not ready for every clock: %+v", again)
		}
	})
	t.Run("Lost", func(t *testing.T) {
		v, ls := leased(t, h, 2, 1, 0)
		epoch, leaseID := stale(ls[0])
		wantNoRows(t, "stale epoch", snooze(v, epoch, 10, 20))
		wantNoRows(t, "other lease id", snooze(v, leaseID, 10, 20))
		wantNoRows(t, "expired", snooze(v, ref(ls[0]), 1000, 2000))
		v.write(func(ctx context.Context, q engine.Queries) error {
			return q.LeaseRevokeHeldBy(ctx, []engine.WorkerKey{wk("ns", "i")}, 5)
		})
		wantNoRows(t, "revoked", snooze(v, ref(ls[1]), 4, 20))
		for _, l := range ls {
			if x := v.get(l.ExecutionID); x.State != "running" || x.Attempts != 1 {
				t.Fatalf("a lost snooze changed it: %+v", x)
			}
		}
	})
	t.Run("Settle", func(t *testing.T) {
		v, ls := leased(t, h, 2, 1, 0)
		stale, _ := stale(ls[1])
		p := params("ns", "i", 1, 10, 2000)
		res := v.e.Settle(v.ctx, 10, []engine.Outcome{
			{Lease: ref(ls[0]), Snooze: true, RunAtMs: 300},
			{Lease: stale, Snooze: true, RunAtMs: 300},
		}, &p)
		if res.Errs[0] != nil || res.Errs[1] != engine.ErrNoRows {
			t.Fatalf("Errs %v", res.Errs)
		}
		if x := v.get(ls[0].ExecutionID); x.State != "waiting" || x.RunAtMs != 300 || x.Attempts != 0 {
			t.Fatalf("snoozed in a settle %+v", x)
		}
		if res.ClaimErr != nil || len(res.Claim.Leases) != 0 || res.Claim.NextRunAtMs != 300 {
			t.Fatalf("the settle's claim: %+v, %v (want nothing, next at 300)", res.Claim, res.ClaimErr)
		}
	})
}

// testAttemptList: the history in epoch order (failed, reclaimed, released,
// snoozed and cancelled attempts recorded with their errors, the row's
// lease while running and once completed); none for an execution never
// claimed, or unknown.
func testAttemptList(t *testing.T, h Harness) {
	list := func(v *env, id uuid.UUID) []engine.Attempt {
		t.Helper()
		return readGet(v, func(ctx context.Context, q engine.Queries) ([]engine.Attempt, error) { return q.AttemptList(ctx, id) })
	}
	v := setup(t, h)
	v.register("ns", "i", []string{"l"}, nil, 1, 1000000)
	e := v.execution("ns", "l")
	e.MaxAttempts = 3
	v.insert(e)
	if got := list(v, e.ID); len(got) != 0 {
		t.Fatalf("never claimed: %+v", got)
	}
	if got := list(v, uuid.New()); len(got) != 0 {
		t.Fatalf("unknown: %+v", got)
	}
	l := v.claimAt("ns", "i", 1, 10, 100)[0]
	v.fail(l, 11, "boom")
	v.claimAt("ns", "i", 1, 20, 30)
	if _, err := tryWrite(v, func(ctx context.Context, q engine.Queries) ([]uuid.UUID, error) {
		return q.LeaseReclaimBatch(ctx, 40, 10)
	}); err != nil {
		t.Fatal(err)
	}
	l = v.claimAt("ns", "i", 1, 50, 1000)[0]
	must(t, v.tryLease(func(ctx context.Context, q engine.Queries) error { return q.LeaseRelease(ctx, ref(l), 51) }))
	l = v.claimAt("ns", "i", 1, 60, 1000)[0]
	must(t, v.tryLease(func(ctx context.Context, q engine.Queries) error { return q.LeaseSnooze(ctx, ref(l), 61, 61) }))
	l = v.claimAt("ns", "i", 1, 70, 1000)[0]
	want := []engine.Attempt{
		{Epoch: 1, AttemptIndex: 1, InstanceID: "i", State: "failed", ClaimedAtMs: 10, EndedAtMs: 11, Error: "boom"},
		{Epoch: 2, AttemptIndex: 2, InstanceID: "i", State: "reclaimed", ClaimedAtMs: 20, EndedAtMs: 40, Error: "lease expired"},
		{Epoch: 3, AttemptIndex: 3, InstanceID: "i", State: "released", ClaimedAtMs: 50, EndedAtMs: 51},
		{Epoch: 4, AttemptIndex: 3, InstanceID: "i", State: "snoozed", ClaimedAtMs: 60, EndedAtMs: 61},
		{Epoch: 5, AttemptIndex: 3, InstanceID: "i", State: "running", ClaimedAtMs: 70},
	}
	check := func(got []engine.Attempt) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("attempts %+v\nwant %+v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("attempt %d: %+v, want %+v", i, got[i], want[i])
			}
		}
	}
	check(list(v, e.ID))
	v.complete(l, 71, nil)
	want[4].State, want[4].EndedAtMs = "completed", 71
	check(list(v, e.ID))

	c := v.execution("ns", "l")
	v.insert(c)
	cl := v.claimAt("ns", "i", 1, 80, 1000)[0]
	if cl.ExecutionID != c.ID {
		t.Fatalf("claimed %s", cl.ExecutionID)
	}
	v.write(func(ctx context.Context, q engine.Queries) error {
		_, err := q.ExecutionCancel(ctx, c.ID, "stop", 81)
		return err
	})
	got := list(v, c.ID)
	if len(got) != 1 || got[0] != (engine.Attempt{Epoch: 1, AttemptIndex: 1, InstanceID: "i", State: "cancelled", ClaimedAtMs: 80, EndedAtMs: 81, Error: "stop"}) {
		t.Fatalf("cancelled %+v", got)
	}
	v.sound()
}

// testClaimMetadata: every claim path hands each lease its execution's
// metadata ("" when none).
func testClaimMetadata(t *testing.T, h Harness, claim claimFunc) {
	v := setup(t, h)
	v.register("ns", "i", []string{"l"}, nil, 1, 1000000)
	with, without := v.execution("ns", "l"), v.execution("ns", "l")
	with.Metadata = `{"traceparent":"00-x"}`
	without.CreatedAtMs, without.RunAtMs = 2, 2
	v.insert(with, without)
	res, err := claim(v, params("ns", "i", 2, 10, 1000))
	must(t, err)
	if len(res.Leases) != 2 || res.Leases[0].Metadata != with.Metadata || res.Leases[1].Metadata != "" {
		t.Fatalf("leases %+v", res.Leases)
	}
	if x := v.get(with.ID); x.Metadata != with.Metadata {
		t.Fatalf("stored %q", x.Metadata)
	}
}
