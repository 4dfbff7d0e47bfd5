package enginetest

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/rosterdb/roster/internal/engine"
)

// fleetTests are the tests of unique keys, redrive, the maintenance leader
// and schedules.
func fleetTests() map[string]methodTest {
	return map[string]methodTest{
		"ExecutionInsertUnique":     testExecutionInsertUnique,
		"ExecutionInsertManyUnique": testExecutionInsertManyUnique,
		"ExecutionKeyLock":          testExecutionKeyLock,
		"ExecutionFindLiveByKey":    testExecutionFindLiveByKey,
		"ExecutionKeyGet":           testExecutionKeyGet,
		"ExecutionKeyPut":           testExecutionKeyPut,
		"ExecutionKeyPruneBatch":    testExecutionKeyPruneBatch,
		"ExecutionRetry":            testExecutionRetry,
		"LeaderTake":                testLeaderTake,
		"LeaderResign":              testLeaderResign,
		"LeaderHolds":               testLeaderHolds,
		"LeaderGet":                 testLeaderGet,
		"SchedulePut":               testSchedulePut,
		"ScheduleDelete":            testScheduleDelete,
		"ScheduleList":              testScheduleList,
		"ScheduleListDue":           testScheduleListDue,
		"ScheduleAdvance":           testScheduleAdvance,
	}
}

// keyed is a new execution of ns, lane "l", holding key.
func (v *env) keyed(ns, key string) engine.Execution {
	e := v.execution(ns, "l")
	e.UniqueKey = key
	return e
}

// insertUnique runs ExecutionInsertUnique.
func (v *env) insertUnique(e engine.Execution) bool {
	v.t.Helper()
	return writeGet(v, func(ctx context.Context, q engine.Queries) (bool, error) { return q.ExecutionInsertUnique(ctx, e) })
}

// liveByKey runs ExecutionFindLiveByKey.
func (v *env) liveByKey(ns, key string) (uuid.UUID, error) {
	return tryRead(v, func(ctx context.Context, q engine.Queries) (uuid.UUID, error) {
		return q.ExecutionFindLiveByKey(ctx, ns, key)
	})
}

// keyGet runs ExecutionKeyGet.
func (v *env) keyGet(ns, key string, now int64) (uuid.UUID, error) {
	return tryRead(v, func(ctx context.Context, q engine.Queries) (uuid.UUID, error) {
		return q.ExecutionKeyGet(ctx, ns, key, now)
	})
}

// keyPut runs ExecutionKeyPut.
func (v *env) keyPut(ns, key string, id uuid.UUID, until, now int64) bool {
	v.t.Helper()
	return writeGet(v, func(ctx context.Context, q engine.Queries) (bool, error) {
		return q.ExecutionKeyPut(ctx, ns, key, id, until, now)
	})
}

// testExecutionInsertUnique: a key is held by one waiting or running
// execution of its namespace at a time; an insert while it is held writes
// nothing and is false.
func testExecutionInsertUnique(t *testing.T, h Harness) {
	v := setup(t, h)
	v.register("ns", "i", []string{"l"}, nil, 1, 1000000)
	first := v.keyed("ns", "k")
	first.Payload = []byte("p")
	t.Run("Inserted", func(t *testing.T) {
		if !v.insertUnique(first) {
			t.Fatal("the first insert of a key = false")
		}
		x := v.get(first.ID)
		if !executionEqual(x, first) {
			t.Fatalf("read back %+v, want %+v", x, first)
		}
		wantWaiting(t, x)
	})
	t.Run("HeldWhileWaiting", func(t *testing.T) {
		dup := v.keyed("ns", "k")
		if v.insertUnique(dup) {
			t.Fatal("a second insert of a held key = true")
		}
		_, err := tryRead(v, func(ctx context.Context, q engine.Queries) (engine.Execution, error) {
			return q.ExecutionGet(ctx, dup.ID)
		})
		wantNoRows(t, "the refused insert", err)
	})
	t.Run("OtherNamespaceOrKey", func(t *testing.T) {
		if !v.insertUnique(v.keyed("other", "k")) || !v.insertUnique(v.keyed("ns", "k2")) {
			t.Fatal("an insert of another namespace's or another key = false")
		}
	})
	t.Run("HeldWhileRunning", func(t *testing.T) {
		l := v.claimAt("ns", "i", 1, 2, 1000)
		if len(l) != 1 || l[0].ExecutionID != first.ID {
			t.Fatalf("claimed %v", l)
		}
		if v.insertUnique(v.keyed("ns", "k")) {
			t.Fatal("an insert of a key held by a running execution = true")
		}
		v.complete(l[0], 3, nil)
	})
	t.Run("FreeOnceEnded", func(t *testing.T) {
		next := v.keyed("ns", "k")
		if !v.insertUnique(next) {
			t.Fatal("an insert of a key whose execution completed = false")
		}
		if id, err := v.liveByKey("ns", "k"); err != nil || id != next.ID {
			t.Fatalf("the key is held by %v, %v; want %s", id, err, next.ID)
		}
	})
}

