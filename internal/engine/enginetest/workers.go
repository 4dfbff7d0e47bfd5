package enginetest

import (
	"context"
	"slices"
	"testing"

	"github.com/rosterdb/roster/internal/engine"
)

// workerTests are the tests of the worker registry and its audit log.
func workerTests() map[string]methodTest {
	return map[string]methodTest{
		"WorkerGet":              testWorkerGet,
		"WorkerGetAlive":         testWorkerGetAlive,
		"WorkerRefresh":          testWorkerRefresh,
		"WorkerRegister":         testWorkerRegister,
		"WorkerHeartbeat":        testWorkerHeartbeat,
		"WorkerDelete":           testWorkerDelete,
		"WorkerList":             testWorkerList,
		"WorkerSweepBatch":       testWorkerSweepBatch,
		"WorkerEventAppend":      testWorkerEventAppend,
		"WorkerEventAppendSwept": testWorkerEventAppendSwept,
		"WorkerEventList":        testWorkerEventList,
		"WorkerEventLatest":      testWorkerEventLatest,
		"WorkerEventPruneBatch":  testWorkerEventPruneBatch,
	}
}

// wk is the key of worker inst of ns.
func wk(ns, inst string) engine.WorkerKey { return engine.WorkerKey{Namespace: ns, InstanceID: inst} }

// getWorker reads worker k with WorkerGet.
func (v *env) getWorker(k engine.WorkerKey) (engine.Worker, error) {
	return tryRead(v, func(ctx context.Context, q engine.Queries) (engine.Worker, error) { return q.WorkerGet(ctx, k) })
}

// events reads every event of the audit log in Seq order.
func (v *env) events() []engine.WorkerEvent {
	v.t.Helper()
	return readGet(v, func(ctx context.Context, q engine.Queries) ([]engine.WorkerEvent, error) {
		return q.WorkerEventList(ctx, engine.WorkerEventListParams{Limit: 1000})
	})
}

// appendEvents logs one event per (namespace, instance, at) of evs, kind
// "registered", in order.
func (v *env) appendEvents(evs ...engine.WorkerEvent) {
	v.t.Helper()
	v.write(func(ctx context.Context, q engine.Queries) error {
		for _, e := range evs {
			if e.Kind == "" {
				e.Kind = "registered"
			}
			if err := q.WorkerEventAppend(ctx, e); err != nil {
				return err
			}
		}
		return nil
	})
}

// eventKeys shows events as "namespace/instance@at", in their order.
func eventKeys(evs []engine.WorkerEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Namespace + "/" + e.InstanceID + "@" + itoa(e.AtMs)
	}
	return out
}

// testWorkerGet: a registered worker reads back field for field, alive or
// lapsed; an unknown one is ErrNoRows.
func testWorkerGet(t *testing.T, h Harness) {
	v := setup(t, h)
	k := engine.WorkerKey{Namespace: "ns", InstanceID: "i"}
	v.register("ns", "i", []string{"a", "b"}, []string{"gpu"}, 10, 100)
	v.register("ns", "bare", nil, nil, 10, 100)
	t.Run("Fields", func(t *testing.T) {
		w, err := v.getWorker(k)
		must(t, err)
		want := engine.Worker{Namespace: "ns", InstanceID: "i", WorkerID: "w-i", Lanes: []string{"a", "b"}, Capabilities: []string{"gpu"},
			LastHeartbeatMs: 10, TTLMs: 100, RegisteredAtMs: 10}
		if !workerEqual(w, want) {
			t.Fatalf("WorkerGet = %+v, want %+v", w, want)
		}
	})
	t.Run("EmptyListsAreNil", func(t *testing.T) {
		w, err := v.getWorker(engine.WorkerKey{Namespace: "ns", InstanceID: "bare"})
		must(t, err)
		if w.Lanes != nil || w.Capabilities != nil {
			t.Fatalf("lanes %#v, capabilities %#v: want nil", w.Lanes, w.Capabilities)
		}
	})
	t.Run("Lapsed", func(t *testing.T) {
		// WorkerGet has no clock: a worker long past its TTL still reads.
		v.register("ns", "old", []string{"a"}, nil, 1, 1)
		if _, err := v.getWorker(engine.WorkerKey{Namespace: "ns", InstanceID: "old"}); err != nil {
			t.Fatalf("lapsed worker: %v", err)
		}
	})
	t.Run("Unknown", func(t *testing.T) {
		_, err := v.getWorker(engine.WorkerKey{Namespace: "ns", InstanceID: "nobody"})
		wantNoRows(t, "unknown instance", err)
		_, err = v.getWorker(engine.WorkerKey{Namespace: "other", InstanceID: "i"})
		wantNoRows(t, "other namespace", err)
	})
}

