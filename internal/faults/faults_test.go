// Package faults is roster's fault-injection suite: worker processes (this
// test binary, run again as a child) drain a queue through RunWorker while
// the test hurts what they depend on (a PostgreSQL server of the test's own
// restarted, crashed, its connections killed, taken away; a worker
// SIGKILLed; the fleet's clock jumping; a full disk), then reconciles a
// ledger of every handler run with the rows the database kept.
package faults

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/rosterdb/roster/internal/pgserver"
	"github.com/rosterdb/roster/service"
	_ "modernc.org/sqlite"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "worker" {
		os.Exit(childWorker())
	}
	os.Exit(m.Run())
}

// trial is one fault and the run around it.
type trial struct {
	name          string
	postgres      bool
	executions    int
	spread        time.Duration // RunAts spread over this, from the start
	ttl, leaseTTL time.Duration
	clockJump     time.Duration // the fleet's clock jumps by this at each SIGUSR1
	noSweeper     bool          // no RunSweeper during the run (a final sweep only)
	longEvery     int           // every longEvery-th execution's handler runs longFor...
	longUntil     int           // ... up to this execution
	longFor       time.Duration
	tmpfs         bool // the database on a small tmpfs of its own
	// fault hurts the run (times relative to r.start) and returns when the
	// fault ended.
	fault func(r *run) (ended time.Time, err error)
	// noDuplicates: every handler must have run exactly once.
	noDuplicates bool
	// check, optional, checks more of the ledger.
	check func(t *testing.T, r *run, l *reconciled)
}

// run is one trial's state.
type run struct {
	t       *testing.T
	tr      trial
	dir     string
	loc     string
	server  *pgserver.Server
	store   *service.Store
	offset  atomic.Int64 // the test process's own clock jump
	start   time.Time    // the first RunAt
	workers []*child
}

type child struct {
	instance string
	ledger   string
	cmd      *exec.Cmd
	stderr   *strings.Builder
	exited   chan error
	killed   bool
}

func TestFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("the fault suite runs real processes and servers for about a minute")
	}
	kill := func(r *run) (time.Time, error) {
		sleepUntil(r.start.Add(3 * time.Second))
		r.workers[0].killed = true
		return time.Now(), r.workers[0].cmd.Process.Signal(syscall.SIGKILL)
	}
	jump := func(r *run) (time.Time, error) {
		sleepUntil(r.start.Add(3 * time.Second))
		r.offset.Add(int64(r.tr.clockJump))
		for _, w := range r.workers {
			if err := w.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
				return time.Now(), err
			}
		}
		return time.Now(), nil
	}
	trials := []trial{
		{
			name: "pg-restart-immediate-twice", postgres: true, executions: 2000, spread: 12 * time.Second,
			ttl: 3 * time.Second, leaseTTL: 3 * time.Second,
			fault: func(r *run) (time.Time, error) {
				for _, at := range []time.Duration{3 * time.Second, 7 * time.Second} {
					sleepUntil(r.start.Add(at))
					if err := r.server.Restart("immediate"); err != nil {
						return time.Now(), err
					}
				}
				return time.Now(), nil
			},
		},
		{
			name: "pg-terminate-backends", postgres: true, executions: 3000, spread: 22 * time.Second,
			ttl: 3 * time.Second, leaseTTL: 3 * time.Second,
			fault: func(r *run) (time.Time, error) {
				for i := range 10 {
					sleepUntil(r.start.Add(time.Duration(2+2*i) * time.Second))
					if _, err := r.server.TerminateBackends(context.Background()); err != nil {
						return time.Now(), err
					}
				}
				return time.Now(), nil
			},
		},
		{
			name: "pg-down-45s", postgres: true, executions: 2000, spread: 60 * time.Second,
			ttl: 5 * time.Second, leaseTTL: 10 * time.Second, longEvery: 50, longUntil: 100, longFor: 30 * time.Second,
			fault: func(r *run) (time.Time, error) {
				sleepUntil(r.start.Add(3 * time.Second))
				if err := r.server.Down("immediate"); err != nil {
					return time.Now(), err
				}
				time.Sleep(45 * time.Second)
				return time.Now(), r.server.Up()
			},
			check: checkCancelledAtExpiry(3*time.Second, 10*time.Second),
		},
		{name: "pg-sigkill-worker", postgres: true, executions: 2000, spread: 8 * time.Second,
			ttl: 2 * time.Second, leaseTTL: 2 * time.Second, fault: kill},
		{name: "sqlite-sigkill-worker", executions: 2000, spread: 8 * time.Second,
			ttl: 2 * time.Second, leaseTTL: 2 * time.Second, fault: kill},
		{name: "pg-clock-jump", postgres: true, executions: 2000, spread: 8 * time.Second,
			ttl: time.Second, leaseTTL: 30 * time.Second, clockJump: 3 * time.Second, noSweeper: true, noDuplicates: true, fault: jump},
		{name: "sqlite-clock-jump", executions: 2000, spread: 8 * time.Second,
			ttl: time.Second, leaseTTL: 30 * time.Second, clockJump: 3 * time.Second, noSweeper: true, noDuplicates: true, fault: jump},
		{
			name: "sqlite-disk-full", executions: 2000, spread: 10 * time.Second, tmpfs: true,
			ttl: 3 * time.Second, leaseTTL: 3 * time.Second,
			fault: func(r *run) (time.Time, error) {
				sleepUntil(r.start.Add(3 * time.Second))
				filler := filepath.Join(filepath.Dir(r.loc), "filler")
				if err := fillDisk(filler); err != nil {
					return time.Now(), err
				}
				time.Sleep(3 * time.Second)
				return time.Now(), os.Remove(filler)
			},
		},
	}
	var reports []string
	var mu sync.Mutex
	t.Cleanup(func() {
		sort.Strings(reports)
		t.Logf("fault trials:\n%-28s %10s %10s %6s %10s  %-34s %10s %10s\n%s", "trial", "executions", "completed", "runs",
			"duplicates", "why", "recovery", "rerun", strings.Join(reports, "\n"))
		if path := os.Getenv("ROSTER_FAULT_REPORT"); path != "" {
			_ = os.WriteFile(path, []byte(strings.Join(reports, "\n")+"\n"), 0o644)
		}
	})
	// Three lanes of trials run side by side (the 45 s outage alone in one),
	// each lane's trials one after the other: the machine stays loaded
	// enough to be realistic, not so much that timings mean nothing.
	lanes := [][]trial{{}, {}, {}}
	for _, tr := range trials {
		switch {
		case tr.name == "pg-down-45s":
			lanes[0] = append(lanes[0], tr)
		case tr.postgres:
			lanes[1] = append(lanes[1], tr)
		default:
			lanes[2] = append(lanes[2], tr)
		}
	}
	for i, lane := range lanes {
		t.Run(fmt.Sprintf("lane%d", i), func(t *testing.T) {
			t.Parallel()
			for _, tr := range lane {
				t.Run(tr.name, func(t *testing.T) {
					line := runTrial(t, tr)
					mu.Lock()
					reports = append(reports, line)
					mu.Unlock()
				})
			}
		})
	}
}

func sleepUntil(at time.Time) { time.Sleep(time.Until(at)) }

