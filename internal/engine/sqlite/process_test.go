package sqlite_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rosterdb/roster/service"
)

// The tests here run the test binary itself as child processes: a writer that
// is killed mid-write, and several writers sharing one file.
const (
	childModeEnv = "ROSTER_TEST_CHILD"
	childPathEnv = "ROSTER_TEST_DB"
	childNameEnv = "ROSTER_TEST_NAME"
)

func TestMain(m *testing.M) {
	switch os.Getenv(childModeEnv) {
	case "":
		os.Exit(m.Run())
	case "ack-writer":
		os.Exit(ackWriter(os.Getenv(childPathEnv), os.Getenv(childNameEnv)))
	case "writer":
		os.Exit(sharedWriter(os.Getenv(childPathEnv), os.Getenv(childNameEnv)))
	default:
		fmt.Fprintln(os.Stderr, "unknown child mode")
		os.Exit(2)
	}
}

// ackWriter registers workers from 4 goroutines forever, printing "ack ID"
// after each registration returned nil, until it is killed.
func ackWriter(path, name string) int {
	ctx := context.Background()
	s, err := service.Open(ctx, path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				inst := fmt.Sprintf("%s-g%d-%06d", name, g, i)
				if _, err := s.RegisterWorker(ctx, service.RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: inst, TTL: time.Hour}); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(1)
				}
				mu.Lock()
				fmt.Fprintln(out, "ack", inst)
				out.Flush()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return 0
}

// sharedWriter registers, heartbeats and marks dead 100 workers, and claims
// and completes executions, on a file other processes write too.
func sharedWriter(path, name string) int {
	ctx := context.Background()
	s, err := service.Open(ctx, path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 1
	}
	defer s.Close()
	for i := range 100 {
		inst := fmt.Sprintf("%s-%03d", name, i)
		if _, err := s.RegisterWorker(ctx, service.RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: inst, Lanes: []string{"l"}, TTL: time.Hour}); err != nil {
			fmt.Fprintln(os.Stderr, "register:", err)
			return 1
		}
		if _, err := s.HeartbeatWorker(ctx, service.HeartbeatWorkerArgs{Namespace: "ns", InstanceID: inst}); err != nil {
			fmt.Fprintln(os.Stderr, "heartbeat:", err)
			return 1
		}
		// RunAt in the past: claimable by a claim whose clock was read a
		// moment before this create committed in another process.
		if _, err := s.CreateExecution(ctx, service.CreateExecutionArgs{Namespace: "ns", Lane: "l", RunAt: time.Unix(1, 0)}); err != nil {
			fmt.Fprintln(os.Stderr, "create:", err)
			return 1
		}
		l, err := s.ClaimExecution(ctx, service.ClaimArgs{Namespace: "ns", InstanceID: inst, LeaseTTL: time.Minute})
		if err != nil {
			fmt.Fprintln(os.Stderr, "claim:", err)
			return 1
		}
		if err := s.CompleteExecution(ctx, service.CompleteArgs{Lease: l}); err != nil {
			fmt.Fprintln(os.Stderr, "complete:", err)
			return 1
		}
		if _, err := s.ListWorkers(ctx, service.ListWorkersArgs{Namespace: "ns", Limit: 10}); err != nil {
			fmt.Fprintln(os.Stderr, "list:", err)
			return 1
		}
	}
	return 0
}

func childCmd(t *testing.T, mode, path, name string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childModeEnv+"="+mode, childPathEnv+"="+path, childNameEnv+"="+name)
	return cmd
}

// A process killed with SIGKILL in the middle of writing loses no write it
// had acknowledged.
func TestKilledWriterLosesNoAcknowledgedWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crash.db")
	var acked []string
	for round := range 3 {
		cmd := childCmd(t, "ack-writer", path, fmt.Sprintf("r%d", round))
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		must(t, err)
		must(t, cmd.Start())
		sc := bufio.NewScanner(stdout)
		for n := 0; n < 150 && sc.Scan(); n++ {
			acked = append(acked, strings.TrimPrefix(sc.Text(), "ack "))
		}
		must(t, cmd.Process.Signal(syscall.SIGKILL))
		for sc.Scan() { // acks written before the kill landed
			acked = append(acked, strings.TrimPrefix(sc.Text(), "ack "))
		}
		_ = cmd.Wait()
	}
	s, err := service.Open(context.Background(), path)
	must(t, err)
	defer s.Close()
	for _, inst := range acked {
		if _, err := s.GetWorker(context.Background(), "ns", inst); err != nil {
			t.Fatalf("acknowledged registration of %s lost: %v", inst, err)
		}
	}
	if len(acked) < 450 {
		t.Fatalf("only %d acknowledgements", len(acked))
	}
}

// Several processes on one file are correct: no SQLITE_BUSY reaches them.
func TestSeveralProcessesOnOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.db")
	const procs = 4
	cmds := make([]*exec.Cmd, procs)
	outs := make([]strings.Builder, procs)
	for i := range cmds {
		cmds[i] = childCmd(t, "writer", path, fmt.Sprintf("p%d", i))
		cmds[i].Stderr = &outs[i]
		must(t, cmds[i].Start())
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("process %d: %v: %s", i, err, outs[i].String())
		}
	}
	s, err := service.Open(context.Background(), path)
	must(t, err)
	defer s.Close()
	page, err := s.ListWorkers(context.Background(), service.ListWorkersArgs{})
	must(t, err)
	if len(page.Workers) != procs*100 {
		t.Fatalf("%d workers, want %d", len(page.Workers), procs*100)
	}
}
