package service

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

// withMigrations substitutes the embedded migrations (tests only).

// migrationsUpTo returns the embedded migrations numbered <= n, plus extra files.

func TestInMemoryStoresAreIndependent(t *testing.T) {
	ctx := context.Background()
	a, _ := newStore(t)
	b, _ := newStore(t)
	_, err := a.RegisterWorker(ctx, RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "i", TTL: time.Hour})
	must(t, err)
	if _, err := b.GetWorker(ctx, "ns", "i"); !errors.Is(err, ErrNotRegistered) {
		t.Fatalf("second in-memory store sees the first's worker: %v", err)
	}
	page, err := b.ListWorkers(ctx, ListWorkersArgs{})
	must(t, err)
	if len(page.Workers) != 0 {
		t.Fatalf("second in-memory store lists %d workers", len(page.Workers))
	}
}

func TestErrClosed(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		must(t, s.Close())
		calls := map[string]func() error{
			"RegisterWorker": func() error {
				_, err := s.RegisterWorker(ctx, RegisterWorkerArgs{Namespace: "n", WorkerID: "w", InstanceID: "i", TTL: time.Second})
				return err
			},
			"HeartbeatWorker": func() error {
				_, err := s.HeartbeatWorker(ctx, HeartbeatWorkerArgs{Namespace: "n", InstanceID: "i"})
				return err
			},
			"GetWorker":   func() error { _, err := s.GetWorker(ctx, "n", "i"); return err },
			"ListWorkers": func() error { _, err := s.ListWorkers(ctx, ListWorkersArgs{}); return err },
			"SweepExpiredWorkers": func() error {
				_, err := s.SweepExpiredWorkers(ctx, time.Time{})
				return err
			},
			"ListWorkerEvents": func() error { _, err := s.ListWorkerEvents(ctx, ListWorkerEventsArgs{}); return err },
			"MarkWorkerDead": func() error {
				return s.MarkWorkerDead(ctx, MarkWorkerDeadArgs{Namespace: "n", InstanceID: "i"})
			},
			"PruneWorkerEvents": func() error { _, err := s.PruneWorkerEvents(ctx, time.Time{}); return err },
			"CreateExecution": func() error {
				_, err := s.CreateExecution(ctx, CreateExecutionArgs{Namespace: "n", Lane: "l"})
				return err
			},
			"GetExecution": func() error { _, err := s.GetExecution(ctx, uuid.New()); return err },
			"ClaimExecution": func() error {
				_, err := s.ClaimExecution(ctx, ClaimArgs{Namespace: "n", InstanceID: "i", LeaseTTL: time.Second})
				return err
			},
			"RenewLease": func() error {
				_, err := s.RenewLease(ctx, RenewLeaseArgs{TTL: time.Second})
				return err
			},
			"CompleteExecution":    func() error { return s.CompleteExecution(ctx, CompleteArgs{}) },
			"FailExecution":        func() error { return s.FailExecution(ctx, FailArgs{}) },
			"ReleaseLease":         func() error { return s.ReleaseLease(ctx, ReleaseArgs{}) },
			"ListExpiredLeases":    func() error { _, err := s.ListExpiredLeases(ctx, ListExpiredLeasesArgs{}); return err },
			"ReclaimExpiredLeases": func() error { _, err := s.ReclaimExpiredLeases(ctx, time.Time{}, 0); return err },
			"InsertAgent":          func() error { return s.InsertAgent(ctx, agent("a")) },
			"SpawnAgent":           func() error { _, _, err := s.SpawnAgent(ctx, agent("a")); return err },
			"GetAgent":             func() error { _, err := s.GetAgent(ctx, "a"); return err },
			"UpdateAgentState": func() error {
				return s.UpdateAgentState(ctx, UpdateAgentStateArgs{ID: "a", State: AgentRunning})
			},
			"SetAgentCheckpoint": func() error { return s.SetAgentCheckpoint(ctx, "a", "c", 1) },
			"FindAgentByIdempotencyKey": func() error {
				_, err := s.FindAgentByIdempotencyKey(ctx, "o", "k")
				return err
			},
			"FindLiveAgentByProviderSession": func() error {
				_, err := s.FindLiveAgentByProviderSession(ctx, "p", "s")
				return err
			},
			"TerminateLiveAgents":       func() error { _, err := s.TerminateLiveAgents(ctx, time.Time{}); return err },
			"TerminateLiveAgentsOnHost": func() error { _, err := s.TerminateLiveAgentsOnHost(ctx, "h", time.Time{}); return err },
			"CancelExecution":           func() error { return s.CancelExecution(ctx, CancelExecutionArgs{ID: uuid.New()}) },
			"ClaimExecutions": func() error {
				_, err := s.ClaimExecutions(ctx, ClaimArgs{Namespace: "n", InstanceID: "i", LeaseTTL: time.Second}, 0)
				return err
			},
			"ListExecutions": func() error { _, err := s.ListExecutions(ctx, ListExecutionsArgs{Limit: -1}); return err },
			"RunWorker":      func() error { return s.RunWorker(ctx, WorkerArgs{}) },
			"ListAgents":     func() error { _, err := s.ListAgents(ctx, ListAgentsArgs{}); return err },
			"Sweep":          func() error { _, err := s.Sweep(ctx, time.Time{}, SweeperArgs{}); return err },
			"Close":          s.Close,
			// The closed check comes before any argument check.
			"RegisterWorker zero TTL": func() error {
				_, err := s.RegisterWorker(ctx, RegisterWorkerArgs{Namespace: "n", WorkerID: "w", InstanceID: "i"})
				return err
			},
			"GetAgent empty id":            func() error { _, err := s.GetAgent(ctx, ""); return err },
			"ListWorkers negative limit":   func() error { _, err := s.ListWorkers(ctx, ListWorkersArgs{Limit: -1}); return err },
			"ReclaimExpiredLeases -1":      func() error { _, err := s.ReclaimExpiredLeases(ctx, time.Time{}, -1); return err },
			"CreateExecution empty":        func() error { _, err := s.CreateExecution(ctx, CreateExecutionArgs{}); return err },
			"UpdateAgentState bad state":   func() error { return s.UpdateAgentState(ctx, UpdateAgentStateArgs{ID: "a", State: "x"}) },
			"ListExpiredLeases bad cursor": func() error { _, err := s.ListExpiredLeases(ctx, ListExpiredLeasesArgs{After: "!"}); return err },
		}
		for name, call := range calls {
			t.Run(name, func(t *testing.T) { wantErr(t, call(), ErrClosed) })
		}
	})

}

