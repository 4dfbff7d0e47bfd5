// Package fleetproc tests the fleet features across real processes: unique
// creates racing from many processes, and the maintenance leadership handed
// over when its holder is SIGKILLed. Each test runs on a SQLite file and on
// PostgreSQL (ROSTER_TEST_POSTGRES).
package fleetproc

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rosterdb/roster/internal/pgtest"
	"github.com/rosterdb/roster/service"
)

const (
	modeEnv = "ROSTER_FLEETPROC_MODE"
	dbEnv   = "ROSTER_FLEETPROC_DB"
	nameEnv = "ROSTER_FLEETPROC_NAME"
	argEnv  = "ROSTER_FLEETPROC_ARG"
)

func TestMain(m *testing.M) {
	switch os.Getenv(modeEnv) {
	case "":
		os.Exit(m.Run())
	case "creator":
		os.Exit(creator(os.Getenv(dbEnv), os.Getenv(argEnv)))
	case "sweeper":
		os.Exit(sweeper(os.Getenv(dbEnv), os.Getenv(nameEnv), os.Getenv(argEnv)))
	case "boundworker":
		os.Exit(boundWorker(os.Getenv(dbEnv), os.Getenv(nameEnv), os.Getenv(argEnv)))
	case "flowworker":
		os.Exit(flowWorker(os.Getenv(dbEnv), os.Getenv(nameEnv), os.Getenv(argEnv)))
	default:
		fmt.Fprintln(os.Stderr, "unknown mode")
		os.Exit(2)
	}
}

// targets are the shared databases a test runs on.
func targets(t *testing.T) map[string]string {
	return map[string]string{
		"sqlite":   filepath.Join(t.TempDir(), "fleet.db"),
		"postgres": pgtest.Fresh(t),
	}
}

func child(t *testing.T, mode, db, name, arg string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), modeEnv+"="+mode, dbEnv+"="+db, nameEnv+"="+name, argEnv+"="+arg)
	cmd.Stderr = os.Stderr
	return cmd
}

// keys is how many keys each creator races on.
const keys = 25

// creator waits for the start time (Unix ms in arg), then creates one
// execution for each of the keys, printing "key id" per create.
func creator(db, startMs string) int {
	ctx := context.Background()
	s, err := service.Open(ctx, db, service.WithoutMigrate())
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 1
	}
	defer s.Close()
	ms, _ := strconv.ParseInt(startMs, 10, 64)
	time.Sleep(time.Until(time.UnixMilli(ms)))
	for k := range keys {
		key := fmt.Sprintf("webhook:%d", k)
		id, err := s.CreateExecution(ctx, service.CreateExecutionArgs{Namespace: "ns", Lane: "default", UniqueKey: key})
		if err != nil {
			fmt.Fprintln(os.Stderr, "create:", err)
			return 1
		}
		fmt.Println(key, id)
	}
	return 0
}

// Eight processes creating the same keys at the same moment yield one
// execution per key, and every process is told its id.
func TestUniqueCreatesAcrossProcesses(t *testing.T) {
	for name, db := range targets(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s, err := service.Open(ctx, db) // migrates
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			const procs = 8
			start := strconv.FormatInt(time.Now().Add(1500*time.Millisecond).UnixMilli(), 10)
			outs := make([]strings.Builder, procs)
			cmds := make([]*exec.Cmd, procs)
			for i := range cmds {
				cmds[i] = child(t, "creator", db, "", start)
				cmds[i].Stdout = &outs[i]
				if err := cmds[i].Start(); err != nil {
					t.Fatal(err)
				}
			}
			for i, cmd := range cmds {
				if err := cmd.Wait(); err != nil {
					t.Fatalf("creator %d: %v", i, err)
				}
			}
			ids := map[string]string{}
			for i := range outs {
				lines := strings.Split(strings.TrimSpace(outs[i].String()), "\n")
				if len(lines) != keys {
					t.Fatalf("creator %d printed %d lines", i, len(lines))
				}
				for _, line := range lines {
					key, id, _ := strings.Cut(line, " ")
					if prev, ok := ids[key]; ok && prev != id {
						t.Fatalf("%s: %s and %s", key, prev, id)
					}
					ids[key] = id
				}
			}
			p, err := s.ListExecutions(ctx, service.ListExecutionsArgs{Namespace: "ns"})
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Executions) != keys {
				t.Fatalf("%d executions for %d keys", len(p.Executions), keys)
			}
			for _, e := range p.Executions {
				if ids[e.UniqueKey] != e.ID.String() {
					t.Fatalf("%s holds %s, the creators were told %s", e.ID, e.UniqueKey, ids[e.UniqueKey])
				}
			}
		})
	}
}

// sweeperInterval is the sweepers' Interval in the handover test.
const sweeperInterval = 400 * time.Millisecond

// sweeper runs RunSweeper as instance name until killed, logging every
// record as JSON on stdout.
func sweeper(db, name, _ string) int {
	ctx := context.Background()
	log := slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := service.Open(ctx, db, service.WithoutMigrate(), service.WithLogger(log))
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 1
	}
	defer s.Close()
	if err := s.RunSweeper(ctx, service.SweeperArgs{Interval: sweeperInterval, InstanceID: name}); err != nil {
		fmt.Fprintln(os.Stderr, "sweeper:", err)
		return 1
	}
	return 0
}

