package postgres_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rosterdb/roster/internal/pgtest"
	"github.com/rosterdb/roster/service"
)

// Benchmarks on the PostgreSQL server of ROSTER_TEST_POSTGRES, each on a
// schema of its own, with a pool as large as the benchmark's concurrency.

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func benchStore(b *testing.B, conns int) (*service.Store, *pgxpool.Pool) {
	b.Helper()
	u := pgtest.Fresh(b) + fmt.Sprintf("&pool_max_conns=%d", conns)
	s, err := service.Open(context.Background(), u)
	must(b, err)
	b.Cleanup(func() { _ = s.Close() })
	raw, err := pgxpool.New(context.Background(), u)
	must(b, err)
	b.Cleanup(raw.Close)
	return s, raw
}

// BenchmarkHeartbeat: one caller, then 64 concurrent callers (each its own
// worker). The ratio of their ops/s is what a fleet gains from the pool.
func BenchmarkHeartbeat(b *testing.B) {
	ctx := context.Background()
	for _, callers := range []int{1, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			s, _ := benchStore(b, callers)
			for i := range callers {
				_, err := s.RegisterWorker(ctx, service.RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: fmt.Sprint(i), TTL: time.Hour, Now: t0})
				must(b, err)
			}
			var next atomic.Int64
			b.SetParallelism(max(1, callers/2)) // GOMAXPROCS is 2 here
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				inst := fmt.Sprint((next.Add(1) - 1) % int64(callers))
				for pb.Next() {
					if _, err := s.HeartbeatWorker(ctx, service.HeartbeatWorkerArgs{Namespace: "ns", InstanceID: inst, Now: t0.Add(time.Second)}); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
		})
	}
}

// BenchmarkClaimComplete: claim and complete no-op executions with 1, 8 and
// 64 concurrent workers, every lease fenced.
func BenchmarkClaimComplete(b *testing.B) {
	ctx := context.Background()
	for _, workers := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			s, raw := benchStore(b, workers)
			for w := range workers {
				_, err := s.RegisterWorker(ctx, service.RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: fmt.Sprint("w", w),
					Lanes: []string{"default"}, TTL: time.Hour, Now: t0})
				must(b, err)
			}
			_, err := raw.Exec(ctx, `INSERT INTO executions (id, namespace, lane, priority, payload, max_attempts, created_at_ms, run_at_ms)
				SELECT gen_random_uuid(), 'ns', 'default', i % 3, '\x00', 1, $2, $2 FROM generate_series(1, $1::int) AS i`,
				b.N+workers, t0.UnixMilli())
			must(b, err)
			_, err = raw.Exec(ctx, "ANALYZE executions")
			must(b, err)
			var next atomic.Int64
			b.SetParallelism(max(1, workers/2))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				inst := fmt.Sprint("w", (next.Add(1)-1)%int64(workers))
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
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}
