package enginetest

import (
	"context"
	"reflect"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/rosterdb/roster/internal/engine"
)

// executionTests are the tests of creating, reading, listing, cancelling and
// pruning executions.
func executionTests() map[string]methodTest {
	return map[string]methodTest{
		"ExecutionInsert":            testExecutionInsert,
		"ExecutionInsertMany":        testExecutionInsertMany,
		"ExecutionGet":               testExecutionGet,
		"ExecutionGetState":          testExecutionGetState,
		"ExecutionList":              testExecutionList,
		"ExecutionCancel":            testExecutionCancel,
		"ExecutionPruneBatch":        testExecutionPruneBatch,
		"ExecutionFinishedPerMinute": testExecutionFinishedPerMinute,
	}
}

// executionEqual compares what a caller sets on a new execution with what
// reads back (the fields that create writes).
func executionEqual(got, want engine.Execution) bool {
	return got.ID == want.ID && got.Namespace == want.Namespace && got.Lane == want.Lane && got.Priority == want.Priority &&
		string(got.Payload) == string(want.Payload) && slices.Equal(got.RequiredCapabilities, want.RequiredCapabilities) &&
		got.MaxAttempts == want.MaxAttempts && got.CreatedAtMs == want.CreatedAtMs && got.RunAtMs == want.RunAtMs &&
		got.RetryBackoffMs == want.RetryBackoffMs && got.UniqueKey == want.UniqueKey
}

// wantWaiting fails the test unless x is a new waiting execution: no
// attempt, no lease, no result, not finished.
func wantWaiting(t *testing.T, x engine.Execution) {
	t.Helper()
	if x.State != "waiting" || x.Attempts != 0 || x.ReclaimCount != 0 || x.LastError != "" || x.Result != nil ||
		x.Holder != "" || x.ClaimedAtMs != 0 || x.ExpiresAtMs != 0 || x.FinishedAtMs != 0 {
		t.Fatalf("new execution %+v: want waiting, untouched", x)
	}
}

// testExecutionInsert: a new execution reads back field for field, waiting;
// it is claimable at once when created without a RunAt, else from its RunAt
// by the claimer's clock; a second insert of its id is the primary key's
// violation.
func testExecutionInsert(t *testing.T, h Harness) {
	v := setup(t, h)
	v.register("ns", "i", []string{"l"}, []string{"a", "b"}, 1, 1000000)
	t.Run("Fields", func(t *testing.T) {
		e := v.execution("ns", "l")
		e.Priority, e.Payload, e.RequiredCapabilities, e.MaxAttempts, e.RetryBackoffMs = 7, []byte("pay"), []string{"a", "b"}, 3, 250
		e.CreatedAtMs, e.RunAtMs = 5, 5
		v.insert(e)
		x := v.get(e.ID)
		if !executionEqual(x, e) {
			t.Fatalf("read back %+v, want %+v", x, e)
		}
		wantWaiting(t, x)
		// Take it out of the way of the next cases.
		if ls := v.claimAt("ns", "i", 1, 6, 1000); len(ls) != 1 || ls[0].ExecutionID != e.ID {
			t.Fatalf("claimed %v, want %s", ls, e.ID)
		}
	})
	t.Run("NilPayloadAndCapabilities", func(t *testing.T) {
		e := v.execution("ns", "other")
		v.insert(e)
		x := v.get(e.ID)
		if len(x.Payload) != 0 || x.RequiredCapabilities != nil || x.UniqueKey != "" {
			t.Fatalf("read back payload %q, capabilities %#v, key %q", x.Payload, x.RequiredCapabilities, x.UniqueKey)
		}
	})
	t.Run("ReadyAtOnce", func(t *testing.T) {
		// RunAt before creation: claimable by a claimer whose clock is behind.
		e := v.execution("ns", "l")
		e.CreatedAtMs, e.RunAtMs = 100, 90
		v.insert(e)
		if ls := v.claimAt("ns", "i", 2, 20, 1000); len(ls) != 1 || ls[0].ExecutionID != e.ID {
			t.Fatalf("claimed %v at 20, want %s", ls, e.ID)
		}
	})
	t.Run("ScheduledUntilRunAt", func(t *testing.T) {
		e := v.execution("ns", "l")
		e.CreatedAtMs, e.RunAtMs = 100, 500
		v.insert(e)
		if ls := v.claimAt("ns", "i", 1, 499, 1000); len(ls) != 0 {
			t.Fatalf("claimed %v before its RunAt", ls)
		}
		if ls := v.claimAt("ns", "i", 1, 500, 1000); len(ls) != 1 || ls[0].ExecutionID != e.ID {
			t.Fatalf("claimed %v at its RunAt, want %s", ls, e.ID)
		}
	})
	t.Run("RunAtPastForTheCreator", func(t *testing.T) {
		// A RunAt the creator's clock already reached is claimable at once,
		// whatever the claimer's clock says.
		e := v.execution("ns", "l")
		e.CreatedAtMs, e.RunAtMs = 700, 600
		v.insert(e)
		if ls := v.claimAt("ns", "i", 1, 550, 1000); len(ls) != 1 || ls[0].ExecutionID != e.ID {
			t.Fatalf("claimed %v by a claimer whose clock reads before its RunAt, want %s", ls, e.ID)
		}
	})
	t.Run("DuplicateID", func(t *testing.T) {
		e := v.execution("ns", "l")
		v.insert(e)
		err := v.e.Write(v.ctx, func(ctx context.Context, q engine.Queries) error { return q.ExecutionInsert(ctx, e) })
		if !engine.IsConstraint(err, engine.UniqueExecutionID) {
			t.Fatalf("second insert: %v, want constraint %s", err, engine.UniqueExecutionID)
		}
	})
}

