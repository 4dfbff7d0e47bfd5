// Package runtimebench measures RunWorker from outside: how soon a handler
// starts after a producer in another process enqueues work, and what an
// idle worker costs. The worker runs in a process of its own (this test
// binary, run again as a child).
//
//	ROSTER_TEST_POSTGRES=postgres://... go test -run '^$' -bench . -benchtime 300x ./internal/runtimebench
package runtimebench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rosterdb/roster/internal/pgtest"
	"github.com/rosterdb/roster/service"
)

const (
	childEnv = "ROSTER_BENCH_CHILD"
	childDB  = "ROSTER_BENCH_DB"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "worker" {
		os.Exit(childWorker(os.Getenv(childDB)))
	}
	os.Exit(m.Run())
}

// childWorker runs RunWorker until SIGTERM and prints "<execution id>
// <unix ns>" as each handler starts.
func childWorker(db string) int {
	ctx, cancel := context.WithCancel(context.Background())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	go func() { <-sig; cancel() }()
	s, err := service.Open(ctx, db)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer s.Close()
	out := bufio.NewWriter(os.Stdout)
	err = s.RunWorker(ctx, service.WorkerArgs{
		Namespace: "bench", WorkerID: "w", InstanceID: "child", Lanes: []string{"l"}, TTL: time.Minute, Concurrency: 8,
		Ready: func() { fmt.Fprintln(out, "ready"); out.Flush() },
		Handler: func(_ context.Context, l service.Lease) ([]byte, error) {
			fmt.Fprintln(out, l.ExecutionID, time.Now().UnixNano())
			out.Flush()
			return nil, nil
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// engines are the databases the benchmarks run on.
func engines(b *testing.B) map[string]func(b *testing.B) string {
	return map[string]func(b *testing.B) string{
		"sqlite": func(b *testing.B) string { return filepath.Join(b.TempDir(), "bench.db") },
		"postgres": func(b *testing.B) string {
			u := pgtest.Fresh(b)
			return u + "&application_name=roster-bench-" + strconv.Itoa(os.Getpid())
		},
	}
}

// startChild starts a worker process on db and returns its handler starts.
func startChild(b *testing.B, db string) <-chan [2]string {
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), childEnv+"=worker", childDB+"="+db)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	starts := make(chan [2]string, 1024)
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "ready" {
				close(ready)
				continue
			}
			if id, at, ok := strings.Cut(sc.Text(), " "); ok {
				starts <- [2]string{id, at}
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		b.Fatal("the worker process was not ready")
	}
	return starts
}

// BenchmarkEnqueueToStart: a producer creates one execution at a time (the
// worker idle between them) and times CreateExecution's call to the
// handler's start in the worker's process; p50 and p99 in milliseconds.
func BenchmarkEnqueueToStart(b *testing.B) {
	for name, fresh := range engines(b) {
		b.Run(name, func(b *testing.B) {
			db := fresh(b)
			ctx := context.Background()
			producer, err := service.Open(ctx, db)
			if err != nil {
				b.Fatal(err)
			}
			defer producer.Close()
			starts := startChild(b, db)
			time.Sleep(200 * time.Millisecond) // the worker settles into idleness
			latencies := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				time.Sleep(5 * time.Millisecond) // idle again
				began := time.Now()
				id, err := producer.CreateExecution(ctx, service.CreateExecutionArgs{Namespace: "bench", Lane: "l"})
				if err != nil {
					b.Fatal(err)
				}
				select {
				case s := <-starts:
					if s[0] != id.String() {
						b.Fatalf("started %s, created %s", s[0], id)
					}
					ns, _ := strconv.ParseInt(s[1], 10, 64)
					latencies = append(latencies, time.Unix(0, ns).Sub(began))
				case <-time.After(30 * time.Second):
					b.Fatal("the handler did not start")
				}
			}
			b.StopTimer()
			slices.Sort(latencies)
			pct := func(p float64) float64 {
				return float64(latencies[int(p*float64(len(latencies)-1))]) / float64(time.Millisecond)
			}
			b.ReportMetric(pct(0.50), "p50-ms")
			b.ReportMetric(pct(0.99), "p99-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkIdleWorker: one RunWorker with nothing to do, for 10 ms per op;
// the CPU its process uses (and, on PostgreSQL, the CPU of the server
// backends serving it), in percent of one core.
func BenchmarkIdleWorker(b *testing.B) {
	for name, fresh := range engines(b) {
		b.Run(name, func(b *testing.B) {
			db := fresh(b)
			ctx, cancel := context.WithCancel(context.Background())
			s, err := service.Open(ctx, db, service.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ready := make(chan struct{})
			done := make(chan error, 1)
			go func() {
				done <- s.RunWorker(ctx, service.WorkerArgs{
					Namespace: "bench", WorkerID: "w", InstanceID: "idle", Lanes: []string{"l"}, TTL: time.Minute,
					Concurrency: 8, Ready: func() { close(ready) },
					Handler: func(context.Context, service.Lease) ([]byte, error) { return nil, nil },
				})
			}()
			<-ready
			time.Sleep(300 * time.Millisecond)
			backends := backendPIDs(b, db)
			cpu0, server0, wall0 := processCPU(), serverCPU(backends), time.Now()
			b.ResetTimer()
			time.Sleep(time.Duration(b.N) * 10 * time.Millisecond)
			b.StopTimer()
			wall := time.Since(wall0)
			b.ReportMetric(100*float64(processCPU()-cpu0)/float64(wall), "cpu-%")
			if len(backends) > 0 {
				b.ReportMetric(100*float64(serverCPU(backends)-server0)/float64(wall), "server-cpu-%")
			}
			b.ReportMetric(0, "ns/op")
			cancel()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}

// processCPU is this process's user and system time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// backendPIDs lists the PostgreSQL backends serving connections whose
// application_name the URL db sets (none for SQLite).
func backendPIDs(b *testing.B, db string) []int {
	_, app, ok := strings.Cut(db, "application_name=")
	if !ok {
		return nil
	}
	conn, err := pgx.Connect(context.Background(), os.Getenv(pgtest.EnvURL))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), "SELECT pid FROM pg_stat_activity WHERE application_name = $1", app)
	if err != nil {
		b.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		b.Fatal(err)
	}
	out := make([]int, len(pids))
	for i, p := range pids {
		out[i] = int(p)
	}
	return out
}

// serverCPU sums the user and system time of processes on this machine
// (/proc/PID/stat, clock ticks of 10 ms).
func serverCPU(pids []int) time.Duration {
	var total time.Duration
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// Fields after the command name (which may hold spaces): utime and
		// stime are fields 14 and 15 of the line.
		_, rest, _ := strings.Cut(string(b), ") ")
		fields := strings.Fields(rest)
		if len(fields) < 13 {
			continue
		}
		utime, _ := strconv.ParseInt(fields[11], 10, 64)
		stime, _ := strconv.ParseInt(fields[12], 10, 64)
		total += time.Duration(utime+stime) * 10 * time.Millisecond
	}
	return total
}
