// Package river compares roster with River (github.com/riverqueue/river) on
// the same machine and the same database server, in one run: claim and
// complete no-op jobs with 1, 8 and 64 workers. It is a module of its own so
// that River never becomes a dependency of roster.
//
//	cd bench/river && ROSTER_TEST_POSTGRES=postgres://... go test -bench . -benchtime 3000x
package river

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/rosterdb/roster/internal/pgtest"
	"github.com/rosterdb/roster/service"
	_ "modernc.org/sqlite"
)

// noopArgs is River's no-op job.
type noopArgs struct{}

func (noopArgs) Kind() string { return "noop" }

// noopWorker counts completions and says when the last one is done.
type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	left *atomic.Int64
	done chan struct{}
}

func (w *noopWorker) Work(context.Context, *river.Job[noopArgs]) error {
	if w.left.Add(-1) == 0 {
		close(w.done)
	}
	return nil
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

func riverConfig(workers int, w *noopWorker) *river.Config {
	ws := river.NewWorkers()
	river.AddWorker(ws, w)
	return &river.Config{
		Logger:            discard,
		FetchCooldown:     time.Millisecond,
		FetchPollInterval: time.Millisecond,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
		Workers:           ws,
	}
}

func insertRiver[TTx any](b *testing.B, c *river.Client[TTx], n int) {
	b.Helper()
	ctx := context.Background()
	for done := 0; done < n; {
		batch := min(n-done, 5000)
		params := make([]river.InsertManyParams, batch)
		for i := range params {
			params[i] = river.InsertManyParams{Args: noopArgs{}}
		}
		if _, err := c.InsertManyFast(ctx, params); err != nil {
			b.Fatal(err)
		}
		done += batch
	}
}

// drainRiver starts the client, waits for every job to be worked, and stops
// the client, which flushes River's batched completions: the time covers
// every completion written.
func drainRiver[TTx any](b *testing.B, c *river.Client[TTx], w *noopWorker, cpu *serverCPU) {
	b.Helper()
	ctx := context.Background()
	b.ResetTimer()
	cpu.begin()
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	select {
	case <-w.done:
	case <-time.After(10 * time.Minute):
		b.Fatal("River did not finish")
	}
	if err := c.Stop(ctx); err != nil && !errors.Is(err, context.Canceled) {
		b.Fatal(err)
	}
	b.StopTimer()
	cpu.report(b)
}

// drainRosterRuntime runs roster's worker runtime (RunWorker) with the given
// concurrency until every execution's handler ran, then stops it, which
// drains: the time covers every completion written, every lease fenced.
func drainRosterRuntime(b *testing.B, s *service.Store, workers, n int, cpu *serverCPU) {
	b.Helper()
	for range n {
		if _, err := s.CreateExecution(context.Background(), service.CreateExecutionArgs{Namespace: "ns", Lane: "default"}); err != nil {
			b.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var left atomic.Int64
	left.Store(int64(n))
	done := make(chan error, 1)
	b.ResetTimer()
	cpu.begin()
	go func() {
		done <- s.RunWorker(ctx, service.WorkerArgs{
			Namespace: "ns", WorkerID: "w", InstanceID: "w", Lanes: []string{"default"},
			TTL: time.Minute, Concurrency: workers,
			Handler: func(context.Context, service.Lease) ([]byte, error) {
				if left.Add(-1) == 0 {
					cancel()
				}
				return nil, nil
			},
		})
	}()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	cpu.report(b)
	page, err := s.ListExecutions(context.Background(), service.ListExecutionsArgs{State: service.ExecutionCompleted, Limit: 10000})
	if err != nil {
		b.Fatal(err)
	}
	if len(page.Executions) != min(n, 10000) {
		b.Fatalf("%d completed, want %d", len(page.Executions), n)
	}
}

// drainRoster claims and completes every waiting execution with the given
// number of workers (goroutines, each a registered worker instance), every
// lease fenced.
func drainRoster(b *testing.B, s *service.Store, workers, n int, cpu *serverCPU) {
	b.Helper()
	ctx := context.Background()
	for i := range workers {
		if _, err := s.RegisterWorker(ctx, service.RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: fmt.Sprint("w", i),
			Lanes: []string{"default"}, TTL: time.Hour}); err != nil {
			b.Fatal(err)
		}
	}
	for range n {
		if _, err := s.CreateExecution(ctx, service.CreateExecutionArgs{Namespace: "ns", Lane: "default"}); err != nil {
			b.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	var done atomic.Int64
	b.ResetTimer()
	cpu.begin()
	for i := range workers {
		wg.Go(func() {
			inst := fmt.Sprint("w", i)
			for {
				l, err := s.ClaimExecution(ctx, service.ClaimArgs{Namespace: "ns", InstanceID: inst, LeaseTTL: time.Minute})
				if errors.Is(err, service.ErrNoWork) {
					return
				}
				if err != nil {
					b.Error(err)
					return
				}
				if err := s.CompleteExecution(ctx, service.CompleteArgs{Lease: l}); err != nil {
					b.Error(err)
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	cpu.report(b)
	if int(done.Load()) != n {
		b.Fatalf("completed %d of %d", done.Load(), n)
	}
}

func report(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// serverCPU measures the CPU time that the PostgreSQL server at url spends:
// every process of its postmaster (the children it reaped included), read
// from /proc; ok is false when the server is not on this machine.
type serverCPU struct {
	postmaster int
	start      time.Duration
}

func newServerCPU(b *testing.B, url string) *serverCPU {
	cfg, err := pgxpool.ParseConfig(url) // knows pool_max_conns
	if err != nil {
		b.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(context.Background(), cfg.ConnConfig)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	var pid int
	if err := conn.QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		b.Fatal(err)
	}
	f := procStat(pid)
	if f == nil {
		return nil
	}
	ppid, _ := strconv.Atoi(f[1])
	return &serverCPU{postmaster: ppid}
}

// procStat returns the fields of /proc/PID/stat after the command name
// (field 3 onward), or nil.
func procStat(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return strings.Fields(rest)
}

// total sums utime+stime of the postmaster and its live children, plus the
// cutime+cstime of the children the postmaster reaped, in clock ticks of 10 ms.
func (c *serverCPU) total() time.Duration {
	if c == nil {
		return 0
	}
	ticks := func(f []string, i int) int64 { v, _ := strconv.ParseInt(f[i], 10, 64); return v }
	var sum int64
	if f := procStat(c.postmaster); f != nil {
		sum += ticks(f, 11) + ticks(f, 12) + ticks(f, 13) + ticks(f, 14)
	}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if f := procStat(pid); f != nil && f[1] == strconv.Itoa(c.postmaster) {
			sum += ticks(f, 11) + ticks(f, 12)
		}
	}
	return time.Duration(sum) * 10 * time.Millisecond
}

func (c *serverCPU) begin() {
	if c != nil {
		c.start = c.total()
	}
}

// report gives the server's CPU per job over the timed part of b.
func (c *serverCPU) report(b *testing.B) {
	if c != nil {
		b.ReportMetric(float64((c.total()-c.start).Microseconds())/float64(b.N), "pg-cpu-us/job")
	}
}

// BenchmarkPostgres: River on riverpgxv5 against roster on one PostgreSQL
// server, each in a schema of its own, b.N no-op jobs per run.
func BenchmarkPostgres(b *testing.B) {
	for _, workers := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("river/workers=%d", workers), func(b *testing.B) {
			u := pgtest.Fresh(b) + fmt.Sprintf("&pool_max_conns=%d", workers+8)
			benchRiver(b, riverPostgres(b, u), workers, newServerCPU(b, u))
		})
		b.Run(fmt.Sprintf("roster-api/workers=%d", workers), func(b *testing.B) {
			u := pgtest.Fresh(b) + fmt.Sprintf("&pool_max_conns=%d", workers+8)
			drainRoster(b, openRoster(b, u), workers, b.N, newServerCPU(b, u))
			report(b)
		})
		b.Run(fmt.Sprintf("roster-runtime/workers=%d", workers), func(b *testing.B) {
			u := pgtest.Fresh(b) + fmt.Sprintf("&pool_max_conns=%d", workers+8)
			drainRosterRuntime(b, openRoster(b, u), workers, b.N, newServerCPU(b, u))
			report(b)
		})
	}
}

// BenchmarkSQLite: River on riversqlite against roster on a SQLite file in
// WAL mode with synchronous=FULL, b.N no-op jobs per run.
func BenchmarkSQLite(b *testing.B) {
	for _, workers := range []int{1, 8} {
		b.Run(fmt.Sprintf("river/workers=%d", workers), func(b *testing.B) {
			benchRiver(b, riverSQLite(b), workers, nil)
		})
		b.Run(fmt.Sprintf("roster-api/workers=%d", workers), func(b *testing.B) {
			drainRoster(b, openRoster(b, filepath.Join(b.TempDir(), "roster.db")), workers, b.N, nil)
			report(b)
		})
		b.Run(fmt.Sprintf("roster-runtime/workers=%d", workers), func(b *testing.B) {
			drainRosterRuntime(b, openRoster(b, filepath.Join(b.TempDir(), "roster.db")), workers, b.N, nil)
			report(b)
		})
	}
}

// benchRiver inserts b.N jobs, then times River's client draining them
// with the given number of workers.
func benchRiver[TTx any](b *testing.B, driver riverdriver.Driver[TTx], workers int, cpu *serverCPU) {
	w := &noopWorker{left: new(atomic.Int64), done: make(chan struct{})}
	w.left.Store(int64(b.N))
	c, err := river.NewClient(driver, riverConfig(workers, w))
	if err != nil {
		b.Fatal(err)
	}
	insertRiver(b, c, b.N)
	drainRiver(b, c, w, cpu)
	report(b)
}

// insertRoster creates n executions with CreateExecutions, 5,000 per call as
// insertRiver batches River's.
func insertRoster(b *testing.B, s *service.Store, n int) {
	b.Helper()
	ctx := context.Background()
	for done := 0; done < n; {
		batch := make([]service.CreateExecutionArgs, min(n-done, 5000))
		for i := range batch {
			batch[i] = service.CreateExecutionArgs{Namespace: "ns", Lane: "default"}
		}
		if _, err := s.CreateExecutions(ctx, batch); err != nil {
			b.Fatal(err)
		}
		done += len(batch)
	}
}

// BenchmarkInsertMany: batch enqueue, River's InsertManyFast against
// roster's CreateExecutions, 5,000 jobs per call, b.N jobs per run.
func BenchmarkInsertMany(b *testing.B) {
	b.Run("postgres/river", func(b *testing.B) {
		c, err := river.NewClient(riverPostgres(b, pgtest.Fresh(b)), &river.Config{Logger: discard})
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		insertRiver(b, c, b.N)
		report(b)
	})
	b.Run("postgres/roster", func(b *testing.B) {
		st := openRoster(b, pgtest.Fresh(b))
		b.ResetTimer()
		insertRoster(b, st, b.N)
		report(b)
	})
	b.Run("sqlite/river", func(b *testing.B) {
		c, err := river.NewClient(riverSQLite(b), &river.Config{Logger: discard})
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		insertRiver(b, c, b.N)
		report(b)
	})
	b.Run("sqlite/roster", func(b *testing.B) {
		st := openRoster(b, filepath.Join(b.TempDir(), "roster.db"))
		b.ResetTimer()
		insertRoster(b, st, b.N)
		report(b)
	})
}
