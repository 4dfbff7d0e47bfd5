package enginetest

// Leader leases and schedules: the tests registered by fleetTests.

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/rosterdb/roster/internal/engine"
)

// take runs LeaderTake.
func (v *env) take(name, holder string, epoch, now, expires int64) (int64, error) {
	return tryWrite(v, func(ctx context.Context, q engine.Queries) (int64, error) {
		return q.LeaderTake(ctx, name, holder, epoch, now, expires)
	})
}

// leader runs LeaderGet.
func (v *env) leader(name string) (holder string, epoch, expires int64, err error) {
	err = v.e.Read(v.ctx, func(ctx context.Context, q engine.Queries) error {
		var err error
		holder, epoch, expires, err = q.LeaderGet(ctx, name)
		return err
	})
	return holder, epoch, expires, err
}

// wantLeader fails the test unless the lease name is holder's, of epoch,
// until expires.
func (v *env) wantLeader(name, holder string, epoch, expires int64) {
	v.t.Helper()
	h, e, x, err := v.leader(name)
	if err != nil || h != holder || e != epoch || x != expires {
		v.t.Fatalf("leader %q: %q epoch %d until %d (%v); want %q epoch %d until %d", name, h, e, x, err, holder, epoch, expires)
	}
}

// testLeaderTake: the first take is epoch 1; its holder renews under the
// same epoch while it holds; another is refused until it lapses, then takes
// the next epoch; the former holder is then refused.
func testLeaderTake(t *testing.T, h Harness) {
	v := setup(t, h)
	got := func(what string, epoch int64, err error, want int64) {
		t.Helper()
		if err != nil || epoch != want {
			t.Fatalf("%s: epoch %d, %v; want %d", what, epoch, err, want)
		}
	}
	e, err := v.take("m", "a", 0, 10, 100)
	got("first take", e, err, 1)
	v.wantLeader("m", "a", 1, 100)
	e, err = v.take("m", "a", 1, 50, 150)
	got("renew", e, err, 1)
	v.wantLeader("m", "a", 1, 150)
	_, err = v.take("m", "b", 0, 149, 300)
	wantNoRows(t, "take by another while held", err)
	v.wantLeader("m", "a", 1, 150)
	e, err = v.take("m", "b", 0, 150, 300)
	got("take after the lapse", e, err, 2)
	v.wantLeader("m", "b", 2, 300)
	_, err = v.take("m", "a", 1, 160, 400)
	wantNoRows(t, "renew by the former holder", err)
	e, err = v.take("m", "b", 2, 300, 500)
	got("the lapsed holder takes again", e, err, 3)
	e, err = v.take("other", "a", 0, 10, 100)
	got("another lease", e, err, 1)
}

// testLeaderResign: the holder's lease ends at now, so that another takes
// it at once; a resign under another epoch or holder changes nothing.
func testLeaderResign(t *testing.T, h Harness) {
	v := setup(t, h)
	if _, err := v.take("m", "a", 0, 10, 100); err != nil {
		t.Fatal(err)
	}
	resign := func(holder string, epoch, now int64) {
		t.Helper()
		v.write(func(ctx context.Context, q engine.Queries) error { return q.LeaderResign(ctx, "m", holder, epoch, now) })
	}
	resign("a", 2, 20)
	resign("b", 1, 20)
	v.wantLeader("m", "a", 1, 100)
	resign("a", 1, 30)
	v.wantLeader("m", "a", 1, 30)
	if e, err := v.take("m", "b", 0, 30, 200); err != nil || e != 2 {
		t.Fatalf("take after the resign: epoch %d, %v; want 2", e, err)
	}
	resign("a", 1, 40) // no longer holds: nothing
	v.wantLeader("m", "b", 2, 200)
	resign("x", 1, 40) // a lease of a name never taken: nothing
}