// testExecutionInsertMany: a batch is inserted as ExecutionInsert inserts
// each item; a batch with a taken id is refused whole; an empty batch is
// nothing.
func testExecutionInsertMany(t *testing.T, h Harness) {
	v := setup(t, h)
	v.register("ns", "i", []string{"l"}, nil, 1, 1000000)
	insertMany := func(es []engine.Execution) error {
		return v.e.Write(v.ctx, func(ctx context.Context, q engine.Queries) error { return q.ExecutionInsertMany(ctx, es) })
	}
	a, b, c := v.execution("ns", "l"), v.execution("ns", "m"), v.execution("other", "l")
	a.Payload, a.Priority = []byte("a"), 3
	b.RequiredCapabilities, b.MaxAttempts, b.RetryBackoffMs = []string{"x", "y"}, 4, 10
	c.CreatedAtMs, c.RunAtMs = 10, 400 // scheduled
	t.Run("Batch", func(t *testing.T) {
		must(t, insertMany([]engine.Execution{a, b, c}))
		for _, e := range []engine.Execution{a, b, c} {
			x := v.get(e.ID)
			if !executionEqual(x, e) {
				t.Errorf("read back %+v, want %+v", x, e)
			}
			wantWaiting(t, x)
		}
	})
	t.Run("ReadyAndScheduled", func(t *testing.T) {
		v.register("other", "i", []string{"l"}, nil, 1, 1000000)
		if ls := v.claimAt("ns", "i", 2, 5, 1000); len(ls) != 1 || ls[0].ExecutionID != a.ID {
			t.Fatalf("claimed %v, want %s", ls, a.ID)
		}
		if ls := v.claimAt("other", "i", 1, 399, 1000); len(ls) != 0 {
			t.Fatalf("claimed %v before its RunAt", ls)
		}
		if ls := v.claimAt("other", "i", 1, 400, 1000); len(ls) != 1 || ls[0].ExecutionID != c.ID {
			t.Fatalf("claimed %v at its RunAt, want %s", ls, c.ID)
		}
	})
	t.Run("TakenID", func(t *testing.T) {
		d := v.execution("ns", "l")
		err := insertMany([]engine.Execution{d, a})
		if !engine.IsConstraint(err, engine.UniqueExecutionID) {
			t.Fatalf("batch with a taken id: %v, want constraint %s", err, engine.UniqueExecutionID)
		}
		_, err = tryRead(v, func(ctx context.Context, q engine.Queries) (engine.Execution, error) {
			return q.ExecutionGet(ctx, d.ID)
		})
		wantNoRows(t, "the refused batch's other item", err)
	})
	t.Run("Empty", func(t *testing.T) {
		must(t, insertMany(nil))
	})
}

