package enginetest

// Flow control: lane limits, groups, and the claims they shape (the tests
// registered by flowTests).

import (
	"context"
	"reflect"
	"testing"

	"github.com/rosterdb/roster/internal/engine"
)

// flowTests are the tests of lane limits and groups.
func flowTests() map[string]methodTest {
	return map[string]methodTest{
		"LaneLimitsPut":    testLaneLimitsPut,
		"LaneLimitsList":   testLaneLimitsList,
		"LaneLimitsDelete": testLaneLimitsDelete,
		"LaneTurnsTouch":   testLaneTurnsTouch,
	}
}

func (v *env) putLimits(l engine.LaneLimits) {
	v.t.Helper()
	v.write(func(ctx context.Context, q engine.Queries) error { return q.LaneLimitsPut(ctx, l) })
}

func (v *env) limits(ns string) []engine.LaneLimits {
	v.t.Helper()
	return readGet(v, func(ctx context.Context, q engine.Queries) ([]engine.LaneLimits, error) {
		return q.LaneLimitsList(ctx, ns)
	})
}

// testLaneLimitsPut: a put creates, a second replaces; a cap holds back the
// claims of its lane, a pause all of them.
func testLaneLimitsPut(t *testing.T, h Harness) {
	v := setup(t, h)
	v.register("ns", "i", []string{"l"}, nil, 1, 1000)
	v.insert(v.execution("ns", "l"), v.execution("ns", "l"), v.execution("ns", "l"))
	v.putLimits(engine.LaneLimits{Namespace: "ns", Lane: "l", Paused: true})
	if got := v.claimAt("ns", "i", 5, 2, 500); len(got) != 0 {
		t.Fatalf("a paused lane gave %d leases", len(got))
	}
	v.putLimits(engine.LaneLimits{Namespace: "ns", Lane: "l", MaxRunning: 2})
	if got := v.limits("ns"); !reflect.DeepEqual(got, []engine.LaneLimits{{Namespace: "ns", Lane: "l", MaxRunning: 2}}) {
		t.Fatalf("after a replace: %+v", got)
	}
	if got := v.claimAt("ns", "i", 5, 2, 500); len(got) != 2 {
		t.Fatalf("a cap of 2 gave %d leases", len(got))
	}
	res, err := v.e.ExecutionClaim(v.ctx, params("ns", "i", 5, 2, 500))
	if err != nil || len(res.Leases) != 0 || res.Held != 1 {
		t.Fatalf("a claim at the cap: %d leases, held %d, %v; want none, held 1", len(res.Leases), res.Held, err)
	}
}

// testLaneLimitsList: by namespace and lane; "" lists every namespace.
func testLaneLimitsList(t *testing.T, h Harness) {
	v := setup(t, h)
	a := engine.LaneLimits{Namespace: "a", Lane: "z", Rate: 3, RatePeriodMs: 1000}
	b := engine.LaneLimits{Namespace: "b", Lane: "x", MaxPerGroup: 1}
	c := engine.LaneLimits{Namespace: "a", Lane: "y", MaxRunning: 9, Paused: true}
	for _, l := range []engine.LaneLimits{a, b, c} {
		v.putLimits(l)
	}
	if got := v.limits(""); !reflect.DeepEqual(got, []engine.LaneLimits{c, a, b}) {
		t.Fatalf("every namespace: %+v", got)
	}
	if got := v.limits("a"); !reflect.DeepEqual(got, []engine.LaneLimits{c, a}) {
		t.Fatalf("namespace a: %+v", got)
	}
	if got := v.limits("none"); len(got) != 0 {
		t.Fatalf("an empty namespace: %+v", got)
	}
}

// testLaneLimitsDelete: a delete removes the limits (its lane claimable
// again); a second finds nothing.
func testLaneLimitsDelete(t *testing.T, h Harness) {
	v := setup(t, h)
	v.register("ns", "i", []string{"l"}, nil, 1, 1000)
	v.insert(v.execution("ns", "l"))
	v.putLimits(engine.LaneLimits{Namespace: "ns", Lane: "l", Paused: true})
	v.write(func(ctx context.Context, q engine.Queries) error { return q.LaneLimitsDelete(ctx, "ns", "l") })
	if got := v.claimAt("ns", "i", 1, 2, 500); len(got) != 1 {
		t.Fatal("the lane was not claimable once its limits were deleted")
	}
	_, err := tryWrite(v, func(ctx context.Context, q engine.Queries) (int, error) { return 0, q.LaneLimitsDelete(ctx, "ns", "l") })
	wantNoRows(t, "a second delete", err)
}

// testLaneTurnsTouch: once a lane's turns are recorded, its groups take
// turns (the empty group among them), in key order.
func testLaneTurnsTouch(t *testing.T, h Harness) {
	v := setup(t, h)
	v.register("ns", "i", []string{"l"}, nil, 1, 1000)
	var es []engine.Execution
	for range 3 {
		e := v.execution("ns", "l")
		e.Group = "big"
		es = append(es, e)
	}
	small, plain := v.execution("ns", "l"), v.execution("ns", "l")
	small.Group = "small"
	es = append(es, small, plain)
	v.write(func(ctx context.Context, q engine.Queries) error { return q.LaneTurnsTouch(ctx, es) })
	v.write(func(ctx context.Context, q engine.Queries) error { return q.LaneTurnsTouch(ctx, es) }) // idempotent
	v.insert(es...)
	got := v.claimAt("ns", "i", 3, 2, 500)
	groups := map[string]int{}
	for _, l := range got {
		groups[v.get(l.ExecutionID).Group]++
	}
	if !reflect.DeepEqual(groups, map[string]int{"big": 1, "small": 1, "": 1}) {
		t.Fatalf("three claims over three groups took %v", groups)
	}
	if next := v.claimAt("ns", "i", 1, 2, 500); len(next) != 1 || v.get(next[0].ExecutionID).Group != "big" {
		t.Fatal("the group with work left was not claimed next")
	}
}
