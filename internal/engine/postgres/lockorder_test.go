package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	pgdb "github.com/rosterdb/roster/db/postgres"
	"github.com/rosterdb/roster/internal/engine"
	"github.com/rosterdb/roster/internal/pgtest"
)

// freshDatabase creates a database of the test's own (its statistics, such
// as pg_stat_database.deadlocks, are the test's alone) and returns its URL
// with search_path public; the database is dropped when t ends.
func freshDatabase(t *testing.T, settings ...string) (string, string) {
	t.Helper()
	base := pgtest.URL(t)
	if base == "" {
		t.Skip(pgtest.SkipMessage)
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, base)
	must(t, err)
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "roster_test_db_" + hex.EncodeToString(b[:])
	_, err = admin.Exec(ctx, "CREATE DATABASE "+name)
	must(t, err)
	t.Cleanup(func() {
		if _, err := admin.Exec(context.Background(), "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	for _, s := range settings {
		_, err = admin.Exec(ctx, "ALTER DATABASE "+name+" SET "+s)
		must(t, err)
	}
	u, err := url.Parse(base)
	must(t, err)
	u.Path = "/" + name
	q := u.Query()
	q.Set("search_path", "public")
	u.RawQuery = q.Encode()
	return u.String(), name
}

// deadlocksOf reads pg_stat_database.deadlocks of a database nobody is
// connected to any longer (each backend flushes its statistics as it exits).
func deadlocksOf(t *testing.T, name string) int64 {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, pgtest.URL(t))
	must(t, err)
	defer admin.Close(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		must(t, admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = $1", name).Scan(&n))
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d backends still connected to %s", n, name)
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, err = admin.Exec(ctx, "SELECT pg_stat_clear_snapshot()")
	must(t, err)
	var deadlocks int64
	must(t, admin.QueryRow(ctx, "SELECT coalesce((SELECT deadlocks FROM pg_stat_database WHERE datname = $1), 0)", name).Scan(&deadlocks))
	return deadlocks
}

// retryLog counts the writes the engine ran again after a deadlock.
type retryLog struct {
	mu        sync.Mutex
	deadlocks int
}

func (r *retryLog) Enabled(context.Context, slog.Level) bool { return true }
func (r *retryLog) Handle(_ context.Context, rec slog.Record) error {
	rec.Attrs(func(a slog.Attr) bool {
		if strings.Contains(a.Value.String(), codeDeadlockDetected) {
			r.mu.Lock()
			r.deadlocks++
			r.mu.Unlock()
		}
		return true
	})
	return nil
}
func (r *retryLog) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *retryLog) WithGroup(string) slog.Handler      { return r }

// Locks are taken in one order (README "Locks in one order"): rounds of concurrent outcomes
// (settled in batches, with a claim or without, as RunWorker settles), cancels of
// the same executions, the death of some of their workers, a sweep of the
// others and a reclaim of every expired lease, 300 executions in all,
// never deadlock: the database counts none, the engine retried none, and
// no call waited anywhere near deadlock_timeout.
func TestConcurrentOutcomesNeverDeadlock(t *testing.T) {
	loc, name := freshDatabase(t, "deadlock_timeout = '5s'")
	log := &retryLog{}
	// The admission time is generous: 300 calls open up to 64 connections at
	// once on a machine that may be busy, and a call that waits for a
	// connection proves nothing about the lock order.
	e := openAt(t, loc+"&pool_max_conns=64", func(c *engine.Config) { c.Logger, c.Admission = slog.New(log), 20*time.Second })
	ctx := context.Background()
	const rounds, perRound, workers = 6, 50, 5
	var mu sync.Mutex
	var slowest time.Duration
	var slowestCall string
	timed := func(what string, f func() error) {
		began := time.Now()
		err := f()
		d := time.Since(began)
		mu.Lock()
		defer mu.Unlock()
		if d > slowest {
			slowest, slowestCall = d, what
		}
		if err != nil && !errors.Is(err, engine.ErrNoRows) {
			t.Errorf("%s: %v", what, err)
		}
	}
	for round := range rounds {
		ns := fmt.Sprintf("ns%d", round)
		keys := make([]engine.WorkerKey, workers)
		must(t, e.Write(ctx, func(ctx context.Context, q engine.Queries) error {
			for i := range keys {
				keys[i] = engine.WorkerKey{Namespace: ns, InstanceID: fmt.Sprintf("w%d", i)}
				if err := q.WorkerRegister(ctx, engine.Worker{Namespace: ns, InstanceID: keys[i].InstanceID, WorkerID: "w",
					Lanes: []string{"l"}, LastHeartbeatMs: 1000, TTLMs: 100000}); err != nil {
					return err
				}
			}
			// perRound to claim now, as many again for the claims of the
			// settles below.
			for range 2 * perRound {
				id, _ := uuid.NewV7()
				if err := q.ExecutionInsert(ctx, engine.Execution{ID: id, Namespace: ns, Lane: "l", MaxAttempts: 3, CreatedAtMs: 1, RunAtMs: 1}); err != nil {
					return err
				}
			}
			return nil
		}))
		held := make([][]engine.ClaimedLease, workers)
		for i, k := range keys {
			p := engine.ClaimParams{Namespace: ns, InstanceID: k.InstanceID, NowMs: 2000, ExpiresAtMs: 50000}
			for range perRound / workers {
				p.LeaseIDs = append(p.LeaseIDs, uuid.New())
			}
			res, err := e.ExecutionClaim(ctx, p)
			must(t, err)
			held[i] = res.Leases
		}

		var wg sync.WaitGroup
		start := make(chan struct{})
		goRun := func(what string, f func() error) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				timed(what, f)
			}()
		}
		for i, k := range keys {
			// The worker settles its leases, in an order of its own, and
			// claims as many again.
			outcomes := make([]engine.Outcome, len(held[i]))
			for j, l := range held[i] {
				outcomes[j] = engine.Outcome{Lease: engine.LeaseRef{ExecutionID: l.ExecutionID, LeaseID: l.LeaseID, Epoch: l.Epoch}, Fail: j%3 == 0, Reason: "no"}
			}
			mrand.Shuffle(len(outcomes), func(a, b int) { outcomes[a], outcomes[b] = outcomes[b], outcomes[a] })
			claim := &engine.ClaimParams{Namespace: ns, InstanceID: k.InstanceID, NowMs: 3000, ExpiresAtMs: 50000}
			for range len(outcomes) {
				claim.LeaseIDs = append(claim.LeaseIDs, uuid.New())
			}
			if i == workers-1 {
				claim = nil // a last settle, at shutdown: its workers are looked up
			}
			goRun("settle", func() error {
				res := e.Settle(ctx, 3000, outcomes, claim)
				for _, err := range append(res.Errs, res.ClaimErr) {
					if err != nil && !errors.Is(err, engine.ErrNoRows) {
						return err
					}
				}
				return nil
			})
			// Someone cancels each of its executions meanwhile.
			for _, l := range held[i] {
				goRun("cancel", func() error {
					return e.WriteOne(ctx, func(ctx context.Context, q engine.Queries) error {
						_, err := q.ExecutionCancel(ctx, l.ExecutionID, "stop", 3000)
						return err
					})
				})
			}
			// Two of the workers are marked dead, as MarkWorkerDead does.
			if i < 2 {
				goRun("mark dead", func() error {
					return e.Write(ctx, func(ctx context.Context, q engine.Queries) error {
						if _, err := q.WorkerDelete(ctx, k); err != nil {
							return err
						}
						if err := q.WorkerEventAppend(ctx, engine.WorkerEvent{Namespace: k.Namespace, InstanceID: k.InstanceID, Kind: "marked_dead", AtMs: 3000}); err != nil {
							return err
						}
						return q.LeaseRevokeHeldBy(ctx, []engine.WorkerKey{k}, 3000)
					})
				})
			}
		}
		// A sweeper that finds every worker lapsed, as SweepExpiredWorkers
		// does, and a reclaimer that finds every lease expired.
		goRun("sweep", func() error {
			return e.Write(ctx, func(ctx context.Context, q engine.Queries) error {
				swept, err := q.WorkerSweepBatch(ctx, 200000, 256)
				if err != nil || len(swept) == 0 {
					return err
				}
				if err := q.WorkerEventAppendSwept(ctx, swept, 200000); err != nil {
					return err
				}
				return q.LeaseRevokeHeldBy(ctx, swept, 200000)
			})
		})
		goRun("reclaim", func() error {
			return e.WriteOne(ctx, func(ctx context.Context, q engine.Queries) error {
				_, err := q.LeaseReclaimBatch(ctx, 200000, 256)
				return err
			})
		})
		close(start)
		wg.Wait()
	}
	must(t, e.Close())
	if n := deadlocksOf(t, name); n != 0 {
		t.Errorf("PostgreSQL detected %d deadlocks", n)
	}
	if log.deadlocks != 0 {
		t.Errorf("the engine ran %d writes again after a deadlock", log.deadlocks)
	}
	if slowest > 4*time.Second {
		t.Errorf("a call (%s) took %v: it waited on a lock as long as a deadlock is waited on", slowestCall, slowest)
	}
	t.Logf("slowest call: %s, %v", slowestCall, slowest)
}