// testExecutionGet: an execution reads with its lease while running; an
// unknown id is ErrNoRows.
func testExecutionGet(t *testing.T, h Harness) {
	v := setup(t, h)
	v.register("ns", "i", []string{"l"}, nil, 1, 1000000)
	e := v.execution("ns", "l")
	e.Payload = []byte("p")
	v.insert(e)
	t.Run("Waiting", func(t *testing.T) {
		x := v.get(e.ID)
		if !executionEqual(x, e) {
			t.Fatalf("read back %+v, want %+v", x, e)
		}
		wantWaiting(t, x)
	})
	t.Run("Running", func(t *testing.T) {
		l := v.claimAt("ns", "i", 1, 10, 1010)[0]
		x := v.get(e.ID)
		if x.State != "running" || x.Attempts != 1 || x.Holder != "i" || x.ClaimedAtMs != 10 || x.ExpiresAtMs != 1010 || l.ExpiresAtMs != 1010 {
			t.Fatalf("running %+v", x)
		}
	})
	t.Run("Unknown", func(t *testing.T) {
		_, err := tryRead(v, func(ctx context.Context, q engine.Queries) (engine.Execution, error) {
			return q.ExecutionGet(ctx, newID(t))
		})
		wantNoRows(t, "unknown id", err)
	})
}

// testExecutionGetState: the state follows the execution through its life;
// an unknown id is ErrNoRows.
func testExecutionGetState(t *testing.T, h Harness) {
	v := setup(t, h)
	v.register("ns", "i", []string{"l"}, nil, 1, 1000000)
	state := func(id uuid.UUID) (string, error) {
		return tryRead(v, func(ctx context.Context, q engine.Queries) (string, error) { return q.ExecutionGetState(ctx, id) })
	}
	want := func(id uuid.UUID, st string) {
		t.Helper()
		got, err := state(id)
		must(t, err)
		if got != st {
			t.Fatalf("state %q, want %q", got, st)
		}
	}
	ids := v.insert(v.execution("ns", "l"), v.execution("ns", "l"), v.execution("ns", "l"))
	want(ids[0], "waiting")
	ls := v.claimAt("ns", "i", 2, 2, 1000)
	want(ls[0].ExecutionID, "running")
	v.complete(ls[0], 3, nil)
	want(ls[0].ExecutionID, "completed")
	v.fail(ls[1], 3, "no")
	want(ls[1].ExecutionID, "failed")
	writeGet(v, func(ctx context.Context, q engine.Queries) (bool, error) {
		return q.ExecutionCancel(ctx, ids[2], "stop", 4)
	})
	want(ids[2], "cancelled")
	_, err := state(newID(t))
	wantNoRows(t, "unknown id", err)
}

