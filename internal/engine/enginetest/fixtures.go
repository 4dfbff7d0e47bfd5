package enginetest

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/rosterdb/roster/internal/engine"
)

// sortedIDs returns ids in ascending order (the databases' order of uuids).
func sortedIDs(ids []uuid.UUID) []uuid.UUID {
	out := slices.Clone(ids)
	slices.SortFunc(out, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	return out
}

// sameIDs reports whether a and b hold the same ids, in any order.
func sameIDs(a, b []uuid.UUID) bool {
	return slices.Equal(sortedIDs(a), sortedIDs(b))
}

// fmtIDs shows ids briefly, for failure messages.
func fmtIDs(ids []uuid.UUID) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = id.String()[len(id.String())-8:]
	}
	return fmt.Sprint(s)
}

// executionIDs are the executions of claimed leases, in their order.
func executionIDs(ls []engine.ClaimedLease) []uuid.UUID {
	ids := make([]uuid.UUID, len(ls))
	for i, l := range ls {
		ids[i] = l.ExecutionID
	}
	return ids
}

// execution is a new execution of ns and lane, claimable from 1 ms
// (created then), with one attempt.
func (v *env) execution(ns, lane string) engine.Execution {
	return engine.Execution{ID: newID(v.t), Namespace: ns, Lane: lane, MaxAttempts: 1, CreatedAtMs: 1, RunAtMs: 1}
}

// insert adds es one by one and returns their ids.
func (v *env) insert(es ...engine.Execution) []uuid.UUID {
	v.t.Helper()
	ids := make([]uuid.UUID, len(es))
	v.write(func(ctx context.Context, q engine.Queries) error {
		for i, e := range es {
			if err := q.ExecutionInsert(ctx, e); err != nil {
				return err
			}
			ids[i] = e.ID
		}
		return nil
	})
	return ids
}

// get reads an execution that must exist.
func (v *env) get(id uuid.UUID) engine.Execution {
	v.t.Helper()
	return readGet(v, func(ctx context.Context, q engine.Queries) (engine.Execution, error) { return q.ExecutionGet(ctx, id) })
}

// params asks for n leases for worker inst of ns at now, expiring at expires.
func params(ns, inst string, n int, now, expires int64) engine.ClaimParams {
	p := engine.ClaimParams{Namespace: ns, InstanceID: inst, NowMs: now, ExpiresAtMs: expires}
	for range n {
		id, _ := uuid.NewV7()
		p.LeaseIDs = append(p.LeaseIDs, id)
	}
	return p
}

// claimAt claims up to n executions for worker inst of ns at now, the leases
// expiring at expires.
func (v *env) claimAt(ns, inst string, n int, now, expires int64) []engine.ClaimedLease {
	v.t.Helper()
	res, err := v.e.ExecutionClaim(v.ctx, params(ns, inst, n, now, expires))
	if err != nil {
		v.t.Fatal(err)
	}
	return res.Leases
}

// newID is a fresh time-ordered id.
func newID(t *testing.T) uuid.UUID {
	t.Helper()
	id, err := uuid.NewV7()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// complete completes lease l at now with result; it must hold.
func (v *env) complete(l engine.ClaimedLease, now int64, result []byte) {
	v.t.Helper()
	v.write(func(ctx context.Context, q engine.Queries) error { return q.LeaseComplete(ctx, ref(l), now, result) })
}

// fail fails lease l at now with reason; it must hold.
func (v *env) fail(l engine.ClaimedLease, now int64, reason string) {
	v.t.Helper()
	v.write(func(ctx context.Context, q engine.Queries) error { return q.LeaseFail(ctx, ref(l), now, reason) })
}

// read runs fn in a Read and fails the test on its error.
func (v *env) read(fn func(ctx context.Context, q engine.Queries) error) {
	v.t.Helper()
	if err := v.e.Read(v.ctx, fn); err != nil {
		v.t.Fatal(err)
	}
}

// tryLease runs one call that presents a lease in a Write and returns its error.
func (v *env) tryLease(fn func(ctx context.Context, q engine.Queries) error) error {
	return v.e.Write(v.ctx, fn)
}

// sound runs Check and fails the test on an error or any problem found.
func (v *env) sound() {
	v.t.Helper()
	problems, err := v.e.Check(v.ctx)
	if err != nil {
		v.t.Fatal(err)
	}
	if len(problems) > 0 {
		v.t.Fatalf("Check found %v", problems)
	}
}