// workerEqual compares two workers field for field.
func workerEqual(a, b engine.Worker) bool {
	return a.Namespace == b.Namespace && a.InstanceID == b.InstanceID && a.WorkerID == b.WorkerID &&
		slices.Equal(a.Lanes, b.Lanes) && slices.Equal(a.Capabilities, b.Capabilities) &&
		a.LastHeartbeatMs == b.LastHeartbeatMs && a.TTLMs == b.TTLMs && a.RegisteredAtMs == b.RegisteredAtMs
}

// testWorkerGetAlive: a worker reads while now < heartbeat + TTL, and is
// ErrNoRows from then on.
func testWorkerGetAlive(t *testing.T, h Harness) {
	v := setup(t, h)
	k := engine.WorkerKey{Namespace: "ns", InstanceID: "i"}
	v.register("ns", "i", []string{"l"}, nil, 10, 100)
	alive := func(now int64) (engine.Worker, error) {
		return tryRead(v, func(ctx context.Context, q engine.Queries) (engine.Worker, error) {
			return q.WorkerGetAlive(ctx, k, now)
		})
	}
	t.Run("Alive", func(t *testing.T) {
		w, err := alive(109)
		must(t, err)
		if w.InstanceID != "i" || w.LastHeartbeatMs != 10 || w.TTLMs != 100 || !slices.Equal(w.Lanes, []string{"l"}) {
			t.Fatalf("WorkerGetAlive = %+v", w)
		}
	})
	t.Run("LapsedAtHeartbeatPlusTTL", func(t *testing.T) {
		_, err := alive(110)
		wantNoRows(t, "at heartbeat + TTL", err)
		_, err = alive(5000)
		wantNoRows(t, "long after", err)
	})
	t.Run("Unknown", func(t *testing.T) {
		_, err := tryRead(v, func(ctx context.Context, q engine.Queries) (engine.Worker, error) {
			return q.WorkerGetAlive(ctx, engine.WorkerKey{Namespace: "ns", InstanceID: "nobody"}, 20)
		})
		wantNoRows(t, "unknown", err)
	})
}

