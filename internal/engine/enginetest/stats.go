package enginetest

import (
	"context"
	"reflect"
	"testing"

	"github.com/rosterdb/roster/internal/engine"
)

// statsTests are the tests of the fleet's aggregates.
func statsTests() map[string]methodTest {
	return map[string]methodTest{"Stats": testStats}
}

// testStats: workers alive and lapsed per namespace, expired leases per
// namespace, each lane's ready, scheduled and running executions with the
// oldest ready RunAt, and agents per state, all as of the time given and
// from live rows only.
func testStats(t *testing.T, h Harness) {
	v := setup(t, h)
	stats := func(at int64) engine.StatsRows {
		var s engine.StatsRows
		must(t, v.e.Snapshot(v.ctx, func(ctx context.Context, q engine.Queries) error {
			var err error
			s, err = q.Stats(ctx, at)
			return err
		}))
		return s
	}
	t.Run("Empty", func(t *testing.T) {
		s := stats(100)
		if len(s.Workers) != 0 || len(s.ExpiredLeases) != 0 || len(s.Lanes) != 0 {
			t.Fatalf("stats of an empty database %+v", s)
		}
		for state, n := range s.Agents {
			if n != 0 {
				t.Fatalf("agents %s = %d in an empty database", state, n)
			}
		}
	})
	v.register("a", "i", []string{"l"}, nil, 1, 1000000)
	v.register("a", "lapsed", []string{"l"}, nil, 1, 10)
	v.register("b", "j", []string{"m"}, nil, 1, 1000000)
	// Namespace a, lane l: two ready (RunAt 3 and 5), one scheduled (RunAt
	// 500), one running under a lease expiring at 50, one completed (not
	// live).
	at := func(ns, lane string, created, runAt int64) engine.Execution {
		e := v.execution(ns, lane)
		e.CreatedAtMs, e.RunAtMs = created, runAt
		return e
	}
	v.insert(at("a", "l", 1, 1), at("a", "l", 1, 1))
	ls := v.claimAt("a", "i", 2, 2, 50)
	v.complete(ls[1], 3, nil)
	v.insert(at("a", "l", 5, 5), at("a", "l", 3, 3), at("a", "l", 4, 500))
	// Namespace b, lane m: one running under a lease expiring at 5000.
	v.insert(at("b", "m", 1, 1))
	v.claimAt("b", "j", 1, 2, 5000)
	v.insertAgents(agent("x"), agent("y"), full("z"))
	t.Run("Aggregates", func(t *testing.T) {
		s := stats(100)
		wantWorkers := []engine.NamespaceWorkers{{Namespace: "a", Alive: 1, Lapsed: 1}, {Namespace: "b", Alive: 1}}
		if !reflect.DeepEqual(s.Workers, wantWorkers) {
			t.Errorf("workers %+v, want %+v", s.Workers, wantWorkers)
		}
		wantExpired := []engine.NamespaceCount{{Namespace: "a", N: 1}}
		if !reflect.DeepEqual(s.ExpiredLeases, wantExpired) {
			t.Errorf("expired leases %+v, want %+v", s.ExpiredLeases, wantExpired)
		}
		wantLanes := []engine.LaneCounts{
			{Namespace: "a", Lane: "l", Ready: 2, Scheduled: 1, Running: 1, OldestReadyMs: 3},
			{Namespace: "b", Lane: "m", Running: 1},
		}
		if !reflect.DeepEqual(s.Lanes, wantLanes) {
			t.Errorf("lanes %+v, want %+v", s.Lanes, wantLanes)
		}
		if s.Agents["running"] != 2 || s.Agents["terminal"] != 1 || s.Agents["spawned"] != 0 || s.Agents["suspended"] != 0 {
			t.Errorf("agents %v, want 2 running and 1 terminal", s.Agents)
		}
	})
	t.Run("AsOf", func(t *testing.T) {
		s := stats(6000)
		wantWorkers := []engine.NamespaceWorkers{{Namespace: "a", Alive: 1, Lapsed: 1}, {Namespace: "b", Alive: 1}}
		if !reflect.DeepEqual(s.Workers, wantWorkers) {
			t.Errorf("workers %+v, want %+v", s.Workers, wantWorkers)
		}
		wantExpired := []engine.NamespaceCount{{Namespace: "a", N: 1}, {Namespace: "b", N: 1}}
		if !reflect.DeepEqual(s.ExpiredLeases, wantExpired) {
			t.Errorf("expired leases at 6000 %+v, want %+v", s.ExpiredLeases, wantExpired)
		}
		// The scheduled execution is due by then: it counts as ready.
		if len(s.Lanes) != 2 || s.Lanes[0].Ready != 3 || s.Lanes[0].Scheduled != 0 || s.Lanes[0].OldestReadyMs != 3 {
			t.Errorf("lanes at 6000 %+v, want 3 ready in a/l", s.Lanes)
		}
		if s := stats(2000000); s.Workers[0].Alive != 0 || s.Workers[0].Lapsed != 2 {
			t.Errorf("workers at 2000000 %+v, want both of a lapsed", s.Workers)
		}
	})
}
