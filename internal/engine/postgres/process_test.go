package postgres_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/rosterdb/roster/internal/pgtest"
	"github.com/rosterdb/roster/service"
)

// The tests here run the test binary itself as child processes on one
// PostgreSQL schema: claimers racing for one queue, Opens racing to migrate a
// new schema, and a writer killed mid-write.
const (
	childModeEnv = "ROSTER_TEST_CHILD"
	childURLEnv  = "ROSTER_TEST_URL"
	childNameEnv = "ROSTER_TEST_NAME"
)

func TestMain(m *testing.M) {
	mode := os.Getenv(childModeEnv)
	if mode == "" {
		os.Exit(m.Run())
	}
	u, name := os.Getenv(childURLEnv), os.Getenv(childNameEnv)
	var err error
	switch mode {
	case "claimer":
		err = claimer(u, name)
	case "opener":
		err = opener(u)
	case "ack-writer":
		err = ackWriter(u, name)
	default:
		err = errors.New("unknown child mode " + mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// claimer runs 8 goroutines, each a registered worker claiming and
// completing executions until none is left, printing "done ID" after each
// completion returned nil. Any error fails the process.
func claimer(u, name string) error {
	ctx := context.Background()
	s, err := service.Open(ctx, u)
	if err != nil {
		return err
	}
	defer s.Close()
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			inst := fmt.Sprintf("%s-g%d", name, g)
			if _, err := s.RegisterWorker(ctx, service.RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: inst, Lanes: []string{"l"}, TTL: time.Hour}); err != nil {
				errs <- err
				return
			}
			for {
				l, err := s.ClaimExecution(ctx, service.ClaimArgs{Namespace: "ns", InstanceID: inst, LeaseTTL: time.Minute})
				if errors.Is(err, service.ErrNoWork) {
					return
				}
				if err != nil {
					errs <- fmt.Errorf("claim: %w", err)
					return
				}
				if err := s.CompleteExecution(ctx, service.CompleteArgs{Lease: l, Result: []byte(inst)}); err != nil {
					errs <- fmt.Errorf("complete: %w", err)
					return
				}
				mu.Lock()
				fmt.Fprintln(out, "done", l.ExecutionID)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// opener opens the Store (migrating a new schema) and uses it once.
func opener(u string) error {
	ctx := context.Background()
	s, err := service.Open(ctx, u)
	if err != nil {
		return err
	}
	defer s.Close()
	_, err = s.CreateExecution(ctx, service.CreateExecutionArgs{Namespace: "ns", Lane: "l"})
	return err
}

// ackWriter registers workers from 4 goroutines until it is killed, printing
// "ack ID" after each registration returned nil.
func ackWriter(u, name string) error {
	ctx := context.Background()
	s, err := service.Open(ctx, u)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	errs := make(chan error, 4)
	for g := range 4 {
		go func() {
			for i := 0; ; i++ {
				inst := fmt.Sprintf("%s-g%d-%06d", name, g, i)
				if _, err := s.RegisterWorker(ctx, service.RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: inst, TTL: time.Hour}); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				fmt.Fprintln(out, "ack", inst)
				out.Flush()
				mu.Unlock()
			}
		}()
	}
	return <-errs
}

func child(t *testing.T, mode, u, name string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childModeEnv+"="+mode, childURLEnv+"="+u, childNameEnv+"="+name)
	return cmd
}

// 4 processes x 8 goroutines claim from one queue: every execution is
// claimed exactly once and completed exactly once, and no error surfaces.
func TestManyProcessesClaimEachExecutionOnce(t *testing.T) {
	u := pgtest.Fresh(t)
	ctx := context.Background()
	s, err := service.Open(ctx, u)
	must(t, err)
	defer s.Close()
	const executions = 600
	ids := map[uuid.UUID]bool{}
	for range executions {
		id, err := s.CreateExecution(ctx, service.CreateExecutionArgs{Namespace: "ns", Lane: "l"})
		must(t, err)
		ids[id] = true
	}
	const procs = 4
	cmds := make([]*exec.Cmd, procs)
	outs := make([]strings.Builder, procs)
	errOuts := make([]strings.Builder, procs)
	for i := range cmds {
		cmds[i] = child(t, "claimer", u, fmt.Sprintf("p%d", i))
		cmds[i].Stdout, cmds[i].Stderr = &outs[i], &errOuts[i]
		must(t, cmds[i].Start())
	}
	done := map[uuid.UUID]int{}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("process %d: %v: %s", i, err, errOuts[i].String())
		}
		for _, line := range strings.Fields(outs[i].String()) {
			if line == "done" {
				continue
			}
			id, err := uuid.Parse(line)
			must(t, err)
			done[id]++
		}
	}
	if len(done) != executions {
		t.Fatalf("%d executions completed, want %d", len(done), executions)
	}
	for id, n := range done {
		if n != 1 || !ids[id] {
			t.Fatalf("execution %s completed %d times (known: %v)", id, n, ids[id])
		}
		e, err := s.GetExecution(ctx, id)
		must(t, err)
		if e.State != service.ExecutionCompleted || e.Attempts != 1 {
			t.Fatalf("execution %s: %s after %d attempts", id, e.State, e.Attempts)
		}
	}
}

// Two processes open one new schema at the same moment: both migrate-or-wait
// and work.
func TestTwoProcessesOpenANewSchema(t *testing.T) {
	for round := range 3 {
		u := pgtest.Fresh(t)
		cmds := make([]*exec.Cmd, 2)
		errOuts := make([]strings.Builder, 2)
		for i := range cmds {
			cmds[i] = child(t, "opener", u, fmt.Sprint(i))
			cmds[i].Stderr = &errOuts[i]
			must(t, cmds[i].Start())
		}
		for i, cmd := range cmds {
			if err := cmd.Wait(); err != nil {
				t.Fatalf("round %d, process %d: %v: %s", round, i, err, errOuts[i].String())
			}
		}
		v, latest, err := service.SchemaVersion(context.Background(), u)
		must(t, err)
		if v != latest {
			t.Fatalf("round %d: version %d, want %d", round, v, latest)
		}
	}
}

// A client killed with SIGKILL in the middle of writing loses no write it had
// acknowledged.
func TestKilledClientLosesNoAcknowledgedWrite(t *testing.T) {
	u := pgtest.Fresh(t)
	var acked []string
	for round := range 3 {
		cmd := child(t, "ack-writer", u, fmt.Sprintf("r%d", round))
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		must(t, err)
		must(t, cmd.Start())
		sc := bufio.NewScanner(stdout)
		for n := 0; n < 150 && sc.Scan(); n++ {
			acked = append(acked, strings.TrimPrefix(sc.Text(), "ack "))
		}
		must(t, cmd.Process.Signal(syscall.SIGKILL))
		for sc.Scan() {
			acked = append(acked, strings.TrimPrefix(sc.Text(), "ack "))
		}
		_ = cmd.Wait()
	}
	s, err := service.Open(context.Background(), u)
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
