// Package queuebench measures the queue's hot paths on every engine, as the
// tables grow in the ways that must not slow them:
//
//   - a claim beside 100,000 executions scheduled for later, at the same or
//     a higher priority than the ready ones (BenchmarkClaimBesideScheduled);
//   - a claim by a worker of 1, 100 or 10,000 lanes with work in a few of
//     them (BenchmarkClaimManyLanes);
//   - claim + complete beside 0 or 1,000,000 finished executions
//     (BenchmarkClaimCompleteBesideHistory);
//   - a batch of PruneExecutions beside 0 or 1,000,000 live executions
//     (BenchmarkPruneBesideLive);
//   - on PostgreSQL, a worker's throughput and the dead rows while another
//     session holds a snapshot open for a minute (BenchmarkLongSnapshot).
//
// SQLite runs on a file in WAL mode; PostgreSQL on the server of
// ROSTER_TEST_POSTGRES, each benchmark in a schema of its own.
//
//	ROSTER_TEST_POSTGRES=postgres://... go test -run '^$' -bench . ./internal/queuebench
package queuebench

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rosterdb/roster/internal/pgtest"
	"github.com/rosterdb/roster/service"
	_ "modernc.org/sqlite"
)

// t0 is the benchmarks' clock: every call passes it (or a time after it).
var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// db is a Store and a plain connection to the same database for bulk loads.
type db struct {
	*service.Store
	postgres bool
	exec     func(b *testing.B, query string, args ...any)
}

// engine is a database a benchmark runs on.
type engine struct {
	name string
	open func(b *testing.B) db
}

var engines = []engine{
	{"sqlite", func(b *testing.B) db {
		path := filepath.Join(b.TempDir(), "bench.db")
		s, err := service.Open(context.Background(), path)
		must(b, err)
		b.Cleanup(func() { _ = s.Close() })
		raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)")
		must(b, err)
		raw.SetMaxOpenConns(1)
		b.Cleanup(func() { _ = raw.Close() })
		return db{Store: s, exec: func(b *testing.B, query string, args ...any) {
			b.Helper()
			_, err := raw.Exec(query, args...)
			must(b, err)
		}}
	}},
	{"postgres", func(b *testing.B) db {
		u := pgtest.Fresh(b) + "&pool_max_conns=16"
		s, err := service.Open(context.Background(), u)
		must(b, err)
		b.Cleanup(func() { _ = s.Close() })
		raw, err := pgxpool.New(context.Background(), u)
		must(b, err)
		b.Cleanup(raw.Close)
		return db{Store: s, postgres: true, exec: func(b *testing.B, query string, args ...any) {
			b.Helper()
			_, err := raw.Exec(context.Background(), query, args...)
			must(b, err)
		}}
	}},
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}

// create adds n waiting executions through CreateExecutions, in batches.
func create(b *testing.B, s db, n int, a service.CreateExecutionArgs) {
	b.Helper()
	for n > 0 {
		batch := make([]service.CreateExecutionArgs, min(n, 10_000))
		for i := range batch {
			batch[i] = a
		}
		_, err := s.CreateExecutions(context.Background(), batch)
		must(b, err)
		n -= len(batch)
	}
}

// worker registers an instance of the given lanes, alive for a day.
func worker(b *testing.B, s db, inst string, lanes []string) {
	b.Helper()
	_, err := s.RegisterWorker(context.Background(), service.RegisterWorkerArgs{
		Namespace: "ns", WorkerID: "w", InstanceID: inst, Lanes: lanes, TTL: 24 * time.Hour, Now: t0,
	})
	must(b, err)
}

// analyze refreshes the planner's statistics, as autovacuum (PostgreSQL) or
// PRAGMA optimize would have by then.
func analyze(b *testing.B, s db) {
	b.Helper()
	if s.postgres {
		s.exec(b, "VACUUM ANALYZE")
	}
}