// testWorkerRefresh: a worker alive under the same worker id gets new lanes,
// capabilities, TTL and heartbeat, keeping its registration time; any other
// case is ErrNoRows and changes nothing.
func testWorkerRefresh(t *testing.T, h Harness) {
	v := setup(t, h)
	k := engine.WorkerKey{Namespace: "ns", InstanceID: "i"}
	v.register("ns", "i", []string{"a"}, nil, 10, 100)
	refresh := func(w engine.Worker) (int64, error) {
		return tryWrite(v, func(ctx context.Context, q engine.Queries) (int64, error) { return q.WorkerRefresh(ctx, w) })
	}
	t.Run("Alive", func(t *testing.T) {
		at, err := refresh(engine.Worker{Namespace: "ns", InstanceID: "i", WorkerID: "w-i", Lanes: []string{"b", "c"},
			Capabilities: []string{"x"}, LastHeartbeatMs: 50, TTLMs: 200})
		must(t, err)
		if at != 10 {
			t.Errorf("registered at %d, want 10", at)
		}
		w, err := v.getWorker(k)
		must(t, err)
		want := engine.Worker{Namespace: "ns", InstanceID: "i", WorkerID: "w-i", Lanes: []string{"b", "c"}, Capabilities: []string{"x"},
			LastHeartbeatMs: 50, TTLMs: 200, RegisteredAtMs: 10}
		if !workerEqual(w, want) {
			t.Fatalf("after refresh %+v, want %+v", w, want)
		}
	})
	t.Run("OtherWorkerID", func(t *testing.T) {
		_, err := refresh(engine.Worker{Namespace: "ns", InstanceID: "i", WorkerID: "impostor", Lanes: []string{"z"}, LastHeartbeatMs: 60, TTLMs: 200})
		wantNoRows(t, "another worker id", err)
		if w, _ := v.getWorker(k); w.WorkerID != "w-i" || w.LastHeartbeatMs != 50 || !slices.Equal(w.Lanes, []string{"b", "c"}) {
			t.Fatalf("the refused refresh changed the row: %+v", w)
		}
	})
	t.Run("Lapsed", func(t *testing.T) {
		_, err := refresh(engine.Worker{Namespace: "ns", InstanceID: "i", WorkerID: "w-i", LastHeartbeatMs: 250, TTLMs: 200})
		wantNoRows(t, "lapsed (heartbeat 50 + TTL 200 = 250)", err)
		if w, _ := v.getWorker(k); w.LastHeartbeatMs != 50 {
			t.Fatalf("the refused refresh moved the heartbeat: %+v", w)
		}
	})
	t.Run("Unknown", func(t *testing.T) {
		_, err := refresh(engine.Worker{Namespace: "ns", InstanceID: "nobody", WorkerID: "w", LastHeartbeatMs: 60, TTLMs: 200})
		wantNoRows(t, "unknown", err)
		if _, err := v.getWorker(engine.WorkerKey{Namespace: "ns", InstanceID: "nobody"}); err == nil {
			t.Fatal("a refresh of an unknown worker created it")
		}
	})
}

// testWorkerRegister: a new key is inserted with its registration time at
// its heartbeat; an alive key is ErrNoRows and kept; a lapsed key is taken
// over.
func testWorkerRegister(t *testing.T, h Harness) {
	v := setup(t, h)
	k := engine.WorkerKey{Namespace: "ns", InstanceID: "i"}
	reg := func(w engine.Worker) error {
		return v.e.Write(v.ctx, func(ctx context.Context, q engine.Queries) error { return q.WorkerRegister(ctx, w) })
	}
	t.Run("New", func(t *testing.T) {
		must(t, reg(engine.Worker{Namespace: "ns", InstanceID: "i", WorkerID: "first", Lanes: []string{"l"}, LastHeartbeatMs: 10, TTLMs: 100}))
		w, err := v.getWorker(k)
		must(t, err)
		if w.WorkerID != "first" || w.RegisteredAtMs != 10 || w.LastHeartbeatMs != 10 || w.TTLMs != 100 {
			t.Fatalf("registered %+v", w)
		}
	})
	t.Run("AliveKeyHeld", func(t *testing.T) {
		err := reg(engine.Worker{Namespace: "ns", InstanceID: "i", WorkerID: "second", Lanes: []string{"m"}, LastHeartbeatMs: 109, TTLMs: 100})
		wantNoRows(t, "register over an alive worker", err)
		if w, _ := v.getWorker(k); w.WorkerID != "first" || w.LastHeartbeatMs != 10 || !slices.Equal(w.Lanes, []string{"l"}) {
			t.Fatalf("the alive worker was changed: %+v", w)
		}
	})
	t.Run("LapsedKeyTakenOver", func(t *testing.T) {
		must(t, reg(engine.Worker{Namespace: "ns", InstanceID: "i", WorkerID: "third", Lanes: []string{"m"}, Capabilities: []string{"c"}, LastHeartbeatMs: 110, TTLMs: 50}))
		w, err := v.getWorker(k)
		must(t, err)
		want := engine.Worker{Namespace: "ns", InstanceID: "i", WorkerID: "third", Lanes: []string{"m"}, Capabilities: []string{"c"},
			LastHeartbeatMs: 110, TTLMs: 50, RegisteredAtMs: 110}
		if !workerEqual(w, want) {
			t.Fatalf("after the takeover %+v, want %+v", w, want)
		}
	})
	t.Run("OtherNamespace", func(t *testing.T) {
		must(t, reg(engine.Worker{Namespace: "other", InstanceID: "i", WorkerID: "w", LastHeartbeatMs: 120, TTLMs: 50}))
		if w, _ := v.getWorker(k); w.WorkerID != "third" {
			t.Fatalf("a worker of another namespace replaced this one: %+v", w)
		}
	})
}