// Opposite agent transitions at once (running -> suspended beside
// suspended -> running) never deadlock: the count trigger locks the two
// counts rows in one order.
func TestOppositeAgentTransitionsNeverDeadlock(t *testing.T) {
	u, name := freshDatabase(t)
	e := openAt(t, u)
	ctx := context.Background()
	_, err := e.pool.Exec(ctx, `
		INSERT INTO agents (id, state, provider, owner_actor, owner_peer_class, owner_write_namespace, spawn_fingerprint, spawned_at_ms, state_changed_at_ms)
		SELECT 'a' || i, CASE WHEN i % 2 = 0 THEN 'running' ELSE 'suspended' END, 'p', 'o', 'c', 'ns', 'f', 1, 1
		FROM generate_series(1, 16) AS i`)
	must(t, err)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			conn, err := pgx.Connect(ctx, u)
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close(ctx)
			// Each goroutine flips its own two agents, one of each state,
			// so that the flips of different goroutines go both ways.
			ids := []string{fmt.Sprintf("a%d", 2*g+1), fmt.Sprintf("a%d", 2*g+2)}
			for i := range 150 {
				for _, id := range ids {
					if _, err := conn.Exec(ctx, `UPDATE agents SET state = CASE state WHEN 'running' THEN 'suspended' ELSE 'running' END,
						state_changed_at_ms = $2 WHERE id = $1`, id, i); err != nil {
						t.Errorf("flip %s: %v", id, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	var running, suspended int64
	must(t, e.pool.QueryRow(ctx, `SELECT (SELECT n FROM agent_state_counts WHERE state = 'running'),
		(SELECT n FROM agent_state_counts WHERE state = 'suspended')`).Scan(&running, &suspended))
	if running != 8 || suspended != 8 {
		t.Fatalf("counts running %d, suspended %d; want 8 and 8", running, suspended)
	}
	e.Close()
	if n := deadlocksOf(t, name); n != 0 {
		t.Fatalf("%d deadlocks", n)
	}
}

// TestWorkerLocksAreTheSchemas: advisory locks belong to the database, so a
// worker lock of one roster schema must not be the lock of the worker of the
// same key in another schema of that database. Before the schema was part of
// the key, a settle of "ns/w" in one schema made the sweep of another skip
// its own lapsed "ns/w".
func TestWorkerLocksAreTheSchemas(t *testing.T) {
	ctx := context.Background()
	a := openAt(t, pgtest.Fresh(t))
	b := openAt(t, pgtest.Fresh(t))
	lapsed := engine.Worker{Namespace: "ns", InstanceID: "w", WorkerID: "w", Lanes: []string{"l"}, LastHeartbeatMs: 1000, TTLMs: 1000}
	for _, e := range []*Engine{a, b} {
		must(t, e.Write(ctx, func(ctx context.Context, q engine.Queries) error { return q.WorkerRegister(ctx, lapsed) }))
	}

	// A settle of a's ns/w holds its worker lock, shared, until it commits.
	tx, err := a.Pool().Begin(ctx)
	must(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	must(t, pgdb.New(tx).WorkerLockShared(ctx, pgdb.WorkerLockSharedParams{Namespace: "ns", InstanceID: "w"}))

	var swept []engine.WorkerKey
	must(t, b.Write(ctx, func(ctx context.Context, q engine.Queries) error {
		var err error
		swept, err = q.WorkerSweepBatch(ctx, 5000, 10)
		return err
	}))
	if len(swept) != 1 {
		t.Fatalf("b's sweep took %v while a's worker of the same key was locked, want b's ns/w", swept)
	}
	// The lock is still a's own: a's sweep skips its worker while the settle runs.
	must(t, a.Write(ctx, func(ctx context.Context, q engine.Queries) error {
		var err error
		swept, err = q.WorkerSweepBatch(ctx, 5000, 10)
		return err
	}))
	if len(swept) != 0 {
		t.Fatalf("a's sweep took %v under a settle of its worker", swept)
	}
}