// testExecutionList: keyset pages in id order (or newest first), filtered by
// namespace, lane and state in every combination the engines route
// differently.
func testExecutionList(t *testing.T, h Harness) {
	v := setup(t, h)
	v.register("a", "i", []string{"x"}, nil, 1, 1000000)
	// In id order: a/x, a/y, b/x, a/x (claimed: running), b/y, a/x (completed).
	es := []engine.Execution{v.execution("a", "x"), v.execution("a", "y"), v.execution("b", "x"), v.execution("a", "x"), v.execution("b", "y"), v.execution("a", "x")}
	for i := range es {
		es[i].CreatedAtMs, es[i].RunAtMs = 1, int64(1+i) // best first: the order of the slice
	}
	// Unique keys: k0 in a (0) and in b (2), k5 (5, completed); group g:
	// 1 in a, 2 and 4 in b (none that the claim below takes).
	es[0].UniqueKey, es[2].UniqueKey, es[5].UniqueKey = "k0", "k0", "k5"
	es[1].Group, es[2].Group, es[4].Group = "g", "g", "g"
	ids := make([]uuid.UUID, len(es))
	v.write(func(ctx context.Context, q engine.Queries) error {
		for i, e := range es {
			var err error
			if e.UniqueKey != "" {
				_, err = q.ExecutionInsertUnique(ctx, e)
			} else {
				err = q.ExecutionInsert(ctx, e)
			}
			if err != nil {
				return err
			}
			ids[i] = e.ID
		}
		return nil
	})
	if !slices.Equal(sortedIDs(ids), ids) {
		t.Fatalf("uuid.NewV7 ids out of order: %s", fmtIDs(ids))
	}
	ls := v.claimAt("a", "i", 3, 10, 1000) // ids 0, 3, 5
	v.complete(ls[2], 11, nil)
	list := func(p engine.ExecutionListParams) []uuid.UUID {
		xs := readGet(v, func(ctx context.Context, q engine.Queries) ([]engine.Execution, error) {
			return q.ExecutionList(ctx, p)
		})
		out := make([]uuid.UUID, len(xs))
		for i, x := range xs {
			out[i] = x.ID
		}
		return out
	}
	pick := func(is ...int) []uuid.UUID {
		out := []uuid.UUID{}
		for _, i := range is {
			out = append(out, ids[i])
		}
		return out
	}
	for _, tc := range []struct {
		name string
		p    engine.ExecutionListParams
		want []uuid.UUID
	}{
		{"All", engine.ExecutionListParams{Limit: 10}, pick(0, 1, 2, 3, 4, 5)},
		{"AllPage", engine.ExecutionListParams{AfterID: ids[1], Limit: 2}, pick(2, 3)},
		{"Namespace", engine.ExecutionListParams{Namespace: "a", Limit: 10}, pick(0, 1, 3, 5)},
		{"NamespaceLane", engine.ExecutionListParams{Namespace: "a", Lane: "x", Limit: 10}, pick(0, 3, 5)},
		{"NamespaceState", engine.ExecutionListParams{Namespace: "a", State: "running", Limit: 10}, pick(0, 3)},
		{"NamespaceLaneStatePage", engine.ExecutionListParams{Namespace: "a", Lane: "x", State: "running", AfterID: ids[0], Limit: 10}, pick(3)},
		{"Running", engine.ExecutionListParams{State: "running", Limit: 10}, pick(0, 3)},
		{"RunningLane", engine.ExecutionListParams{State: "running", Lane: "y", Limit: 10}, pick()},
		{"Waiting", engine.ExecutionListParams{State: "waiting", Limit: 10}, pick(1, 2, 4)},
		{"WaitingLanePage", engine.ExecutionListParams{State: "waiting", Lane: "y", AfterID: ids[1], Limit: 10}, pick(4)},
		{"Completed", engine.ExecutionListParams{State: "completed", Limit: 10}, pick(5)},
		{"Lane", engine.ExecutionListParams{Lane: "x", Limit: 10}, pick(0, 2, 3, 5)},
		{"LaneLimit", engine.ExecutionListParams{Lane: "x", Limit: 2}, pick(0, 2)},
		{"Newest", engine.ExecutionListParams{Newest: true, AfterID: uuid.Max, Limit: 3}, pick(5, 4, 3)},
		{"NewestPage", engine.ExecutionListParams{Newest: true, AfterID: ids[3], Limit: 10}, pick(2, 1, 0)},
		{"NewestNamespace", engine.ExecutionListParams{Newest: true, Namespace: "b", AfterID: uuid.Max, Limit: 10}, pick(4, 2)},
		{"NewestState", engine.ExecutionListParams{Newest: true, State: "running", AfterID: uuid.Max, Limit: 10}, pick(3, 0)},
		{"NewestLane", engine.ExecutionListParams{Newest: true, Lane: "y", AfterID: uuid.Max, Limit: 10}, pick(4, 1)},
		{"None", engine.ExecutionListParams{Namespace: "none", Limit: 10}, pick()},
		{"UniqueKey", engine.ExecutionListParams{Namespace: "a", UniqueKey: "k0", Limit: 10}, pick(0)},
		{"UniqueKeyOfAnotherNamespace", engine.ExecutionListParams{Namespace: "b", UniqueKey: "k0", Limit: 10}, pick(2)},
		{"UniqueKeyFinished", engine.ExecutionListParams{Namespace: "a", UniqueKey: "k5", State: "completed", Limit: 10}, pick(5)},
		{"UniqueKeyOtherLane", engine.ExecutionListParams{Namespace: "a", UniqueKey: "k5", Lane: "y", Limit: 10}, pick()},
		{"UniqueKeyNewest", engine.ExecutionListParams{Newest: true, Namespace: "a", UniqueKey: "k5", AfterID: uuid.Max, Limit: 10}, pick(5)},
		{"Group", engine.ExecutionListParams{Namespace: "a", Group: "g", Limit: 10}, pick(1)},
		{"GroupState", engine.ExecutionListParams{Namespace: "a", Group: "g", State: "running", Limit: 10}, pick()},
		{"GroupOfAnotherNamespace", engine.ExecutionListParams{Namespace: "b", Group: "g", Limit: 10}, pick(2, 4)},
		{"GroupLaneState", engine.ExecutionListParams{Namespace: "b", Group: "g", Lane: "y", State: "waiting", Limit: 10}, pick(4)},
		{"GroupPage", engine.ExecutionListParams{Namespace: "b", Group: "g", AfterID: ids[2], Limit: 10}, pick(4)},
		{"GroupNewest", engine.ExecutionListParams{Newest: true, Namespace: "b", Group: "g", AfterID: uuid.Max, Limit: 10}, pick(4, 2)},
		{"GroupNewestLimit", engine.ExecutionListParams{Newest: true, Namespace: "b", Group: "g", AfterID: uuid.Max, Limit: 1}, pick(4)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := list(tc.p); !slices.Equal(got, tc.want) {
				t.Fatalf("ExecutionList(%+v) = %s, want %s", tc.p, fmtIDs(got), fmtIDs(tc.want))
			}
		})
	}
}