// testWorkerHeartbeat: an alive worker's heartbeat moves to now and its TTL
// comes back, with a heartbeat event when asked; a lapsed or unknown worker
// is ErrNoRows and nothing is written.
func testWorkerHeartbeat(t *testing.T, h Harness) {
	v := setup(t, h)
	k := engine.WorkerKey{Namespace: "ns", InstanceID: "i"}
	v.register("ns", "i", []string{"l"}, nil, 10, 100)
	beat := func(k engine.WorkerKey, now int64, logEvent bool) (int64, error) {
		var ttl int64
		err := v.e.WriteOne(v.ctx, func(ctx context.Context, q engine.Queries) error {
			var err error
			ttl, err = q.WorkerHeartbeat(ctx, k, now, logEvent)
			return err
		})
		return ttl, err
	}
	t.Run("WithoutEvent", func(t *testing.T) {
		ttl, err := beat(k, 50, false)
		must(t, err)
		if ttl != 100 {
			t.Errorf("ttl %d, want 100", ttl)
		}
		if w, _ := v.getWorker(k); w.LastHeartbeatMs != 50 || w.RegisteredAtMs != 10 {
			t.Fatalf("after the heartbeat %+v", w)
		}
		if evs := v.events(); len(evs) != 0 {
			t.Fatalf("events %+v, want none", evs)
		}
	})
	t.Run("WithEvent", func(t *testing.T) {
		_, err := beat(k, 60, true)
		must(t, err)
		evs := v.events()
		if len(evs) != 1 || evs[0].Kind != "heartbeat" || evs[0].AtMs != 60 || evs[0].Namespace != "ns" || evs[0].InstanceID != "i" {
			t.Fatalf("events %+v, want one heartbeat at 60", evs)
		}
	})
	t.Run("Lapsed", func(t *testing.T) {
		_, err := beat(k, 160, true)
		wantNoRows(t, "heartbeat at heartbeat + TTL", err)
		if w, _ := v.getWorker(k); w.LastHeartbeatMs != 60 {
			t.Fatalf("the refused heartbeat moved it: %+v", w)
		}
		if evs := v.events(); len(evs) != 1 {
			t.Fatalf("the refused heartbeat logged: %+v", evs)
		}
	})
	t.Run("Unknown", func(t *testing.T) {
		_, err := beat(engine.WorkerKey{Namespace: "ns", InstanceID: "nobody"}, 70, true)
		wantNoRows(t, "unknown", err)
		if evs := v.events(); len(evs) != 1 {
			t.Fatalf("the refused heartbeat logged: %+v", evs)
		}
	})
}

// testWorkerDelete: a worker, alive or lapsed, is removed and reported;
// an absent one is false.
func testWorkerDelete(t *testing.T, h Harness) {
	v := setup(t, h)
	v.register("ns", "alive", []string{"l"}, nil, 10, 100000)
	v.register("ns", "lapsed", []string{"l"}, nil, 1, 1)
	del := func(inst string) bool {
		return writeGet(v, func(ctx context.Context, q engine.Queries) (bool, error) {
			return q.WorkerDelete(ctx, engine.WorkerKey{Namespace: "ns", InstanceID: inst})
		})
	}
	for _, inst := range []string{"alive", "lapsed"} {
		t.Run(inst, func(t *testing.T) {
			if !del(inst) {
				t.Fatal("WorkerDelete = false for a present worker")
			}
			_, err := v.getWorker(engine.WorkerKey{Namespace: "ns", InstanceID: inst})
			wantNoRows(t, "after delete", err)
		})
	}
	t.Run("Absent", func(t *testing.T) {
		if del("alive") {
			t.Fatal("WorkerDelete = true for a deleted worker")
		}
	})
}