// testExecutionInsertManyUnique: per item, the id of the execution holding
// its key: its own when inserted, a live holder's or a UniqueFor hold's
// otherwise; unkeyed items are inserted; holds asked for are recorded.
func testExecutionInsertManyUnique(t *testing.T, h Harness) {
	v := setup(t, h)
	live := v.keyed("ns", "live")
	if !v.insertUnique(live) {
		t.Fatal("ExecutionInsertUnique = false")
	}
	heldFor := newID(t)
	if !v.keyPut("ns", "hold", heldFor, 100, 1) {
		t.Fatal("ExecutionKeyPut = false")
	}
	fresh, dupLive, plain, dupHold, otherNS := v.keyed("ns", "fresh"), v.keyed("ns", "live"), v.execution("ns", "l"),
		v.keyed("ns", "hold"), v.keyed("other", "hold")
	fresh.CreatedAtMs, dupLive.CreatedAtMs, plain.CreatedAtMs, dupHold.CreatedAtMs, otherNS.CreatedAtMs = 50, 50, 50, 50, 50
	fresh.RunAtMs, dupLive.RunAtMs, plain.RunAtMs, dupHold.RunAtMs, otherNS.RunAtMs = 50, 50, 50, 50, 50
	batch := []engine.Execution{fresh, dupLive, plain, dupHold, otherNS}
	until := []int64{500, 0, 0, 0, 0}
	var ids []uuid.UUID
	v.write(func(ctx context.Context, q engine.Queries) error {
		ns, keys := []string{}, []string{}
		for _, e := range batch {
			if e.UniqueKey != "" {
				ns, keys = append(ns, e.Namespace), append(keys, e.UniqueKey)
			}
		}
		if err := q.ExecutionKeyLock(ctx, ns, keys); err != nil {
			return err
		}
		var err error
		ids, err = q.ExecutionInsertManyUnique(ctx, batch, until)
		return err
	})
	t.Run("Ids", func(t *testing.T) {
		want := []uuid.UUID{fresh.ID, live.ID, plain.ID, heldFor, otherNS.ID}
		if !slices.Equal(ids, want) {
			t.Fatalf("ids %s, want %s", fmtIDs(ids), fmtIDs(want))
		}
	})
	t.Run("Inserted", func(t *testing.T) {
		for _, e := range []engine.Execution{fresh, plain, otherNS} {
			if x := v.get(e.ID); !executionEqual(x, e) {
				t.Errorf("read back %+v, want %+v", x, e)
			}
		}
		for _, e := range []engine.Execution{dupLive, dupHold} {
			_, err := tryRead(v, func(ctx context.Context, q engine.Queries) (engine.Execution, error) {
				return q.ExecutionGet(ctx, e.ID)
			})
			wantNoRows(t, "an item whose key was held", err)
		}
	})
	t.Run("HoldRecorded", func(t *testing.T) {
		if id, err := v.keyGet("ns", "fresh", 499); err != nil || id != fresh.ID {
			t.Fatalf("the hold of the new key: %v, %v; want %s", id, err, fresh.ID)
		}
		_, err := v.keyGet("other", "hold", 60)
		wantNoRows(t, "an item inserted without a hold", err)
	})
	t.Run("HoldEnded", func(t *testing.T) {
		late := v.keyed("ns", "hold")
		late.CreatedAtMs, late.RunAtMs = 100, 100
		got := writeGet(v, func(ctx context.Context, q engine.Queries) ([]uuid.UUID, error) {
			if err := q.ExecutionKeyLock(ctx, []string{"ns"}, []string{"hold"}); err != nil {
				return nil, err
			}
			return q.ExecutionInsertManyUnique(ctx, []engine.Execution{late}, []int64{0})
		})
		if !slices.Equal(got, []uuid.UUID{late.ID}) {
			t.Fatalf("ids %s, want the item's own: the hold ended at its creation", fmtIDs(got))
		}
	})
}