// testLeaderHolds: true for the holder under its epoch until another
// instance takes the lease (a lapse alone does not end it); false
// otherwise.
func testLeaderHolds(t *testing.T, h Harness) {
	v := setup(t, h)
	if _, err := v.take("m", "a", 0, 10, 100); err != nil {
		t.Fatal(err)
	}
	holds := func(name, holder string, epoch int64) bool {
		return writeGet(v, func(ctx context.Context, q engine.Queries) (bool, error) {
			return q.LeaderHolds(ctx, name, holder, epoch)
		})
	}
	for _, tc := range []struct {
		name, lease, holder string
		epoch               int64
		want                bool
	}{
		{"Holds", "m", "a", 1, true},
		{"OtherEpoch", "m", "a", 2, false},
		{"OtherHolder", "m", "b", 1, false},
		{"OtherName", "n", "a", 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := holds(tc.lease, tc.holder, tc.epoch); got != tc.want {
				t.Fatalf("LeaderHolds(%s, %s, %d) = %v", tc.lease, tc.holder, tc.epoch, got)
			}
		})
	}
	// Lapsed at 100 with nobody taking it: still a's.
	if !holds("m", "a", 1) {
		t.Fatal("a lapsed lease nobody took no longer holds")
	}
	// Taken by b after the lapse: a's epoch no longer holds, b's does.
	if e, err := v.take("m", "b", 0, 150, 300); err != nil || e != 2 {
		t.Fatalf("take after the lapse: epoch %d, %v; want 2", e, err)
	}
	if holds("m", "a", 1) || !holds("m", "b", 2) {
		t.Fatal("after b took the lapsed lease: a's epoch still holds, or b's does not")
	}
}

// testLeaderGet: the lease as the last take left it; ErrNoRows for a name
// never taken.
func testLeaderGet(t *testing.T, h Harness) {
	v := setup(t, h)
	_, _, _, err := v.leader("m")
	wantNoRows(t, "a lease never taken", err)
	if _, err := v.take("m", "a", 0, 10, 100); err != nil {
		t.Fatal(err)
	}
	v.wantLeader("m", "a", 1, 100)
	if _, err := v.take("m", "b", 0, 100, 250); err != nil {
		t.Fatal(err)
	}
	v.wantLeader("m", "b", 2, 250)
}

// schedules reads ScheduleList of ns.
func (v *env) schedules(ns string) []engine.Schedule {
	v.t.Helper()
	return readGet(v, func(ctx context.Context, q engine.Queries) ([]engine.Schedule, error) { return q.ScheduleList(ctx, ns) })
}

// putSchedule runs SchedulePut.
func (v *env) putSchedule(s engine.Schedule) {
	v.t.Helper()
	v.write(func(ctx context.Context, q engine.Queries) error { return q.SchedulePut(ctx, s) })
}

// schedule is a schedule of ns named name, every second from next.
func schedule(ns, name string, next int64) engine.Schedule {
	return engine.Schedule{Namespace: ns, Name: name, EveryMs: 1000, Lane: "l", MaxAttempts: 1, NextRunAtMs: next, UpdatedAtMs: 1}
}

// scheduleNames shows schedules as "namespace/name".
func scheduleNames(ss []engine.Schedule) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.Namespace + "/" + s.Name
	}
	return out
}

// scheduleEqual compares the fields SchedulePut writes and ScheduleList
// reads.
func scheduleEqual(a, b engine.Schedule) bool {
	return a.Namespace == b.Namespace && a.Name == b.Name && a.EveryMs == b.EveryMs && a.Cron == b.Cron && a.Lane == b.Lane &&
		a.Priority == b.Priority && slices.Equal(a.RequiredCapabilities, b.RequiredCapabilities) && a.MaxAttempts == b.MaxAttempts &&
		a.RetryBackoffMs == b.RetryBackoffMs && string(a.Payload) == string(b.Payload) && a.Paused == b.Paused &&
		a.NextRunAtMs == b.NextRunAtMs && a.LastExecutionID == b.LastExecutionID
}

// advance runs ScheduleAdvance.
func (v *env) advance(ns, name string, from, next int64, run uuid.UUID) bool {
	v.t.Helper()
	return writeGet(v, func(ctx context.Context, q engine.Queries) (bool, error) {
		return q.ScheduleAdvance(ctx, ns, name, from, next, run)
	})
}