func TestOpenRejectsBadOptions(t *testing.T) {
	ctx := context.Background()
	for name, opt := range map[string]Option{
		"WithReadConns":   WithReadConns(0),
		"WithWriteQueue":  WithWriteQueue(0, time.Second),
		"WithDurability":  WithDurability(Durability(7)),
		"WithClock":       WithClock(nil),
		"WithLogger":      WithLogger(nil),
		"WithBusyTimeout": WithBusyTimeout(-time.Second),
		"WithObserver":    WithObserver(nil),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Open(ctx, ":memory:", opt)
			wantErr(t, err, ErrInvalidInput)
		})
	}
	_, err := Open(ctx, "")
	wantErr(t, err, ErrInvalidInput)
}

func TestReadOnlyStore(t *testing.T) {
	conformanceShared(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		loc := b.fresh(t)
		w, _ := b.open(t, loc)
		register(t, w, "ns", "i", "w", time.Hour, t0)
		agentID := "a"
		must(t, w.InsertAgent(ctx, agent(agentID)))
		r, _ := b.open(t, loc, WithReadOnly())

		// Reads behave as usual.
		if _, err := r.GetWorker(ctx, "ns", "i"); err != nil {
			t.Fatalf("GetWorker on a read-only Store: %v", err)
		}
		if _, err := r.GetAgent(ctx, agentID); err != nil {
			t.Fatalf("GetAgent on a read-only Store: %v", err)
		}
		// Every write is ErrReadOnly and changes nothing.
		writes := map[string]func() error{
			"RegisterWorker": func() error {
				_, err := r.RegisterWorker(ctx, RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "j", TTL: time.Hour})
				return err
			},
			"HeartbeatWorker": func() error {
				_, err := r.HeartbeatWorker(ctx, HeartbeatWorkerArgs{Namespace: "ns", InstanceID: "i"})
				return err
			},
			"MarkWorkerDead":      func() error { return r.MarkWorkerDead(ctx, MarkWorkerDeadArgs{Namespace: "ns", InstanceID: "i"}) },
			"SweepExpiredWorkers": func() error { _, err := r.SweepExpiredWorkers(ctx, t0.Add(100*time.Hour)); return err },
			"PruneWorkerEvents":   func() error { _, err := r.PruneWorkerEvents(ctx, t0.Add(100*time.Hour)); return err },
			"CreateExecution": func() error {
				_, err := r.CreateExecution(ctx, CreateExecutionArgs{Namespace: "ns", Lane: "l"})
				return err
			},
			"InsertAgent":  func() error { return r.InsertAgent(ctx, agent("b")) },
			"ReleaseLease": func() error { return r.ReleaseLease(ctx, ReleaseArgs{}) },
			"ClaimExecution": func() error {
				_, err := r.ClaimExecution(ctx, ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Hour})
				return err
			},
			"CancelExecution":     func() error { return r.CancelExecution(ctx, CancelExecutionArgs{ID: uuid.New()}) },
			"TerminateLiveAgents": func() error { _, err := r.TerminateLiveAgents(ctx, time.Time{}); return err },
			"UpdateAgentState": func() error {
				return r.UpdateAgentState(ctx, UpdateAgentStateArgs{ID: agentID, State: AgentRunning})
			},
		}
		for name, call := range writes {
			t.Run(name, func(t *testing.T) { wantErr(t, call(), ErrReadOnly) })
		}
		if _, err := w.GetWorker(ctx, "ns", "j"); !errors.Is(err, ErrNotRegistered) {
			t.Fatalf("a refused write registered a worker: %v", err)
		}
		if a, err := w.GetAgent(ctx, agentID); err != nil || a.State != AgentSpawned {
			t.Fatalf("a refused write changed the agent: %+v %v", a, err)
		}
	})
}