// runTrial runs a trial and returns its report line.
func runTrial(t *testing.T, tr trial) string {
	r := &run{t: t, tr: tr, dir: t.TempDir()}
	ctx := context.Background()
	switch {
	case tr.postgres:
		r.server = pgserver.Start(t)
		r.loc = r.server.URL
	case tr.tmpfs:
		r.loc = filepath.Join(mountTmpfs(t, filepath.Join(r.dir, "disk"), "24m"), "roster.db")
	default:
		r.loc = filepath.Join(r.dir, "roster.db")
	}
	opts := []service.Option{service.WithLogger(discard)}
	if tr.clockJump > 0 {
		opts = append(opts, service.WithClock(func() time.Time { return time.Now().Add(time.Duration(r.offset.Load())) }))
	}
	s, err := service.Open(ctx, r.loc, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	r.store = s

	// The queue, claimable from 4 s from now and spread over the trial,
	// then the workers. The faults are timed from the queue's start (or from
	// when the workers were ready, if that was later).
	base := time.Now().Add(4 * time.Second)
	createAll(t, s, tr.executions, base, tr.spread)
	for i := range 3 {
		r.workers = append(r.workers, r.startWorker(fmt.Sprintf("w%d", i)))
	}
	r.start = base
	if late := time.Since(base); late > 0 {
		t.Logf("the workers were ready %v after the queue's start", late)
		r.start = time.Now()
	}
	sweepCtx, stopSweeper := context.WithCancel(ctx)
	sweeperDone := make(chan error, 1)
	if tr.noSweeper {
		sweeperDone <- nil
	} else {
		go func() { sweeperDone <- s.RunSweeper(sweepCtx, service.SweeperArgs{Interval: 500 * time.Millisecond}) }()
	}
	faultEnd, err := tr.fault(r)
	if err != nil {
		t.Fatalf("injecting the fault: %v", err)
	}

	// Every execution ends completed.
	deadline := r.start.Add(tr.spread + 90*time.Second)
	for completed := 0; completed < tr.executions; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d executions completed by the deadline", completed, tr.executions)
		}
		time.Sleep(200 * time.Millisecond)
		page, err := s.ListExecutions(ctx, service.ListExecutionsArgs{Namespace: "trial", State: service.ExecutionCompleted, Limit: 10000})
		if err != nil {
			requireSentinel(t, "ListExecutions", err)
			continue
		}
		completed = len(page.Executions)
	}
	// Every surviving worker recovered by itself: each runs a probe in a lane
	// only it serves. One that does not is stuck: it prints its goroutines
	// (SIGQUIT) for the log.
	probes := map[string]uuid.UUID{}
	for _, w := range r.workers {
		if w.killed {
			continue
		}
		id, err := s.CreateExecution(ctx, service.CreateExecutionArgs{Namespace: "trial", Lane: "probe-" + w.instance, Payload: []byte("probe")})
		if err != nil {
			t.Fatalf("creating the probe of %s: %v", w.instance, err)
		}
		probes[w.instance] = id
	}
	probeDeadline := time.Now().Add(30 * time.Second)
	for _, w := range r.workers {
		if w.killed {
			continue
		}
		for {
			e, err := s.GetExecution(ctx, probes[w.instance])
			if err == nil && e.State == service.ExecutionCompleted {
				_ = w.cmd.Process.Signal(syscall.SIGTERM)
				break
			}
			if time.Now().After(probeDeadline) {
				t.Errorf("worker %s did not recover: its probe is %s (%v)", w.instance, e.State, err)
				_ = w.cmd.Process.Signal(syscall.SIGQUIT)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, w := range r.workers {
		select {
		case err := <-w.exited:
			if !w.killed && err != nil {
				t.Errorf("worker %s exited with %v:\n%s", w.instance, err, w.stderr)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("worker %s did not shut down", w.instance)
			_ = w.cmd.Process.Kill()
		}
	}
	stopSweeper()
	if err := <-sweeperDone; err != nil {
		t.Errorf("RunSweeper: %v", err)
	}
	if _, err := s.Sweep(ctx, time.Time{}, service.SweeperArgs{}); err != nil {
		t.Fatalf("the final sweep: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("ROSTER_FAULT_VERBOSE") != "" {
			for _, w := range r.workers {
				t.Logf("worker %s's log:\n%s", w.instance, w.stderr)
			}
		}
	})
	l := r.reconcile(faultEnd)
	if tr.check != nil {
		tr.check(t, r, l)
	}
	why := make([]string, 0, len(l.why))
	for k, n := range l.why {
		why = append(why, fmt.Sprintf("%d %s", n, k))
	}
	sort.Strings(why)
	whyText := strings.Join(why, ", ")
	if whyText == "" {
		whyText = "-"
	}
	return fmt.Sprintf("%-28s %10d %10d %6d %10d  %-34s %10v %10v", tr.name, tr.executions, l.completed, l.runs, l.duplicates,
		whyText, l.recovery.Round(10*time.Millisecond), l.rerun.Round(10*time.Millisecond))
}

// createAll adds n executions claimable from start, their RunAts spread over
// spread, from 8 goroutines.
func createAll(t *testing.T, s *service.Store, n int, start time.Time, spread time.Duration) {
	var wg sync.WaitGroup
	var next atomic.Int64
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				_, err := s.CreateExecution(context.Background(), service.CreateExecutionArgs{
					Namespace: "trial", Lane: "work", Payload: []byte(strconv.Itoa(i)), MaxAttempts: 50,
					RunAt: start.Add(spread * time.Duration(i) / time.Duration(n)),
				})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("creating the queue: %v", err)
	}
}

// startWorker starts a worker process and waits until it is registered.
func (r *run) startWorker(instance string) *child {
	t := r.t
	c := &child{instance: instance, ledger: filepath.Join(r.dir, instance+".ledger"), stderr: &strings.Builder{}, exited: make(chan error, 1)}
	c.cmd = exec.Command(os.Args[0], "-test.run=^$")
	c.cmd.Env = append(os.Environ(),
		childEnv+"=worker", childDB+"="+r.loc, childInstance+"="+instance, childLedger+"="+c.ledger,
		childTTL+"="+r.tr.ttl.String(), childLeaseTTL+"="+r.tr.leaseTTL.String(),
		childClockJump+"="+r.tr.clockJump.String(), childLongEvery+"="+strconv.Itoa(r.tr.longEvery),
		childLongUntil+"="+strconv.Itoa(r.tr.longUntil),
		childLongFor+"="+r.tr.longFor.String())
	c.cmd.Stderr = &syncWriter{b: c.stderr}
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.cmd.Process.Kill() })
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		ok := false
		for sc.Scan() {
			if sc.Text() == "ready" && !ok {
				ok = true
				ready <- true
			}
		}
		if !ok {
			ready <- false
		}
		c.exited <- c.cmd.Wait()
	}()
	select {
	case ok := <-ready:
		if !ok {
			led, _ := os.ReadFile(c.ledger) // the child writes why it exited there
			t.Fatalf("worker %s exited before it was ready:\n%s\nledger:\n%s", instance, c.stderr, led)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("worker %s was not ready in time:\n%s", instance, c.stderr)
	}
	return c
}