// testSchedulePut: a schedule is created field for field and replaced; a
// replacement with the same timing keeps its next run and last execution,
// one with another timing, or resumed from paused, starts over.
func testSchedulePut(t *testing.T, h Harness) {
	v := setup(t, h)
	s := engine.Schedule{Namespace: "ns", Name: "s", EveryMs: 60000, Lane: "l", Priority: 3, RequiredCapabilities: []string{"x"},
		MaxAttempts: 2, RetryBackoffMs: 10, Payload: []byte("p"), NextRunAtMs: 60000, UpdatedAtMs: 5}
	t.Run("Create", func(t *testing.T) {
		v.putSchedule(s)
		got := v.schedules("ns")
		if len(got) != 1 || !scheduleEqual(got[0], s) {
			t.Fatalf("listed %+v, want %+v", got, s)
		}
	})
	run := newID(t)
	if !v.advance("ns", "s", 60000, 120000, run) {
		t.Fatal("ScheduleAdvance = false")
	}
	t.Run("SameTimingKeepsNextRun", func(t *testing.T) {
		r := s
		r.Lane, r.Priority, r.Payload, r.NextRunAtMs, r.UpdatedAtMs = "m", 4, []byte("q"), 999000, 6
		v.putSchedule(r)
		want := r
		want.NextRunAtMs, want.LastExecutionID = 120000, run
		if got := v.schedules("ns"); len(got) != 1 || !scheduleEqual(got[0], want) {
			t.Fatalf("listed %+v, want %+v", got, want)
		}
	})
	t.Run("OtherTimingStartsOver", func(t *testing.T) {
		r := s
		r.EveryMs, r.Cron, r.NextRunAtMs = 0, "*/5 * * * *", 300000
		v.putSchedule(r)
		want := r
		want.LastExecutionID = run
		if got := v.schedules("ns"); len(got) != 1 || !scheduleEqual(got[0], want) {
			t.Fatalf("listed %+v, want %+v", got, want)
		}
	})
	t.Run("ResumedStartsOver", func(t *testing.T) {
		r := s
		r.EveryMs, r.Cron, r.NextRunAtMs, r.Paused = 0, "*/5 * * * *", 300000, true
		v.putSchedule(r)
		r.Paused, r.NextRunAtMs = false, 600000
		v.putSchedule(r)
		if got := v.schedules("ns"); len(got) != 1 || got[0].NextRunAtMs != 600000 || got[0].Paused {
			t.Fatalf("listed %+v, want next run 600000, not paused", got)
		}
	})
}

// testScheduleDelete: a schedule goes and is reported; a second delete is
// false.
func testScheduleDelete(t *testing.T, h Harness) {
	v := setup(t, h)
	v.putSchedule(schedule("ns", "a", 1000))
	v.putSchedule(schedule("ns", "b", 1000))
	del := func(name string) bool {
		return writeGet(v, func(ctx context.Context, q engine.Queries) (bool, error) { return q.ScheduleDelete(ctx, "ns", name) })
	}
	if !del("a") {
		t.Fatal("delete of a schedule = false")
	}
	if got := scheduleNames(v.schedules("")); !slices.Equal(got, []string{"ns/b"}) {
		t.Fatalf("left %v", got)
	}
	if del("a") || del("never") {
		t.Fatal("delete of an absent schedule = true")
	}
}

// testScheduleList: the schedules of one namespace or all, by (namespace,
// name), each with its last run's state.
func testScheduleList(t *testing.T, h Harness) {
	v := setup(t, h)
	v.register("b", "i", []string{"l"}, nil, 1, 1000000)
	for _, k := range []engine.WorkerKey{wk("b", "z"), wk("a", "y"), wk("b", "a"), wk("c", "x")} {
		v.putSchedule(schedule(k.Namespace, k.InstanceID, 1000))
	}
	if got := scheduleNames(v.schedules("")); !slices.Equal(got, []string{"a/y", "b/a", "b/z", "c/x"}) {
		t.Errorf("every namespace: %v", got)
	}
	if got := scheduleNames(v.schedules("b")); !slices.Equal(got, []string{"b/a", "b/z"}) {
		t.Errorf("namespace b: %v", got)
	}
	if got := v.schedules("none"); len(got) != 0 {
		t.Errorf("unknown namespace: %v", got)
	}
	t.Run("LastState", func(t *testing.T) {
		run := v.insert(v.execution("b", "l"))[0]
		if !v.advance("b", "a", 1000, 2000, run) {
			t.Fatal("ScheduleAdvance = false")
		}
		state := func() (string, string) {
			ss := v.schedules("b")
			return ss[0].LastState, ss[1].LastState
		}
		if a, z := state(); a != "waiting" || z != "" {
			t.Fatalf("last states %q, %q; want waiting and none", a, z)
		}
		v.complete(v.claimAt("b", "i", 1, 2, 1000)[0], 3, nil)
		if a, _ := state(); a != "completed" {
			t.Fatalf("last state %q, want completed", a)
		}
		writeGet(v, func(ctx context.Context, q engine.Queries) (int, error) { return q.ExecutionPruneBatch(ctx, 10, 10) })
		if a, _ := state(); a != "" {
			t.Fatalf("last state %q after the run was pruned, want none", a)
		}
	})
}