// withLocalClock replaces the local clock an engine compares with its own
// (tests skew it).
func withLocalClock(f func() time.Time) Option { return func(c *config) { c.localClock = f } }

// On a database many hosts share, Stores whose local clocks differ by minutes
// agree on liveness: the default clock is the server's.
func TestServerClockUnitesTheFleet(t *testing.T) {
	for _, b := range backends() {
		if b.name != "postgres" {
			continue
		}
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			loc := b.fresh(t)
			open := func(skew time.Duration) *Store {
				s, err := Open(ctx, loc, withLocalClock(func() time.Time { return time.Now().Add(skew) }))
				must(t, err)
				t.Cleanup(func() { _ = s.Close() })
				return s
			}
			ahead, behind := open(3*time.Minute), open(-4*time.Minute)
			if d := ahead.now(time.Time{}).Sub(behind.now(time.Time{})); d < -2*time.Second || d > 2*time.Second {
				t.Fatalf("the two Stores' clocks differ by %v", d)
			}
			if d := time.Since(ahead.now(time.Time{})); d < -2*time.Second || d > 2*time.Second {
				t.Fatalf("the fleet clock is %v away from the server's (this host's)", d)
			}
			// Registered by the Store ahead, with a 30s TTL: alive for the Store
			// behind, and not swept by it.
			_, err := ahead.RegisterWorker(ctx, RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "i", TTL: 30 * time.Second})
			must(t, err)
			swept, err := behind.SweepExpiredWorkers(ctx, time.Time{})
			must(t, err)
			if swept != 0 {
				t.Fatalf("the Store behind swept %d workers the Store ahead had just registered", swept)
			}
			if _, err := behind.HeartbeatWorker(ctx, HeartbeatWorkerArgs{Namespace: "ns", InstanceID: "i"}); err != nil {
				t.Fatalf("the Store behind finds the worker not alive: %v", err)
			}
			// With their own clocks instead, the same Stores disagree.
			skewed, err := Open(ctx, loc, WithClock(func() time.Time { return time.Now().Add(-4 * time.Minute) }))
			must(t, err)
			defer skewed.Close()
			w, err := skewed.GetWorker(ctx, "ns", "i")
			must(t, err)
			if w.ExpiresAt().Sub(skewed.now(time.Time{})) < 3*time.Minute {
				t.Fatal("WithClock did not override the server's clock")
			}
		})
	}
}

// A Store whose writes may not wait to be admitted (WithWriteQueue(1, 0))
// on a healthy database writes when it can and answers ErrOverloaded when
// it cannot: never ErrUnavailable, which says the database could not be
// reached.
func TestNoAdmissionWaitIsOverloadNeverUnavailable(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t, WithWriteQueue(1, 0))
		if _, err := s.CreateExecution(ctx, CreateExecutionArgs{Namespace: "ns", Lane: "l"}); err != nil {
			t.Fatalf("a write alone: %v", err)
		}
		const writers, each = 16, 20
		var mu sync.Mutex
		written, overloaded := 0, 0
		var others []error
		var wg sync.WaitGroup
		for range writers {
			wg.Go(func() {
				for range each {
					_, err := s.CreateExecution(ctx, CreateExecutionArgs{Namespace: "ns", Lane: "l"})
					mu.Lock()
					switch {
					case err == nil:
						written++
					case errors.Is(err, ErrOverloaded):
						overloaded++
					default:
						others = append(others, err)
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(others) > 0 || written == 0 {
			t.Fatalf("%d concurrent writes: %d written, %d ErrOverloaded, %d other errors, e.g. %v",
				writers*each, written, overloaded, len(others), others)
		}
		t.Logf("%d written, %d ErrOverloaded", written, overloaded)
	})
}