// testWorkerList: keyset pages of one namespace in instance order, and of
// every namespace in (namespace, instance) order.
func testWorkerList(t *testing.T, h Harness) {
	v := setup(t, h)
	for _, k := range []engine.WorkerKey{wk("b", "2"), wk("a", "3"), wk("b", "1"), wk("a", "1"), wk("c", "1"), wk("a", "2")} {
		v.register(k.Namespace, k.InstanceID, nil, nil, 10, 100)
	}
	list := func(p engine.WorkerListParams) []string {
		ws := readGet(v, func(ctx context.Context, q engine.Queries) ([]engine.Worker, error) { return q.WorkerList(ctx, p) })
		out := make([]string, len(ws))
		for i, w := range ws {
			out[i] = w.Namespace + "/" + w.InstanceID
		}
		return out
	}
	for _, tc := range []struct {
		name string
		p    engine.WorkerListParams
		want []string
	}{
		{"Namespace", engine.WorkerListParams{Namespace: "a", Limit: 10}, []string{"a/1", "a/2", "a/3"}},
		{"NamespaceLimit", engine.WorkerListParams{Namespace: "a", Limit: 2}, []string{"a/1", "a/2"}},
		{"NamespaceAfter", engine.WorkerListParams{Namespace: "a", AfterInstanceID: "2", Limit: 10}, []string{"a/3"}},
		{"All", engine.WorkerListParams{Limit: 10}, []string{"a/1", "a/2", "a/3", "b/1", "b/2", "c/1"}},
		{"AllAfter", engine.WorkerListParams{AfterNamespace: "a", AfterInstanceID: "3", Limit: 2}, []string{"b/1", "b/2"}},
		{"AllAfterMidNamespace", engine.WorkerListParams{AfterNamespace: "b", AfterInstanceID: "1", Limit: 10}, []string{"b/2", "c/1"}},
		{"Empty", engine.WorkerListParams{Namespace: "none", Limit: 10}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := list(tc.p); !slices.Equal(got, tc.want) {
				t.Fatalf("WorkerList(%+v) = %v, want %v", tc.p, got, tc.want)
			}
		})
	}
}

// testWorkerSweepBatch: up to batch lapsed workers go, soonest expiry first;
// alive ones stay.
func testWorkerSweepBatch(t *testing.T, h Harness) {
	v := setup(t, h)
	v.register("ns", "exp30", nil, nil, 10, 20) // expires at 30
	v.register("ns", "exp20", nil, nil, 10, 10) // 20
	v.register("other", "exp40", nil, nil, 30, 10)
	v.register("ns", "alive", nil, nil, 10, 1000)
	sweep := func(now int64, batch int) []string {
		keys := writeGet(v, func(ctx context.Context, q engine.Queries) ([]engine.WorkerKey, error) {
			return q.WorkerSweepBatch(ctx, now, batch)
		})
		out := make([]string, len(keys))
		for i, k := range keys {
			out[i] = k.Namespace + "/" + k.InstanceID
		}
		slices.Sort(out)
		return out
	}
	t.Run("BatchSoonestFirst", func(t *testing.T) {
		if got := sweep(100, 2); !slices.Equal(got, []string{"ns/exp20", "ns/exp30"}) {
			t.Fatalf("first batch %v", got)
		}
		for _, inst := range []string{"exp20", "exp30"} {
			_, err := v.getWorker(engine.WorkerKey{Namespace: "ns", InstanceID: inst})
			wantNoRows(t, inst+" after the sweep", err)
		}
	})
	t.Run("Rest", func(t *testing.T) {
		if got := sweep(100, 2); !slices.Equal(got, []string{"other/exp40"}) {
			t.Fatalf("second batch %v", got)
		}
		if got := sweep(100, 2); len(got) != 0 {
			t.Fatalf("third batch %v, want none", got)
		}
	})
	t.Run("AliveStays", func(t *testing.T) {
		if _, err := v.getWorker(engine.WorkerKey{Namespace: "ns", InstanceID: "alive"}); err != nil {
			t.Fatalf("the alive worker: %v", err)
		}
	})
	t.Run("NotYetLapsed", func(t *testing.T) {
		v.register("ns", "exp50", nil, nil, 40, 10)
		if got := sweep(49, 10); len(got) != 0 {
			t.Fatalf("swept %v before expiry", got)
		}
		if got := sweep(50, 10); !slices.Equal(got, []string{"ns/exp50"}) {
			t.Fatalf("at expiry swept %v", got)
		}
	})
}