// testScheduleListDue: a page of the due schedules not paused, in (next
// run, namespace, name) order after the one given.
func testScheduleListDue(t *testing.T, h Harness) {
	v := setup(t, h)
	for _, s := range []engine.Schedule{schedule("b", "x", 200), schedule("a", "y", 200), schedule("a", "x", 200), schedule("c", "x", 100),
		schedule("a", "late", 900)} {
		v.putSchedule(s)
	}
	paused := schedule("a", "paused", 50)
	paused.Paused = true
	v.putSchedule(paused)
	due := func(now int64, after engine.Schedule, max int) []string {
		return scheduleNames(readGet(v, func(ctx context.Context, q engine.Queries) ([]engine.Schedule, error) {
			return q.ScheduleListDue(ctx, now, after, max)
		}))
	}
	start := engine.Schedule{NextRunAtMs: math.MinInt64}
	for _, tc := range []struct {
		name  string
		now   int64
		after engine.Schedule
		max   int
		want  []string
	}{
		{"All", 500, start, 10, []string{"c/x", "a/x", "a/y", "b/x"}},
		{"Max", 500, start, 2, []string{"c/x", "a/x"}},
		{"AfterSamePeriod", 500, engine.Schedule{NextRunAtMs: 200, Namespace: "a", Name: "x"}, 10, []string{"a/y", "b/x"}},
		{"AfterNamespace", 500, engine.Schedule{NextRunAtMs: 200, Namespace: "a", Name: "y"}, 10, []string{"b/x"}},
		{"AfterLast", 500, engine.Schedule{NextRunAtMs: 200, Namespace: "b", Name: "x"}, 10, []string{}},
		{"NotYetDue", 199, start, 10, []string{"c/x"}},
		{"AtItsTime", 900, engine.Schedule{NextRunAtMs: 200, Namespace: "b", Name: "x"}, 10, []string{"a/late"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := due(tc.now, tc.after, tc.max); !slices.Equal(got, tc.want) {
				t.Fatalf("ScheduleListDue(%d, after %+v, %d) = %v, want %v", tc.now, tc.after, tc.max, got, tc.want)
			}
		})
	}
	t.Run("Fields", func(t *testing.T) {
		got := readGet(v, func(ctx context.Context, q engine.Queries) ([]engine.Schedule, error) {
			return q.ScheduleListDue(ctx, 150, start, 10)
		})
		if len(got) != 1 || !scheduleEqual(got[0], schedule("c", "x", 100)) {
			t.Fatalf("due %+v", got)
		}
	})
}

// testScheduleAdvance: a schedule still at the period moves to the next and
// records the run (compare-and-set); from another period, or paused, it is
// false and unchanged.
func testScheduleAdvance(t *testing.T, h Harness) {
	v := setup(t, h)
	v.putSchedule(schedule("ns", "s", 1000))
	run, late := newID(t), newID(t)
	if !v.advance("ns", "s", 1000, 2000, run) {
		t.Fatal("advance from the current period = false")
	}
	if got := v.schedules("ns"); got[0].NextRunAtMs != 2000 || got[0].LastExecutionID != run {
		t.Fatalf("after advance %+v", got[0])
	}
	if v.advance("ns", "s", 1000, 2000, late) {
		t.Fatal("a second advance from the same period = true")
	}
	if got := v.schedules("ns"); got[0].NextRunAtMs != 2000 || got[0].LastExecutionID != run {
		t.Fatalf("the refused advance changed it: %+v", got[0])
	}
	if v.advance("ns", "never", 1000, 2000, late) {
		t.Fatal("advance of an absent schedule = true")
	}
	p := schedule("ns", "p", 1000)
	p.Paused = true
	v.putSchedule(p)
	if v.advance("ns", "p", 1000, 2000, late) {
		t.Fatal("advance of a paused schedule = true")
	}
	t.Run("NoRun", func(t *testing.T) {
		if !v.advance("ns", "s", 2000, 3000, uuid.Nil) {
			t.Fatal("advance without a run = false")
		}
		if got := v.schedules("ns"); got[1].NextRunAtMs != 3000 || got[1].LastExecutionID != uuid.Nil {
			t.Fatalf("after an advance without a run %+v", got[1])
		}
	})
}