// syncWriter guards a builder that a process's output is copied into.
type syncWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// handlerRun is one handler run from a ledger.
type handlerRun struct {
	worker     string
	execution  string
	epoch      int64
	start, end time.Time // end zero: the process died first
	cancelled  string    // the context's cause when the handler stopped early
}

// attempt is a row of the attempts table.
type attempt struct {
	state   string
	revoked bool
}

// reconciled is what the ledgers and the database say together.
type reconciled struct {
	runs, completed, duplicates int
	why                         map[string]int // the duplicates' attempts: how each lease was lost
	recovery                    time.Duration  // from the fault's end to the next handler start
	rerun                       time.Duration  // the longest wait of an execution whose lease was lost for its next run
	byExecution                 map[string][]*handlerRun
}

// reconcile reads every ledger and the attempts table and checks the
// runtime's promises against each other: every execution completed; a
// handler ran only for a lease whose claim committed, once per lease; a
// handler ran twice only where its first lease was truly lost (its attempt
// reclaimed); runs of one execution never overlapped; no raw driver error
// was logged; every surviving worker recovered by itself.
func (r *run) reconcile(faultEnd time.Time) *reconciled {
	t := r.t
	l := &reconciled{why: map[string]int{}, byExecution: map[string][]*handlerRun{}}
	for _, w := range r.workers {
		f, err := os.Open(w.ledger)
		if err != nil {
			t.Fatal(err)
		}
		open := map[string]*handlerRun{}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			switch fields[0] {
			case "start":
				epoch, _ := strconv.ParseInt(fields[2], 10, 64)
				ns, _ := strconv.ParseInt(fields[4], 10, 64)
				hr := &handlerRun{worker: w.instance, execution: fields[1], epoch: epoch, start: time.Unix(0, ns)}
				open[fields[1]+"/"+fields[2]] = hr
				l.byExecution[hr.execution] = append(l.byExecution[hr.execution], hr)
				if hr.start.After(faultEnd) {
					if d := hr.start.Sub(faultEnd); l.recovery == 0 || d < l.recovery {
						l.recovery = d
					}
				}
			case "end", "cancel":
				ns, _ := strconv.ParseInt(fields[3], 10, 64)
				if hr := open[fields[1]+"/"+fields[2]]; hr != nil {
					hr.end = time.Unix(0, ns)
					if fields[0] == "cancel" {
						hr.cancelled = strings.Join(fields[4:], " ")
					}
				}
			case "raw":
				t.Errorf("worker %s logged a raw driver error: %s", w.instance, sc.Text())
			}
		}
		f.Close()
	}
	attempts := r.attempts()
	page, err := r.store.ListExecutions(context.Background(), service.ListExecutionsArgs{Namespace: "trial", Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range page.Executions {
		if e.State != service.ExecutionCompleted {
			t.Errorf("execution %s ended %s (%s)", e.ID, e.State, e.LastError)
			continue
		}
		runs := l.byExecution[e.ID.String()]
		if e.Lane == "work" { // not a probe
			l.completed++
			l.runs += len(runs)
		}
		sort.Slice(runs, func(i, j int) bool { return runs[i].epoch < runs[j].epoch })
		completedRuns := 0
		for i, hr := range runs {
			a, ok := attempts[fmt.Sprintf("%s/%d", hr.execution, hr.epoch)]
			if !ok {
				t.Errorf("execution %s: a handler ran under epoch %d, which no committed claim took", e.ID, hr.epoch)
				continue
			}
			if i > 0 && runs[i-1].epoch == hr.epoch {
				t.Errorf("execution %s: two handlers ran under one lease (epoch %d)", e.ID, hr.epoch)
			}
			switch a.state {
			case "completed":
				completedRuns++
			case "reclaimed":
				reason := "lease expired, reclaimed"
				if a.revoked {
					reason = "worker swept, reclaimed"
				}
				l.why[reason]++
			default:
				t.Errorf("execution %s: a run under epoch %d whose attempt ended %s", e.ID, hr.epoch, a.state)
			}
			if i > 0 && !runs[i-1].end.IsZero() && runs[i-1].end.After(hr.start.Add(50*time.Millisecond)) {
				t.Errorf("execution %s: epoch %d started %v before epoch %d's handler returned",
					e.ID, hr.epoch, runs[i-1].end.Sub(hr.start), runs[i-1].epoch)
			}
		}
		if completedRuns != 1 {
			t.Errorf("execution %s: %d runs of its completing attempt (runs: %d)", e.ID, completedRuns, len(runs))
		}
		if len(runs) > 1 {
			l.duplicates += len(runs) - 1
			for i := 1; i < len(runs); i++ {
				from := runs[i-1].end
				if from.IsZero() {
					from = runs[i-1].start
				}
				l.rerun = max(l.rerun, runs[i].start.Sub(from))
			}
		}
	}
	if r.tr.noDuplicates && l.duplicates > 0 {
		t.Errorf("%d handlers ran twice where no lease could be lost: %v", l.duplicates, l.why)
	}
	return l
}

// attempts reads every attempt: "execution/epoch" → its state.
func (r *run) attempts() map[string]attempt {
	t := r.t
	out := map[string]attempt{}
	add := func(id string, epoch int64, state string, revoked bool) {
		out[fmt.Sprintf("%s/%d", id, epoch)] = attempt{state: state, revoked: revoked}
	}
	// Attempts that ended without completing are history rows; a completed
	// one is its execution's last lease.
	const query = `SELECT CAST(execution_id AS TEXT), epoch, state, revoked_at_ms IS NOT NULL FROM attempts
		UNION ALL
		SELECT CAST(id AS TEXT), epoch, 'completed', revoked_at_ms IS NOT NULL FROM executions WHERE state = 'completed'`
	if r.tr.postgres {
		conn, err := pgx.Connect(context.Background(), r.loc)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		rows, err := conn.Query(context.Background(), query)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id, state string
			var epoch int64
			var revoked bool
			if err := rows.Scan(&id, &epoch, &state, &revoked); err != nil {
				t.Fatal(err)
			}
			add(id, epoch, state, revoked)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	db, err := sql.Open("sqlite", r.loc)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, state string
		var epoch int64
		var revoked bool
		if err := rows.Scan(&id, &epoch, &state, &revoked); err != nil {
			t.Fatal(err)
		}
		add(id, epoch, state, revoked)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkCancelledAtExpiry: while the server is away (from outageAt after the
// start), every handler that was running lost its lease at the latest
// leaseTTL after the outage began (no renewal got through), and its context
// ended then: none ran on while another worker might reclaim its execution.
func checkCancelledAtExpiry(outageAt, leaseTTL time.Duration) func(t *testing.T, r *run, l *reconciled) {
	return func(t *testing.T, r *run, l *reconciled) {
		outage := r.start.Add(outageAt)
		latest := outage.Add(leaseTTL + 1500*time.Millisecond)
		checked := 0
		for _, runs := range l.byExecution {
			for _, hr := range runs {
				if !hr.start.Before(outage) || (!hr.end.IsZero() && hr.end.Before(outage)) {
					continue
				}
				checked++
				if hr.end.IsZero() || hr.end.After(latest) {
					t.Errorf("a handler running when the server went away ran until %v, past its lease (at the latest %v)",
						hr.end.Sub(outage), latest.Sub(outage))
				}
			}
		}
		if checked == 0 {
			t.Error("no handler was running when the server went away: the trial proves nothing")
		}
	}
}

// requireSentinel fails unless err is one of roster's sentinels.
func requireSentinel(t *testing.T, what string, err error) {
	t.Helper()
	if !isSentinel(err) {
		t.Errorf("%s returned a raw driver error: %v", what, err)
	}
}

// mountTmpfs mounts a tmpfs of size at dir (unmounted when t ends). Where
// mounting is not permitted it skips t, except under CI.
func mountTmpfs(t *testing.T, dir, size string) string {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI must run the disk-full trial, but mounting a tmpfs failed: %v", err)
		}
		t.Skipf("mounting a tmpfs is not permitted here (%v): the disk-full trial is skipped", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// fillDisk writes filler until the file system is full.
func fillDisk(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	block := make([]byte, 64<<10)
	for {
		if _, err := f.Write(block); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return nil
			}
			return err
		}
	}
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))