// testExecutionCancel: a waiting or a running execution ends cancelled with
// the reason (a running one's lease is fenced from then on); an ended or
// unknown one is false and unchanged.
func testExecutionCancel(t *testing.T, h Harness) {
	v := setup(t, h)
	v.register("ns", "i", []string{"l"}, nil, 1, 1000000)
	cancel := func(id uuid.UUID, now int64) bool {
		return writeGet(v, func(ctx context.Context, q engine.Queries) (bool, error) {
			return q.ExecutionCancel(ctx, id, "stop", now)
		})
	}
	ids := v.insert(v.execution("ns", "l"), v.execution("ns", "l"))
	var running engine.ClaimedLease
	t.Run("Waiting", func(t *testing.T) {
		if !cancel(ids[0], 5) {
			t.Fatal("cancel of a waiting execution = false")
		}
		if x := v.get(ids[0]); x.State != "cancelled" || x.LastError != "stop" || x.FinishedAtMs != 5 {
			t.Fatalf("after cancel %+v", x)
		}
		ls := v.claimAt("ns", "i", 2, 6, 1000)
		if len(ls) != 1 || ls[0].ExecutionID != ids[1] {
			t.Fatalf("claimed %v, want only %s", ls, ids[1])
		}
		running = ls[0]
	})
	t.Run("Running", func(t *testing.T) {
		if !cancel(ids[1], 7) {
			t.Fatal("cancel of a running execution = false")
		}
		x := v.get(ids[1])
		if x.State != "cancelled" || x.LastError != "stop" || x.FinishedAtMs != 7 || x.Attempts != 1 {
			t.Fatalf("after cancel %+v", x)
		}
		held := readGet(v, func(ctx context.Context, q engine.Queries) ([]engine.LeaseRef, error) {
			return q.LeaseFindHeld(ctx, wk("ns", "i"), []uuid.UUID{running.LeaseID})
		})
		if len(held) != 0 {
			t.Fatalf("a cancelled execution's lease is still held: %v", held)
		}
		err := v.tryLease(func(ctx context.Context, q engine.Queries) error { return q.LeaseComplete(ctx, ref(running), 8, nil) })
		wantNoRows(t, "complete of a cancelled execution's lease", err)
		v.sound() // the attempt is recorded as ended, once
	})
	t.Run("Ended", func(t *testing.T) {
		if cancel(ids[0], 8) {
			t.Fatal("cancel of a cancelled execution = true")
		}
		if x := v.get(ids[0]); x.FinishedAtMs != 5 {
			t.Fatalf("the second cancel changed it: %+v", x)
		}
	})
	t.Run("Unknown", func(t *testing.T) {
		if cancel(newID(t), 8) {
			t.Fatal("cancel of an unknown execution = true")
		}
	})
}