// claimOnly times ClaimExecution alone: the lease is completed with the
// timer stopped.
func claimOnly(b *testing.B, s db, inst string) {
	b.Helper()
	ctx := context.Background()
	for range b.N {
		l, err := s.ClaimExecution(ctx, service.ClaimArgs{Namespace: "ns", InstanceID: inst, LeaseTTL: time.Hour, Now: t0})
		must(b, err)
		b.StopTimer()
		must(b, s.CompleteExecution(ctx, service.CompleteArgs{Lease: l, Now: t0}))
		b.StartTimer()
	}
}

// BenchmarkClaimBesideScheduled claims from 1,000 ready executions beside
// none or 100,000 scheduled for tomorrow in the same lane, at the ready
// ones' priority or above it. Goal: within 1.2× of the claim with none.
func BenchmarkClaimBesideScheduled(b *testing.B) {
	for _, e := range engines {
		for _, tc := range []struct{ scheduled, priority int }{{0, 0}, {100_000, 0}, {100_000, 5}} {
			b.Run(fmt.Sprintf("%s/scheduled=%d,priority=%d", e.name, tc.scheduled, tc.priority), func(b *testing.B) {
				s := e.open(b)
				worker(b, s, "w", []string{"default"})
				create(b, s, tc.scheduled, service.CreateExecutionArgs{Namespace: "ns", Lane: "default",
					Priority: tc.priority, RunAt: t0.Add(24 * time.Hour), Now: t0})
				create(b, s, 1000+b.N, service.CreateExecutionArgs{Namespace: "ns", Lane: "default", Now: t0.Add(-time.Second)})
				analyze(b, s)
				b.ResetTimer()
				claimOnly(b, s, "w")
			})
		}
	}
}

// BenchmarkClaimManyLanes claims for a worker of 1, 100 or 10,000 lanes,
// with 1,000 ready executions in each of three of them (the first, the
// middle and the last). Goal: 10,000 lanes within 5× of one.
func BenchmarkClaimManyLanes(b *testing.B) {
	for _, e := range engines {
		for _, n := range []int{1, 100, 10_000} {
			b.Run(fmt.Sprintf("%s/lanes=%d", e.name, n), func(b *testing.B) {
				s := e.open(b)
				lanes := make([]string, n)
				for i := range lanes {
					lanes[i] = fmt.Sprintf("lane%05d", i)
				}
				worker(b, s, "w", lanes)
				busy := []string{lanes[0], lanes[n/2], lanes[n-1]}
				for _, lane := range busy {
					create(b, s, 1000+b.N/len(busy)+1, service.CreateExecutionArgs{Namespace: "ns", Lane: lane, Now: t0.Add(-time.Second)})
				}
				analyze(b, s)
				b.ResetTimer()
				claimOnly(b, s, "w")
			})
		}
	}
}