// testExecutionKeyLock: two transactions that lock a key run one at a
// time; batches locking the same keys in opposite orders both finish.
func testExecutionKeyLock(t *testing.T, h Harness) {
	v := setup(t, h)
	lock := func(ctx context.Context, q engine.Queries, keys ...string) error {
		ns := make([]string, len(keys))
		for i := range ns {
			ns[i] = "ns"
		}
		return q.ExecutionKeyLock(ctx, ns, keys)
	}
	t.Run("OneAtATime", func(t *testing.T) {
		locked := make(chan struct{})
		var firstDone atomic.Bool
		var wg sync.WaitGroup
		wg.Add(1)
		var firstErr error
		go func() {
			defer wg.Done()
			firstErr = v.e.Write(v.ctx, func(ctx context.Context, q engine.Queries) error {
				if err := lock(ctx, q, "k"); err != nil {
					return err
				}
				close(locked)
				time.Sleep(300 * time.Millisecond)
				firstDone.Store(true)
				return nil
			})
		}()
		<-locked
		sawFirst := writeGet(v, func(ctx context.Context, q engine.Queries) (bool, error) {
			err := lock(ctx, q, "k")
			return firstDone.Load(), err
		})
		wg.Wait()
		must(t, firstErr)
		if !sawFirst {
			t.Fatal("a second transaction locked the key while the first held it")
		}
	})
	t.Run("OppositeOrders", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, keys := range [][]string{{"a", "b", "c"}, {"c", "b", "a"}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = v.e.Write(v.ctx, func(ctx context.Context, q engine.Queries) error {
					if err := lock(ctx, q, keys...); err != nil {
						return err
					}
					time.Sleep(50 * time.Millisecond)
					return nil
				})
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("batch %d: %v", i, err)
			}
		}
	})
	t.Run("Empty", func(t *testing.T) {
		v.write(func(ctx context.Context, q engine.Queries) error { return q.ExecutionKeyLock(ctx, nil, nil) })
	})
}

// testExecutionFindLiveByKey: the waiting or running execution holding a
// key; ErrNoRows once it ended, in another namespace, or for an unknown key.
func testExecutionFindLiveByKey(t *testing.T, h Harness) {
	v := setup(t, h)
	v.register("ns", "i", []string{"l"}, nil, 1, 1000000)
	e := v.keyed("ns", "k")
	if !v.insertUnique(e) {
		t.Fatal("insert = false")
	}
	want := func(what string) {
		t.Helper()
		if id, err := v.liveByKey("ns", "k"); err != nil || id != e.ID {
			t.Fatalf("%s: %v, %v; want %s", what, id, err, e.ID)
		}
	}
	want("waiting")
	l := v.claimAt("ns", "i", 1, 2, 1000)[0]
	want("running")
	_, err := v.liveByKey("other", "k")
	wantNoRows(t, "another namespace", err)
	_, err = v.liveByKey("ns", "nokey")
	wantNoRows(t, "an unknown key", err)
	v.complete(l, 3, nil)
	_, err = v.liveByKey("ns", "k")
	wantNoRows(t, "completed", err)
}

// testExecutionKeyGet: the execution a key is held for until its hold ends;
// ErrNoRows from then on, and for a key never held.
func testExecutionKeyGet(t *testing.T, h Harness) {
	v := setup(t, h)
	id := newID(t)
	if !v.keyPut("ns", "k", id, 100, 1) {
		t.Fatal("ExecutionKeyPut = false")
	}
	if got, err := v.keyGet("ns", "k", 99); err != nil || got != id {
		t.Fatalf("before the hold ends: %v, %v; want %s", got, err, id)
	}
	_, err := v.keyGet("ns", "k", 100)
	wantNoRows(t, "at the hold's end", err)
	_, err = v.keyGet("other", "k", 50)
	wantNoRows(t, "another namespace", err)
	_, err = v.keyGet("ns", "never", 50)
	wantNoRows(t, "a key never held", err)
}

// testExecutionKeyPut: a hold is recorded and extended by its execution;
// another execution's hold is refused until it ended, then replaces it.
func testExecutionKeyPut(t *testing.T, h Harness) {
	v := setup(t, h)
	a, b := newID(t), newID(t)
	holder := func(now int64) uuid.UUID {
		t.Helper()
		id, err := v.keyGet("ns", "k", now)
		must(t, err)
		return id
	}
	if !v.keyPut("ns", "k", a, 100, 1) || holder(50) != a {
		t.Fatal("the first hold was not recorded")
	}
	t.Run("OtherRefusedWhileHeld", func(t *testing.T) {
		if v.keyPut("ns", "k", b, 500, 99) {
			t.Fatal("another execution's hold over one not ended = true")
		}
		if holder(99) != a {
			t.Fatal("the refused hold replaced the first")
		}
	})
	t.Run("SameExtends", func(t *testing.T) {
		if !v.keyPut("ns", "k", a, 200, 99) || holder(150) != a {
			t.Fatal("the holder could not extend its hold")
		}
	})
	t.Run("OtherAfterEnd", func(t *testing.T) {
		if !v.keyPut("ns", "k", b, 500, 200) || holder(300) != b {
			t.Fatal("another execution could not hold the key once the hold ended")
		}
	})
}