// testWorkerEventAppend: an event is logged with its fields and a Seq that
// grows with each append.
func testWorkerEventAppend(t *testing.T, h Harness) {
	v := setup(t, h)
	v.appendEvents(engine.WorkerEvent{Namespace: "ns", InstanceID: "i", Kind: "registered", AtMs: 10},
		engine.WorkerEvent{Namespace: "ns", InstanceID: "i", Kind: "marked_dead", AtMs: 20, Reason: "gone"})
	evs := v.events()
	if len(evs) != 2 {
		t.Fatalf("events %+v", evs)
	}
	if e := evs[1]; e.Kind != "marked_dead" || e.AtMs != 20 || e.Reason != "gone" || e.Namespace != "ns" || e.InstanceID != "i" {
		t.Errorf("second event %+v", e)
	}
	if evs[0].Kind != "registered" || evs[0].Reason != "" || evs[0].Seq <= 0 || evs[1].Seq <= evs[0].Seq {
		t.Errorf("events %+v: want positive, growing Seqs", evs)
	}
}

// testWorkerEventAppendSwept: one ttl_swept event per key, in the keys'
// order, at the time given.
func testWorkerEventAppendSwept(t *testing.T, h Harness) {
	v := setup(t, h)
	keys := []engine.WorkerKey{wk("b", "2"), wk("a", "9"), wk("b", "1")}
	v.write(func(ctx context.Context, q engine.Queries) error { return q.WorkerEventAppendSwept(ctx, keys, 77) })
	evs := v.events()
	if got := eventKeys(evs); !slices.Equal(got, []string{"b/2@77", "a/9@77", "b/1@77"}) {
		t.Fatalf("events %v", got)
	}
	for _, e := range evs {
		if e.Kind != "ttl_swept" || e.Reason != "" {
			t.Errorf("event %+v: want kind ttl_swept, no reason", e)
		}
	}
	t.Run("None", func(t *testing.T) {
		v.write(func(ctx context.Context, q engine.Queries) error { return q.WorkerEventAppendSwept(ctx, nil, 78) })
		if n := len(v.events()); n != 3 {
			t.Fatalf("%d events after an empty append, want 3", n)
		}
	})
}

// testWorkerEventList: events in Seq order after AfterSeq, up to Limit, of a
// namespace, an instance (any namespace) or both.
func testWorkerEventList(t *testing.T, h Harness) {
	v := setup(t, h)
	v.appendEvents(engine.WorkerEvent{Namespace: "a", InstanceID: "1", AtMs: 1}, engine.WorkerEvent{Namespace: "b", InstanceID: "1", AtMs: 2},
		engine.WorkerEvent{Namespace: "a", InstanceID: "2", AtMs: 3}, engine.WorkerEvent{Namespace: "a", InstanceID: "1", AtMs: 4},
		engine.WorkerEvent{Namespace: "b", InstanceID: "2", AtMs: 5})
	all := v.events()
	list := func(p engine.WorkerEventListParams) []string {
		return eventKeys(readGet(v, func(ctx context.Context, q engine.Queries) ([]engine.WorkerEvent, error) {
			return q.WorkerEventList(ctx, p)
		}))
	}
	for _, tc := range []struct {
		name string
		p    engine.WorkerEventListParams
		want []string
	}{
		{"All", engine.WorkerEventListParams{Limit: 10}, []string{"a/1@1", "b/1@2", "a/2@3", "a/1@4", "b/2@5"}},
		{"Limit", engine.WorkerEventListParams{Limit: 2}, []string{"a/1@1", "b/1@2"}},
		{"AfterSeq", engine.WorkerEventListParams{AfterSeq: all[2].Seq, Limit: 10}, []string{"a/1@4", "b/2@5"}},
		{"Namespace", engine.WorkerEventListParams{Namespace: "a", Limit: 10}, []string{"a/1@1", "a/2@3", "a/1@4"}},
		{"NamespaceAfterSeq", engine.WorkerEventListParams{Namespace: "a", AfterSeq: all[0].Seq, Limit: 1}, []string{"a/2@3"}},
		{"InstanceAnyNamespace", engine.WorkerEventListParams{InstanceID: "1", Limit: 10}, []string{"a/1@1", "b/1@2", "a/1@4"}},
		{"InstanceAndNamespace", engine.WorkerEventListParams{Namespace: "b", InstanceID: "1", Limit: 10}, []string{"b/1@2"}},
		{"InstanceAfterSeq", engine.WorkerEventListParams{InstanceID: "1", AfterSeq: all[1].Seq, Limit: 10}, []string{"a/1@4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := list(tc.p); !slices.Equal(got, tc.want) {
				t.Fatalf("WorkerEventList(%+v) = %v, want %v", tc.p, got, tc.want)
			}
		})
	}
}