// finished inserts n completed executions, each with its attempt, the i-th
// (from 0) finished at finishedAt + i/1000 ms (raw SQL: setup only).
func finished(b *testing.B, s db, n int, finishedAt time.Time) {
	b.Helper()
	if n == 0 {
		return
	}
	at := finishedAt.UnixMilli()
	if s.postgres {
		s.exec(b, `INSERT INTO executions (id, namespace, lane, state, priority, payload, max_attempts, created_at_ms, run_at_ms,
				attempts, epoch, lease_id, holder, claimed_at_ms, expires_at_ms, finished_at_ms, result)
			SELECT gen_random_uuid(), 'ns', 'default', 'completed', 0, '\x00', 1, $2::bigint, $2::bigint,
			       1, 1, gen_random_uuid(), 'old', $2::bigint, $2::bigint + 60000, $2::bigint + (i - 1) / 1000, '\x00'
			FROM generate_series(1, $1::int) AS i`, n, at)
		s.exec(b, `INSERT INTO attempts (execution_id, epoch, attempt_index, lease_id, namespace, instance_id, state,
				claimed_at_ms, expires_at_ms, ended_at_ms)
			SELECT id, 1, 1, lease_id, namespace, holder, 'completed', claimed_at_ms, expires_at_ms, finished_at_ms
			FROM executions WHERE state = 'completed' AND holder = 'old'`)
		return
	}
	s.exec(b, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
		INSERT INTO executions (id, namespace, lane, state, priority, max_attempts, created_at_ms, run_at_ms,
			attempts, epoch, lease_id, holder, claimed_at_ms, expires_at_ms, finished_at_ms, payload, result)
		SELECT printf('00000000-0000-7000-8000-%012d', i), 'ns', 'default', 'completed', 0, 1, ?2, ?2,
		       1, 1, printf('00000000-0000-7000-9000-%012d', i), 'old', ?2, ?2 + 60000, ?2 + (i - 1) / 1000, x'00', x'00'
		FROM n`, n, at)
	s.exec(b, `INSERT INTO attempts (execution_id, epoch, attempt_index, lease_id, namespace, instance_id, state,
			claimed_at_ms, expires_at_ms, ended_at_ms)
		SELECT id, 1, 1, lease_id, namespace, holder, 'completed', claimed_at_ms, expires_at_ms, finished_at_ms
		FROM executions WHERE holder = 'old'`)
}

// BenchmarkClaimCompleteBesideHistory claims and completes ready executions
// beside none or 1,000,000 finished ones (with their attempts). Goal: within
// 1.2× of none.
func BenchmarkClaimCompleteBesideHistory(b *testing.B) {
	ctx := context.Background()
	for _, e := range engines {
		for _, n := range []int{0, 1_000_000} {
			b.Run(fmt.Sprintf("%s/finished=%d", e.name, n), func(b *testing.B) {
				s := e.open(b)
				worker(b, s, "w", []string{"default"})
				finished(b, s, n, t0.Add(-time.Hour))
				create(b, s, b.N, service.CreateExecutionArgs{Namespace: "ns", Lane: "default", Now: t0.Add(-time.Second)})
				analyze(b, s)
				b.ResetTimer()
				for range b.N {
					l, err := s.ClaimExecution(ctx, service.ClaimArgs{Namespace: "ns", InstanceID: "w", LeaseTTL: time.Hour, Now: t0})
					must(b, err)
					must(b, s.CompleteExecution(ctx, service.CompleteArgs{Lease: l, Now: t0}))
				}
			})
		}
	}
}

// BenchmarkPruneBesideLive prunes 1,000 finished executions (with their
// attempts) per op beside none or 1,000,000 waiting ones. Goal: the prune
// cost does not grow with the live rows.
func BenchmarkPruneBesideLive(b *testing.B) {
	ctx := context.Background()
	for _, e := range engines {
		for _, live := range []int{0, 1_000_000} {
			b.Run(fmt.Sprintf("%s/live=%d", e.name, live), func(b *testing.B) {
				s := e.open(b)
				create(b, s, live, service.CreateExecutionArgs{Namespace: "ns", Lane: "default", Now: t0})
				base := t0.Add(-48 * time.Hour)
				finished(b, s, 1000*b.N, base)
				analyze(b, s)
				b.ResetTimer()
				for i := range b.N {
					// The i-th thousand finished at base + i ms.
					n, err := s.PruneExecutions(ctx, base.Add(time.Duration(i+1)*time.Millisecond))
					must(b, err)
					if n != 1000 {
						b.Fatalf("op %d pruned %d", i, n)
					}
				}
			})
		}
	}
}

// BenchmarkLongSnapshot (PostgreSQL) runs a worker (RunWorker, 8 handlers)
// against a producer that keeps 2,000 executions waiting, and measures the
// throughput and the dead row versions of executions in four phases: 20 s
// before, 60 s while another session holds a REPEATABLE READ snapshot open
// (a long analytics query: no row version it can see may be removed), and
// 90 s after. It reports jobs/s of each phase, the dead rows at the
// snapshot's end, and how long after it the throughput is back within 10%
// of before and the dead rows below a fifth of their peak (autovacuum).
// One run takes about three minutes.
func BenchmarkLongSnapshot(b *testing.B) {
	ctx := context.Background()
	u := pgtest.Fresh(b) + "&pool_max_conns=16"
	s, err := service.Open(ctx, u, service.WithLogger(discard))
	must(b, err)
	defer s.Close()
	raw, err := pgxpool.New(ctx, u)
	must(b, err)
	defer raw.Close()
	var done atomic.Int64
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = s.RunWorker(wctx, service.WorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "w", Lanes: []string{"default"},
			TTL: time.Minute, Concurrency: 8, Handler: func(context.Context, service.Lease) ([]byte, error) {
				done.Add(1)
				return nil, nil
			}})
	})
	var created atomic.Int64
	wg.Go(func() { // keeps about 2,000 waiting
		batch := make([]service.CreateExecutionArgs, 500)
		for i := range batch {
			batch[i] = service.CreateExecutionArgs{Namespace: "ns", Lane: "default"}
		}
		for wctx.Err() == nil {
			if created.Load()-done.Load() > 2000 {
				time.Sleep(2 * time.Millisecond)
				continue
			}
			if _, err := s.CreateExecutions(wctx, batch); err == nil {
				created.Add(int64(len(batch)))
			}
		}
	})
	dead := func() int64 {
		var n int64
		must(b, raw.QueryRow(ctx, `SELECT n_dead_tup FROM pg_stat_user_tables
			WHERE relid = 'executions'::regclass`).Scan(&n))
		return n
	}
	type sample struct {
		at   time.Duration
		jobs float64
		dead int64
	}
	began := time.Now()
	var samples []sample
	window := func(d time.Duration) sample {
		from := done.Load()
		time.Sleep(d)
		sm := sample{at: time.Since(began), jobs: float64(done.Load()-from) / d.Seconds(), dead: dead()}
		samples = append(samples, sm)
		b.Logf("%6.1fs %8.0f jobs/s %8d dead", sm.at.Seconds(), sm.jobs, sm.dead)
		return sm
	}
	mean := func(ss []sample) float64 {
		var sum float64
		for _, x := range ss {
			sum += x.jobs
		}
		return sum / float64(len(ss))
	}
	b.ResetTimer()
	time.Sleep(5 * time.Second) // warm up
	var before, during, after []sample
	for range 4 {
		before = append(before, window(5*time.Second))
	}
	tx, err := raw.Begin(ctx)
	must(b, err)
	_, err = tx.Exec(ctx, "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
	must(b, err)
	var n int64
	must(b, tx.QueryRow(ctx, "SELECT count(*) FROM executions").Scan(&n)) // the snapshot is taken
	for range 12 {
		during = append(during, window(5*time.Second))
	}
	peak := dead()
	must(b, tx.Rollback(ctx))
	ended := time.Since(began)
	base := mean(before)
	jobsBack, deadBack := -1.0, -1.0
	for range 18 {
		sm := window(5 * time.Second)
		after = append(after, sm)
		if jobsBack < 0 && sm.jobs >= 0.9*base {
			jobsBack = (sm.at - ended).Seconds()
		}
		if deadBack < 0 && sm.dead < peak/5 {
			deadBack = (sm.at - ended).Seconds()
		}
	}
	b.StopTimer()
	stop()
	wg.Wait()
	b.ReportMetric(base, "jobs/s-before")
	b.ReportMetric(mean(during), "jobs/s-during")
	b.ReportMetric(mean(during[len(during)-2:]), "jobs/s-last10s")
	b.ReportMetric(mean(after[len(after)-4:]), "jobs/s-after")
	b.ReportMetric(float64(peak), "dead-at-end")
	b.ReportMetric(jobsBack, "s-jobs-back")
	b.ReportMetric(deadBack, "s-dead-back")
}
