package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rosterdb/roster/service"
)

// Benchmarks run on a file database in WAL mode (DurabilityFull unless named).

// t0 is the fixed time of every benchmark.
var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// benchDB is a Store on a new file, and a plain connection to the same file
// for bulk loads and for the bare-driver baseline.
type benchDB struct {
	*service.Store
	writer *sql.DB
}

func benchStore(b *testing.B, ds ...service.Durability) benchDB {
	b.Helper()
	d := service.DurabilityFull
	if len(ds) > 0 {
		d = ds[0]
	}
	path := filepath.Join(b.TempDir(), "bench.db")
	s, err := service.Open(context.Background(), path, service.WithDurability(d))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	dsn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=synchronous(" + d.String() + ")&_pragma=foreign_keys(1)&_txlock=immediate"
	w, err := sql.Open("sqlite", dsn)
	if err != nil {
		b.Fatal(err)
	}
	w.SetMaxOpenConns(1)
	b.Cleanup(func() { _ = w.Close() })
	return benchDB{Store: s, writer: w}
}

func register(b *testing.B, s benchDB, ns, inst, worker string, ttl time.Duration, now time.Time) {
	b.Helper()
	if _, err := s.RegisterWorker(context.Background(), service.RegisterWorkerArgs{
		Namespace: ns, WorkerID: worker, InstanceID: inst, TTL: ttl, Now: now,
	}); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkRegisterWorker(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		i++
		if _, err := s.RegisterWorker(ctx, service.RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: fmt.Sprint(i),
			Lanes: []string{"a", "b"}, Capabilities: []string{"gpu"}, TTL: time.Hour, Now: t0}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHeartbeat compares the service's HeartbeatWorker with the same two
// statements run bare on the driver, one transaction each: the service's
// overhead (validation, queue, savepoint, mapping). With synchronous=FULL the
// fsync dominates both; NORMAL shows the CPU overhead.
func BenchmarkHeartbeat(b *testing.B) {
	ctx := context.Background()
	for _, d := range []service.Durability{service.DurabilityFull, service.DurabilityNormal} {
		b.Run("service/"+d.String(), func(b *testing.B) {
			s := benchStore(b, d)
			register(b, s, "ns", "i", "w", time.Hour, t0)
			for b.Loop() {
				if _, err := s.HeartbeatWorker(ctx, service.HeartbeatWorkerArgs{Namespace: "ns", InstanceID: "i", Now: t0.Add(time.Second)}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("bare-driver/"+d.String(), func(b *testing.B) {
			s := benchStore(b, d)
			register(b, s, "ns", "i", "w", time.Hour, t0)
			now := t0.Add(time.Second).UnixMilli()
			for b.Loop() {
				if err := bareHeartbeat(ctx, s.writer, now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func bareHeartbeat(ctx context.Context, conn *sql.DB, now int64) error {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var ttl int64
	if err := tx.QueryRowContext(ctx, `UPDATE workers SET last_heartbeat_ms = ?1
		WHERE namespace = ?2 AND instance_id = ?3 AND last_heartbeat_ms + ttl_ms > ?1 RETURNING ttl_ms`,
		now, "ns", "i").Scan(&ttl); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO worker_events (namespace, instance_id, kind, at_ms, reason)
		VALUES (?, ?, 'heartbeat', ?, '')`, "ns", "i", now); err != nil {
		return err
	}
	return tx.Commit()
}

// BenchmarkConcurrentHeartbeats compares group commit (the Store: concurrent
// writes share a transaction, each in a savepoint) with one BEGIN IMMEDIATE
// transaction per operation on the same single writer connection, under 16
// concurrent writers with synchronous=FULL.
func BenchmarkConcurrentHeartbeats(b *testing.B) {
	ctx := context.Background()
	const workers = 16
	b.Run("group-commit", func(b *testing.B) {
		s := benchStore(b)
		for i := range workers {
			register(b, s, "ns", fmt.Sprint(i), "w", time.Hour, t0)
		}
		var next atomic.Int64
		b.SetParallelism(workers / 2) // GOMAXPROCS is 2 here
		b.RunParallel(func(pb *testing.PB) {
			inst := fmt.Sprint(next.Add(1) % workers)
			for pb.Next() {
				if _, err := s.HeartbeatWorker(ctx, service.HeartbeatWorkerArgs{Namespace: "ns", InstanceID: inst, Now: t0.Add(time.Second)}); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("tx-per-op", func(b *testing.B) {
		s := benchStore(b)
		register(b, s, "ns", "i", "w", time.Hour, t0)
		now := t0.Add(time.Second).UnixMilli()
		b.SetParallelism(workers / 2)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := bareHeartbeat(ctx, s.writer, now); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

// BenchmarkListWorkersPage reads one 100-row page from the middle of the
// table: its cost must not grow with the table.
func BenchmarkListWorkersPage(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			s := benchStore(b, service.DurabilityNormal)
			bulkWorkers(b, s, n, time.Hour)
			// A cursor into the middle of the table (at most 10,000 rows in).
			first, err := s.ListWorkers(ctx, service.ListWorkersArgs{Namespace: "ns", Limit: n / 2})
			if err != nil {
				b.Fatal(err)
			}
			after := first.Next
			for b.Loop() {
				page, err := s.ListWorkers(ctx, service.ListWorkersArgs{Namespace: "ns", After: after, Limit: 100})
				if err != nil || len(page.Workers) != 100 {
					b.Fatal(err, len(page.Workers))
				}
			}
		})
	}
}

// BenchmarkSweep sweeps 1,000 lapsed workers among n alive ones; the
// per-sweep cost must depend on what is swept, not on the table.
func BenchmarkSweep(b *testing.B) {
	ctx := context.Background()
	for _, alive := range []int{0, 100_000} {
		b.Run(fmt.Sprintf("alive=%d", alive), func(b *testing.B) {
			s := benchStore(b, service.DurabilityNormal)
			bulkWorkers(b, s, alive, 24*time.Hour)
			for b.Loop() {
				b.StopTimer()
				_, err := s.writer.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000)
					INSERT INTO workers SELECT 'lapsed', 'l' || i, 'w', '[]', '[]', ?, 1000, ? FROM n`, t0.UnixMilli(), t0.UnixMilli())
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				n, err := s.SweepExpiredWorkers(ctx, t0.Add(time.Hour))
				if err != nil || n != 1000 {
					b.Fatal(err, n)
				}
			}
		})
	}
}

// bulkWorkers inserts n workers in namespace "ns" with raw SQL (setup only).
func bulkWorkers(b *testing.B, s benchDB, n int, ttl time.Duration) {
	b.Helper()
	if n == 0 {
		return
	}
	_, err := s.writer.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
		INSERT INTO workers SELECT 'ns', printf('i%09d', i), 'w', '["a"]', '[]', ?, ?, ? FROM n`,
		n, t0.UnixMilli(), ttl.Milliseconds(), t0.UnixMilli())
	if err != nil {
		b.Fatal(err)
	}
}

func BenchmarkAgents(b *testing.B) {
	ctx := context.Background()
	b.Run("insert", func(b *testing.B) {
		s := benchStore(b)
		i := 0
		for b.Loop() {
			i++
			a := agent(fmt.Sprint(i))
			a.ProviderSessionID = fmt.Sprint("s", i)
			if err := s.InsertAgent(ctx, a); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("get", func(b *testing.B) {
		s := benchStore(b)
		must(b, s.InsertAgent(ctx, agent("a")))
		for b.Loop() {
			if _, err := s.GetAgent(ctx, "a"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("update-state", func(b *testing.B) {
		s := benchStore(b)
		a := agent("a")
		a.State = service.AgentRunning
		must(b, s.InsertAgent(ctx, a))
		for b.Loop() {
			if err := s.UpdateAgentState(ctx, service.UpdateAgentStateArgs{ID: "a", State: service.AgentRunning, ExpectState: service.AgentRunning}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkClaimComplete measures claim + complete round trips with 1 and 8
// concurrent workers draining one queue.
func BenchmarkClaimComplete(b *testing.B) {
	ctx := context.Background()
	for _, workers := range []int{1, 8} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			s := benchStore(b)
			for w := range workers {
				worker(b, s, "ns", fmt.Sprint("w", w), []string{"default", "other"}, []string{"gpu"})
			}
			_, err := s.writer.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
				INSERT INTO executions (id, namespace, lane, priority, payload, max_attempts, created_at_ms, run_at_ms)
				SELECT printf('00000000-0000-7000-8000-%012d', i), 'ns', 'default', i % 3, x'00', 1, ?2, ?2 FROM n`,
				b.N+workers, t0.UnixMilli())
			must(b, err)
			var next atomic.Int64
			b.SetParallelism(max(1, workers/2))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				inst := fmt.Sprint("w", next.Add(1)%int64(workers))
				for pb.Next() {
					l, err := s.ClaimExecution(ctx, service.ClaimArgs{Namespace: "ns", InstanceID: inst, LeaseTTL: time.Minute, Now: t0})
					if err != nil {
						b.Fatal(err)
					}
					if err := s.CompleteExecution(ctx, service.CompleteArgs{Lease: l, Now: t0}); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// BenchmarkExpiredLeasePage reads one 100-lease page of expired leases from a
// table of n executions (1% running and expired, the rest completed): the
// page cost must not grow with the table.
func BenchmarkExpiredLeasePage(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{10_000, 1_000_000} {
		b.Run(fmt.Sprintf("executions=%d", n), func(b *testing.B) {
			s := benchStore(b, service.DurabilityNormal)
			bulkLeases(b, s, n)
			for b.Loop() {
				page, err := s.ListExpiredLeases(ctx, service.ListExpiredLeasesArgs{AsOf: t0.Add(time.Hour), Limit: 100})
				if err != nil || len(page.Leases) != 100 {
					b.Fatal(err, len(page.Leases))
				}
			}
		})
	}
}

// bulkLeases inserts n executions, each claimed once: 1% still running
// (their leases expire within a second of t0), the rest completed (raw SQL,
// setup only).
func bulkLeases(b *testing.B, s benchDB, n int) {
	b.Helper()
	now := t0.UnixMilli()
	_, err := s.writer.ExecContext(context.Background(), `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
		INSERT INTO executions (id, namespace, lane, state, priority, payload, attempts, max_attempts, epoch, created_at_ms, run_at_ms,
			lease_id, holder, claimed_at_ms, expires_at_ms, finished_at_ms)
		SELECT printf('00000000-0000-7000-8000-%012d', i), 'ns', 'l',
		       CASE WHEN i % 100 = 0 THEN 'running' ELSE 'completed' END, 0, x'', 1, 1, 1, ?2, ?2,
		       printf('00000000-0000-7000-9000-%012d', i), 'i', ?2, ?2 + (i % 1000),
		       CASE WHEN i % 100 = 0 THEN NULL ELSE ?2 END
		FROM n`, n, now)
	must(b, err)
}

// BenchmarkStats reads Stats beside 10k vs 1M finished executions (and the
// same live rows: 50 workers, 1,000 waiting and 100 running executions in 10
// lanes): its cost must not grow with finished history.
func BenchmarkStats(b *testing.B) {
	ctx := context.Background()
	for _, finished := range []int{10_000, 1_000_000} {
		b.Run(fmt.Sprintf("finished=%d", finished), func(b *testing.B) {
			s := benchStore(b, service.DurabilityNormal)
			bulkWorkers(b, s, 50, time.Hour)
			_, err := s.writer.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
				INSERT INTO executions (id, namespace, lane, state, priority, payload, attempts, max_attempts, epoch, created_at_ms, run_at_ms,
					lease_id, holder, claimed_at_ms, expires_at_ms, finished_at_ms)
				SELECT printf('00000000-0000-7000-8000-%012d', i), 'ns', 'lane' || (i % 10),
				       CASE WHEN i <= 1000 THEN 'waiting' WHEN i <= 1100 THEN 'running' ELSE 'completed' END,
				       0, x'', CASE WHEN i <= 1000 THEN 0 ELSE 1 END, 1, CASE WHEN i <= 1000 THEN 0 ELSE 1 END, ?2, ?2,
				       CASE WHEN i > 1000 THEN printf('00000000-0000-7000-9000-%012d', i) END, CASE WHEN i > 1000 THEN 'i' END,
				       CASE WHEN i > 1000 THEN ?2 END, CASE WHEN i > 1000 THEN ?2 + 60000 END, CASE WHEN i > 1100 THEN ?2 END
				FROM n`,
				finished+1100, t0.UnixMilli())
			must(b, err)
			_, err = s.writer.ExecContext(ctx, "ANALYZE")
			must(b, err)
			for b.Loop() {
				st, err := s.Stats(ctx, t0)
				if err != nil || len(st.Namespaces) != 1 || len(st.Namespaces[0].Lanes) != 10 {
					b.Fatal(err, st)
				}
			}
		})
	}
}
