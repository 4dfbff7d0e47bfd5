package fleetproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rosterdb/roster/service"
)

// boundWorker runs RunWorker as instance name with bound leases (LeaseTTL 0)
// on lane "held", printing "ready" once registered, "start <id>" as each
// handler starts and "stopped <id> <unix ns>" when its context ends (the
// handler then returns its error).
func boundWorker(db, name, _ string) int {
	ctx, cancel := context.WithCancel(context.Background())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	go func() { <-sig; cancel() }()
	s, err := service.Open(ctx, db, service.WithoutMigrate())
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 1
	}
	defer s.Close()
	out := bufio.NewWriter(os.Stdout)
	say := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...); out.Flush() }
	err = s.RunWorker(ctx, service.WorkerArgs{
		Namespace: "ns", WorkerID: "bound", InstanceID: name, Lanes: []string{"held"}, TTL: 30 * time.Second,
		Concurrency: 4, Ready: func() { say("ready") },
		Handler: func(hctx context.Context, l service.Lease) ([]byte, error) {
			if !l.Bound {
				say("unbound %s", l.ExecutionID)
			}
			say("start %s", l.ExecutionID)
			<-hctx.Done()
			say("stopped %s %d", l.ExecutionID, time.Now().UnixNano())
			return nil, hctx.Err()
		},
	})
	if err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "run:", err)
		return 1
	}
	return 0
}

// A cancel made by one process ends the handler of the execution's bound
// lease in another within 100 ms (PostgreSQL: the roster_lost notification;
// SQLite: the change check), with no renewal to carry it; a mark-dead too.
func TestLostLeaseReachesHandlerAcrossProcesses(t *testing.T) {
	for name, db := range targets(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s, err := service.Open(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			cmd := child(t, "boundworker", db, "b1", "")
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
			lines := make(chan []string, 100)
			go func() {
				sc := bufio.NewScanner(stdout)
				for sc.Scan() {
					lines <- strings.Fields(sc.Text())
				}
				close(lines)
			}()
			next := func(kind string) []string {
				t.Helper()
				for {
					select {
					case f, ok := <-lines:
						if !ok {
							t.Fatalf("the worker exited while waiting for %q", kind)
						}
						if f[0] == "unbound" {
							t.Fatalf("a lease of RunWorker with LeaseTTL 0 is not bound: %v", f)
						}
						if f[0] == kind {
							return f
						}
					case <-time.After(30 * time.Second):
						t.Fatalf("no %q within 30 s", kind)
					}
				}
			}
			next("ready")
			var latencies []time.Duration
			for i := range 5 {
				id, err := s.CreateExecution(ctx, service.CreateExecutionArgs{Namespace: "ns", Lane: "held"})
				if err != nil {
					t.Fatal(err)
				}
				if f := next("start"); f[1] != id.String() {
					t.Fatalf("started %v, want %s", f, id)
				}
				cancelled := time.Now()
				if err := s.CancelExecution(ctx, service.CancelExecutionArgs{ID: id, Reason: fmt.Sprintf("cancel %d", i)}); err != nil {
					t.Fatal(err)
				}
				f := next("stopped")
				at, _ := strconv.ParseInt(f[2], 10, 64)
				latencies = append(latencies, time.Unix(0, at).Sub(cancelled))
			}
			slices.Sort(latencies)
			t.Logf("cancel to handler stop across processes: %v (median %v)", latencies, latencies[len(latencies)/2])
			if latencies[len(latencies)/2] > 100*time.Millisecond {
				t.Fatalf("a cancel reached the handler in %v (median), want within 100 ms", latencies[len(latencies)/2])
			}
			// A mark-dead ends the worker's bound leases too.
			id, err := s.CreateExecution(ctx, service.CreateExecutionArgs{Namespace: "ns", Lane: "held"})
			if err != nil {
				t.Fatal(err)
			}
			next("start")
			marked := time.Now()
			if err := s.MarkWorkerDead(ctx, service.MarkWorkerDeadArgs{Namespace: "ns", InstanceID: "b1", Reason: "test"}); err != nil {
				t.Fatal(err)
			}
			f := next("stopped")
			at, _ := strconv.ParseInt(f[2], 10, 64)
			t.Logf("mark-dead to handler stop: %v", time.Unix(0, at).Sub(marked))
			if f[1] != id.String() {
				t.Fatalf("stopped %v, want %s", f, id)
			}
			if _, err := s.RenewLease(ctx, service.RenewLeaseArgs{Lease: service.Lease{ExecutionID: id, Bound: true}}); !errors.Is(err, service.ErrLeaseLost) {
				t.Fatalf("a lease of the dead worker: %v", err)
			}
		})
	}
}
