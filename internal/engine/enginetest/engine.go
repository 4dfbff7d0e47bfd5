package enginetest

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rosterdb/roster/internal/engine"
)

// engineTests are the tests of Engine's own methods: how queries run (Read,
// Snapshot, Write, WriteOne), Close, Check and Subscribe. Claim and Settle
// are with the claims.
func engineTests() map[string]methodTest {
	return map[string]methodTest{
		"Read":     testRead,
		"Snapshot": testSnapshot,
		"Write":    testWrite,
		"WriteOne": testWriteOne,
		"Close":    testClose,
		"Check":    testCheck,
		"Subscribe": func(t *testing.T, h Harness) {
			t.Run("HearsOtherStores", func(t *testing.T) { testSubscribe(t, h) })
			t.Run("HearsWhatCameUnarmed", func(t *testing.T) { testSubscribeUnarmed(t, h) })
		},
	}
}

// errFn is an error of the test's own, returned by an fn.
var errFn = errors.New("enginetest: fn's own error")

// testRead: a Read sees what committed, and returns fn's own error.
func testRead(t *testing.T, h Harness) {
	v := setup(t, h)
	v.insertAgents(agent("a"))
	var got engine.Agent
	v.read(func(ctx context.Context, q engine.Queries) error {
		var err error
		got, err = q.AgentGet(ctx, "a")
		return err
	})
	if got.ID != "a" {
		t.Fatalf("read %+v", got)
	}
	err := v.e.Read(v.ctx, func(ctx context.Context, q engine.Queries) error { return errFn })
	if !errors.Is(err, errFn) {
		t.Fatalf("Read returned %v, want fn's error", err)
	}
	ctx, cancel := context.WithCancel(v.ctx)
	cancel()
	ran := false
	if err := v.e.Read(ctx, func(ctx context.Context, q engine.Queries) error {
		ran = true
		_, err := q.AgentGet(ctx, "a")
		return err
	}); err == nil {
		t.Fatalf("Read with a cancelled context succeeded (fn ran: %v)", ran)
	}
}

// testSnapshot: every query of a Snapshot sees the database as it was when
// the snapshot began, whatever commits meanwhile; it returns fn's error.
func testSnapshot(t *testing.T, h Harness) {
	v := setup(t, h)
	id := v.insert(v.execution("ns", "l"))[0]
	var before, during string
	must(t, v.e.Snapshot(v.ctx, func(ctx context.Context, q engine.Queries) error {
		var err error
		if before, err = q.ExecutionGetState(ctx, id); err != nil {
			return err
		}
		// Another writer commits a change, and a new agent, meanwhile.
		writeGet(v, func(ctx context.Context, q engine.Queries) (bool, error) {
			return q.ExecutionCancel(ctx, id, "stop", 5)
		})
		v.insertAgents(agent("late"))
		if during, err = q.ExecutionGetState(ctx, id); err != nil {
			return err
		}
		if _, err := q.AgentGet(ctx, "late"); !errors.Is(err, engine.ErrNoRows) {
			t.Errorf("the snapshot saw an agent inserted after it began: %v", err)
		}
		return nil
	}))
	if before != "waiting" || during != "waiting" {
		t.Fatalf("in the snapshot: %q then %q, want waiting both times", before, during)
	}
	if st := readGet(v, func(ctx context.Context, q engine.Queries) (string, error) { return q.ExecutionGetState(ctx, id) }); st != "cancelled" {
		t.Fatalf("after the snapshot %q, want cancelled", st)
	}
	if err := v.e.Snapshot(v.ctx, func(ctx context.Context, q engine.Queries) error { return errFn }); !errors.Is(err, errFn) {
		t.Fatalf("Snapshot returned %v, want fn's error", err)
	}
}

// testWrite: a Write's statements commit together, or none does when fn
// fails (its error returned) or a statement breaks a rule.
func testWrite(t *testing.T, h Harness) {
	v := setup(t, h)
	t.Run("Commits", func(t *testing.T) {
		v.write(func(ctx context.Context, q engine.Queries) error {
			if err := q.AgentInsert(ctx, agent("a")); err != nil {
				return err
			}
			return q.AgentInsert(ctx, agent("b"))
		})
		v.mustAgent("a")
		v.mustAgent("b")
	})
	t.Run("RollsBackOnFnError", func(t *testing.T) {
		err := v.e.Write(v.ctx, func(ctx context.Context, q engine.Queries) error {
			if err := q.AgentInsert(ctx, agent("c")); err != nil {
				return err
			}
			if _, err := q.AgentSetState(ctx, "a", "running", "suspended", "", 5); err != nil {
				return err
			}
			return errFn
		})
		if !errors.Is(err, errFn) {
			t.Fatalf("Write returned %v, want fn's error", err)
		}
		_, err = v.getAgent("c")
		wantNoRows(t, "an insert of a rolled back Write", err)
		if a := v.mustAgent("a"); a.State != "running" {
			t.Fatalf("an update of a rolled back Write stayed: %+v", a)
		}
	})
	t.Run("RollsBackOnConstraint", func(t *testing.T) {
		err := v.e.Write(v.ctx, func(ctx context.Context, q engine.Queries) error {
			if err := q.AgentInsert(ctx, agent("d")); err != nil {
				return err
			}
			return q.AgentInsert(ctx, agent("a"))
		})
		if !engine.IsConstraint(err, engine.UniqueAgentID) {
			t.Fatalf("Write returned %v, want the constraint", err)
		}
		_, err = v.getAgent("d")
		wantNoRows(t, "the first insert of a refused Write", err)
	})
}