// testExecutionPruneBatch: up to batch executions finished before the time
// go, oldest first, with their recorded attempts; live ones stay.
func testExecutionPruneBatch(t *testing.T, h Harness) {
	v := setup(t, h)
	v.register("ns", "i", []string{"l"}, nil, 1, 1000000)
	ids := v.insert(v.execution("ns", "l"), v.execution("ns", "l"), v.execution("ns", "l"), v.execution("ns", "l"))
	ls := v.claimAt("ns", "i", 3, 2, 1000)
	v.fail(ls[0], 20, "second oldest") // attempts recorded
	v.complete(ls[1], 10, nil)         // oldest
	v.complete(ls[2], 30, nil)
	prune := func(before int64, batch int) int {
		return writeGet(v, func(ctx context.Context, q engine.Queries) (int, error) {
			return q.ExecutionPruneBatch(ctx, before, batch)
		})
	}
	gone := func(id uuid.UUID) bool {
		_, err := tryRead(v, func(ctx context.Context, q engine.Queries) (engine.Execution, error) { return q.ExecutionGet(ctx, id) })
		return err != nil
	}
	if n := prune(25, 1); n != 1 {
		t.Fatalf("first batch pruned %d, want 1", n)
	}
	if !gone(ls[1].ExecutionID) || gone(ls[0].ExecutionID) {
		t.Fatal("the first batch did not take the oldest finished execution alone")
	}
	if n := prune(25, 10); n != 1 {
		t.Fatalf("second batch pruned %d, want 1", n)
	}
	if !gone(ls[0].ExecutionID) || gone(ls[2].ExecutionID) || gone(ids[3]) {
		t.Fatal("the second batch pruned the wrong executions")
	}
	if n := prune(25, 10); n != 0 {
		t.Fatalf("third batch pruned %d, want 0", n)
	}
	v.sound() // no attempt outlived its execution
}

// testExecutionFinishedPerMinute: the executions completed or failed from
// the given time on, per namespace, lane, minute and state; live ones and
// earlier ones are not counted.
func testExecutionFinishedPerMinute(t *testing.T, h Harness) {
	v := setup(t, h)
	v.register("ns", "i", []string{"l"}, nil, 1, 1000000)
	v.insert(v.execution("ns", "l"), v.execution("ns", "l"), v.execution("ns", "l"), v.execution("ns", "l"), v.execution("ns", "l"))
	ls := v.claimAt("ns", "i", 4, 2, 500_000)
	v.complete(ls[0], 30_000, nil)  // minute 0
	v.complete(ls[1], 60_010, nil)  // minute 1
	v.fail(ls[2], 61_000, "boom")   // minute 1
	v.complete(ls[3], 125_000, nil) // minute 2
	count := func(since int64) []engine.FinishedCount {
		var out []engine.FinishedCount
		v.read(func(ctx context.Context, q engine.Queries) error {
			var err error
			out, err = q.ExecutionFinishedPerMinute(ctx, since)
			return err
		})
		return out
	}
	want := []engine.FinishedCount{
		{Namespace: "ns", Lane: "l", Minute: 1, State: "completed", N: 1},
		{Namespace: "ns", Lane: "l", Minute: 1, State: "failed", N: 1},
		{Namespace: "ns", Lane: "l", Minute: 2, State: "completed", N: 1},
	}
	if got := count(60_000); !reflect.DeepEqual(got, want) {
		t.Fatalf("since 60000:\n got %+v\nwant %+v", got, want)
	}
	if got := count(120_000); !reflect.DeepEqual(got, want[2:]) {
		t.Fatalf("since 120000: %+v", got)
	}
	if got := count(200_000); len(got) != 0 {
		t.Fatalf("since 200000: %+v", got)
	}
}