// testExecutionKeyPruneBatch: up to batch holds that ended before the time
// go, and the count comes back.
func testExecutionKeyPruneBatch(t *testing.T, h Harness) {
	v := setup(t, h)
	for i, until := range []int64{30, 10, 20} {
		if !v.keyPut("ns", "k"+itoa(int64(i)), newID(t), until, 1) {
			t.Fatal("ExecutionKeyPut = false")
		}
	}
	prune := func(before int64, batch int) int {
		return writeGet(v, func(ctx context.Context, q engine.Queries) (int, error) {
			return q.ExecutionKeyPruneBatch(ctx, before, batch)
		})
	}
	if n := prune(25, 1); n != 1 {
		t.Fatalf("first batch %d, want 1", n)
	}
	if n := prune(25, 10); n != 1 {
		t.Fatalf("second batch %d, want 1", n)
	}
	if n := prune(25, 10); n != 0 {
		t.Fatalf("third batch %d, want 0", n)
	}
	if _, err := v.keyGet("ns", "k0", 29); err != nil {
		t.Fatalf("the hold until 30 was pruned: %v", err)
	}
	// A pruned key can be held again by anyone.
	if !v.keyPut("ns", "k1", newID(t), 100, 1) {
		t.Fatal("a pruned key could not be held again")
	}
}

// testExecutionRetry: a failed or cancelled execution waits again at the
// given RunAt (ready at once, or scheduled), with one more attempt when none
// is left; any other state, or an unknown id, is false.
func testExecutionRetry(t *testing.T, h Harness) {
	v, ls := leased(t, h, 3, 1, 0)
	retry := func(id uuid.UUID, runAt int64, atOnce bool) bool {
		return writeGet(v, func(ctx context.Context, q engine.Queries) (bool, error) {
			return q.ExecutionRetry(ctx, id, runAt, atOnce)
		})
	}
	v.fail(ls[0], 10, "no")
	t.Run("FailedAtOnce", func(t *testing.T) {
		if !retry(ls[0].ExecutionID, 5000, true) {
			t.Fatal("retry of a failed execution = false")
		}
		x := v.get(ls[0].ExecutionID)
		if x.State != "waiting" || x.RunAtMs != 5000 || x.MaxAttempts != 2 || x.Attempts != 1 || x.FinishedAtMs != 0 {
			t.Fatalf("after retry %+v", x)
		}
		got := v.claimAt("ns", "i", 1, 20, 1000)
		if len(got) != 1 || got[0].ExecutionID != ls[0].ExecutionID || got[0].AttemptIndex != 2 {
			t.Fatalf("claimed %+v, want the retried execution at once", got)
		}
	})
	t.Run("CancelledScheduled", func(t *testing.T) {
		writeGet(v, func(ctx context.Context, q engine.Queries) (bool, error) {
			return q.ExecutionCancel(ctx, ls[1].ExecutionID, "stop", 30)
		})
		if !retry(ls[1].ExecutionID, 600, false) {
			t.Fatal("retry of a cancelled execution = false")
		}
		if x := v.get(ls[1].ExecutionID); x.State != "waiting" || x.RunAtMs != 600 || x.MaxAttempts != 2 {
			t.Fatalf("after retry %+v", x)
		}
		if got := v.claimAt("ns", "i", 1, 599, 2000); len(got) != 0 {
			t.Fatalf("claimed %v before the retry's RunAt", got)
		}
		if got := v.claimAt("ns", "i", 1, 600, 2000); len(got) != 1 || got[0].ExecutionID != ls[1].ExecutionID {
			t.Fatalf("claimed %v at the retry's RunAt", got)
		}
	})
	t.Run("OtherStates", func(t *testing.T) {
		if retry(ls[2].ExecutionID, 700, true) {
			t.Fatal("retry of a running execution = true")
		}
		v.complete(ls[2], 40, nil)
		if retry(ls[2].ExecutionID, 700, true) {
			t.Fatal("retry of a completed execution = true")
		}
		waiting := v.insert(v.execution("ns", "l"))[0]
		if retry(waiting, 700, true) {
			t.Fatal("retry of a waiting execution = true")
		}
		if retry(newID(t), 700, true) {
			t.Fatal("retry of an unknown execution = true")
		}
		if x := v.get(ls[2].ExecutionID); x.State != "completed" {
			t.Fatalf("a refused retry changed it: %+v", x)
		}
	})
}