// testWriteOne: a WriteOne's statement commits; fn's error comes back and
// its statement, refused, writes nothing.
func testWriteOne(t *testing.T, h Harness) {
	v := setup(t, h)
	v.register("ns", "i", []string{"l"}, nil, 1, 1000)
	var ttl int64
	must(t, v.e.WriteOne(v.ctx, func(ctx context.Context, q engine.Queries) error {
		var err error
		ttl, err = q.WorkerHeartbeat(ctx, wk("ns", "i"), 500, false)
		return err
	}))
	if w, _ := v.getWorker(wk("ns", "i")); ttl != 1000 || w.LastHeartbeatMs != 500 {
		t.Fatalf("after WriteOne: ttl %d, worker %+v", ttl, w)
	}
	err := v.e.WriteOne(v.ctx, func(ctx context.Context, q engine.Queries) error {
		_, err := q.WorkerHeartbeat(ctx, wk("ns", "nobody"), 600, false)
		return err
	})
	wantNoRows(t, "WriteOne of a heartbeat of an unknown worker", err)
	err = v.e.WriteOne(v.ctx, func(ctx context.Context, q engine.Queries) error { return q.AgentInsert(ctx, engine.Agent{ID: "bad"}) })
	if !engine.IsConstraint(err, engine.CheckViolation) {
		t.Fatalf("WriteOne of a refused row: %v, want a CHECK violation", err)
	}
	_, err = v.getAgent("bad")
	wantNoRows(t, "the refused row", err)
	if err := v.e.WriteOne(v.ctx, func(ctx context.Context, q engine.Queries) error { return errFn }); !errors.Is(err, errFn) {
		t.Fatalf("WriteOne returned %v, want fn's error", err)
	}
}

// testClose: what committed before Close stays; after it, every call is
// ErrClosed, a second Close included.
func testClose(t *testing.T, h Harness) {
	loc := h.Fresh(t)
	e := h.Open(t, loc)
	ctx := context.Background()
	must(t, e.Write(ctx, func(ctx context.Context, q engine.Queries) error { return q.AgentInsert(ctx, agent("a")) }))
	must(t, e.Close())
	noop := func(ctx context.Context, q engine.Queries) error { return nil }
	_, claimErr := e.ExecutionClaim(ctx, params("ns", "i", 1, 1, 2))
	_, checkErr := e.Check(ctx)
	for what, err := range map[string]error{
		"Read": e.Read(ctx, noop), "Snapshot": e.Snapshot(ctx, noop), "Write": e.Write(ctx, noop),
		"WriteOne": e.WriteOne(ctx, noop), "ExecutionClaim": claimErr, "Check": checkErr, "Close": e.Close(),
	} {
		if !errors.Is(err, engine.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", what, err)
		}
	}
	again := h.Open(t, loc)
	if err := again.Read(ctx, func(ctx context.Context, q engine.Queries) error {
		_, err := q.AgentGet(ctx, "a")
		return err
	}); err != nil {
		t.Fatalf("what committed before Close: %v", err)
	}
}

// testCheck: a sound database has no problem, after work of every kind; a
// rule broken outside roster is one line naming it.
func testCheck(t *testing.T, h Harness) {
	v := setup(t, h)
	v.sound()
	v.register("ns", "i", []string{"l", "m"}, nil, 1, 1000000)
	v.insert(v.execution("ns", "l"), v.execution("ns", "l"), v.execution("ns", "m"))
	ls := v.claimAt("ns", "i", 3, 2, 1000)
	v.complete(ls[0], 3, nil)
	v.fail(ls[1], 3, "no")
	v.insertAgents(agent("a"), full("b"))
	v.sound()
	v.h.Exec(t, v.loc, `UPDATE agent_state_counts SET n = n + 1 WHERE state = 'running'`)
	problems, err := v.e.Check(v.ctx)
	must(t, err)
	if len(problems) != 1 || !strings.HasPrefix(problems[0], "1 ") || !strings.Contains(problems[0], "agent states whose kept count is wrong") {
		t.Fatalf("problems %q, want the agent counts' alone", problems)
	}
}

// testEveryMethodHasATest: every method of engine.Queries and engine.Engine
// has a test in the table, and the table tests nothing else.
func testEveryMethodHasATest(t *testing.T, tests map[string]methodTest) {
	var methods []string
	for _, typ := range []reflect.Type{reflect.TypeFor[engine.Queries](), reflect.TypeFor[engine.Engine]()} {
		for i := range typ.NumMethod() {
			methods = append(methods, typ.Method(i).Name)
		}
	}
	for _, m := range methods {
		if tests[m] == nil {
			t.Errorf("%s has no test in enginetest", m)
		}
	}
	for name := range tests {
		if !slices.Contains(methods, name) {
			t.Errorf("the test %s names no method of engine.Queries or engine.Engine", name)
		}
	}
}