// testWorkerEventLatest: the newest n events, newest first, of one namespace
// or of all.
func testWorkerEventLatest(t *testing.T, h Harness) {
	v := setup(t, h)
	v.appendEvents(engine.WorkerEvent{Namespace: "a", InstanceID: "1", AtMs: 1}, engine.WorkerEvent{Namespace: "b", InstanceID: "1", AtMs: 2},
		engine.WorkerEvent{Namespace: "a", InstanceID: "2", AtMs: 3}, engine.WorkerEvent{Namespace: "b", InstanceID: "2", AtMs: 4})
	latest := func(ns string, n int) []string {
		return eventKeys(readGet(v, func(ctx context.Context, q engine.Queries) ([]engine.WorkerEvent, error) {
			return q.WorkerEventLatest(ctx, ns, n)
		}))
	}
	if got := latest("", 3); !slices.Equal(got, []string{"b/2@4", "a/2@3", "b/1@2"}) {
		t.Errorf("every namespace: %v", got)
	}
	if got := latest("a", 10); !slices.Equal(got, []string{"a/2@3", "a/1@1"}) {
		t.Errorf("namespace a: %v", got)
	}
	if got := latest("a", 1); !slices.Equal(got, []string{"a/2@3"}) {
		t.Errorf("namespace a, 1: %v", got)
	}
	if got := latest("none", 10); len(got) != 0 {
		t.Errorf("unknown namespace: %v", got)
	}
}

// testWorkerEventPruneBatch: up to batch events logged before the time go,
// oldest first; the count comes back.
func testWorkerEventPruneBatch(t *testing.T, h Harness) {
	v := setup(t, h)
	v.appendEvents(engine.WorkerEvent{Namespace: "a", InstanceID: "1", AtMs: 30}, engine.WorkerEvent{Namespace: "a", InstanceID: "2", AtMs: 10},
		engine.WorkerEvent{Namespace: "b", InstanceID: "1", AtMs: 40}, engine.WorkerEvent{Namespace: "b", InstanceID: "2", AtMs: 20})
	prune := func(before int64, batch int) int {
		return writeGet(v, func(ctx context.Context, q engine.Queries) (int, error) {
			return q.WorkerEventPruneBatch(ctx, before, batch)
		})
	}
	if n := prune(35, 2); n != 2 {
		t.Fatalf("first batch pruned %d, want 2", n)
	}
	if got := eventKeys(v.events()); !slices.Equal(got, []string{"a/1@30", "b/1@40"}) {
		t.Fatalf("after the first batch %v, want the two oldest gone", got)
	}
	if n := prune(35, 2); n != 1 {
		t.Fatalf("second batch pruned %d, want 1", n)
	}
	if n := prune(35, 2); n != 0 {
		t.Fatalf("third batch pruned %d, want 0", n)
	}
	if got := eventKeys(v.events()); !slices.Equal(got, []string{"b/1@40"}) {
		t.Fatalf("left %v", got)
	}
}