// run is one maintenance run a sweeper logged.
type run struct {
	instance     string
	epoch        int64
	began, ended time.Time
}

// Four processes run RunSweeper on one database: one leads; SIGKILLed, the
// next takes over in time; and at no moment do two lead (the runs of
// different epochs never overlap, and epochs only grow).
func TestLeaderHandoverAcrossProcesses(t *testing.T) {
	for name, db := range targets(t) {
		t.Run(name, func(t *testing.T) {
			s, err := service.Open(context.Background(), db)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var mu sync.Mutex
			var runs []run
			cmds := map[string]*exec.Cmd{}
			var readers sync.WaitGroup
			for i := range 4 {
				inst := fmt.Sprintf("p%d", i)
				cmd := child(t, "sweeper", db, inst, "")
				out, err := cmd.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				cmds[inst] = cmd
				readers.Go(func() { collect(out, &mu, &runs) })
			}
			defer func() {
				for _, cmd := range cmds {
					_ = cmd.Process.Kill()
					_ = cmd.Wait()
				}
				readers.Wait()
			}()
			// Wait for a leader and a few of its runs.
			first := waitFor(t, &mu, &runs, 10*time.Second, func(rs []run) bool { return len(rs) >= 3 })
			leader := first[0].instance
			if err := cmds[leader].Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed := time.Now()
			_ = cmds[leader].Wait()
			delete(cmds, leader)
			after := waitFor(t, &mu, &runs, 10*time.Second, func(rs []run) bool {
				return slices.ContainsFunc(rs, func(r run) bool { return r.instance != leader })
			})
			i := slices.IndexFunc(after, func(r run) bool { return r.instance != leader })
			took := after[i].began.Sub(killed)
			// The lease lapses 2.5 Intervals after the last renewal, and a
			// follower looks every Interval/4 (±10%): within 3 Intervals.
			if limit := 3 * sweeperInterval; took > limit {
				t.Fatalf("%s took over %v after %s was killed (limit %v)", after[i].instance, took, leader, limit)
			}
			t.Logf("%s led; killed; %s took over %v later", leader, after[i].instance, took.Round(time.Millisecond))
			time.Sleep(3 * sweeperInterval) // a few runs of the new leader
			mu.Lock()
			defer mu.Unlock()
			checkNoOverlap(t, runs, leader, killed)
		})
	}
}

// collect parses the sweeper's JSON log records into runs.
func collect(r io.Reader, mu *sync.Mutex, runs *[]run) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var rec struct {
			Msg      string `json:"msg"`
			Instance string `json:"instance"`
			Epoch    int64  `json:"epoch"`
			Began    int64  `json:"began"`
			Ended    int64  `json:"ended"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) != nil || rec.Msg != "roster: sweeper run" {
			continue
		}
		mu.Lock()
		*runs = append(*runs, run{instance: rec.Instance, epoch: rec.Epoch, began: time.Unix(0, rec.Began), ended: time.Unix(0, rec.Ended)})
		mu.Unlock()
	}
}

func waitFor(t *testing.T, mu *sync.Mutex, runs *[]run, limit time.Duration, ok func([]run) bool) []run {
	t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		mu.Lock()
		rs := slices.Clone(*runs)
		mu.Unlock()
		if ok(rs) {
			return rs
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out; runs so far: %+v", *runs)
	return nil
}

// checkNoOverlap: each epoch belongs to one instance; the runs of an epoch
// all end before the first run of any later epoch begins; the killed
// leader's runs all began before it was killed.
func checkNoOverlap(t *testing.T, runs []run, killedLeader string, killed time.Time) {
	t.Helper()
	type term struct {
		instance    string
		first, last time.Time // first began, last ended
		epoch       int64
	}
	terms := map[int64]*term{}
	for _, r := range runs {
		tm, ok := terms[r.epoch]
		if !ok {
			terms[r.epoch] = &term{instance: r.instance, first: r.began, last: r.ended, epoch: r.epoch}
			continue
		}
		if tm.instance != r.instance {
			t.Fatalf("epoch %d held by %s and %s", r.epoch, tm.instance, r.instance)
		}
		tm.first, tm.last = minTime(tm.first, r.began), maxTime(tm.last, r.ended)
		if r.instance == killedLeader && r.began.After(killed) {
			t.Fatalf("the killed leader ran at %v, after its kill at %v", r.began, killed)
		}
	}
	var epochs []int64
	for e := range terms {
		epochs = append(epochs, e)
	}
	slices.Sort(epochs)
	if len(epochs) < 2 {
		t.Fatalf("only epochs %v: no handover seen", epochs)
	}
	for i := 1; i < len(epochs); i++ {
		prev, next := terms[epochs[i-1]], terms[epochs[i]]
		if !prev.last.Before(next.first) {
			t.Fatalf("epoch %d (%s) ran until %v, after epoch %d (%s) began at %v",
				prev.epoch, prev.instance, prev.last, next.epoch, next.instance, next.first)
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
