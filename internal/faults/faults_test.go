// Package faults is roster's fault-injection suite: worker processes (this
// test binary, run again as a child) drain a queue through RunWorker while
// the test hurts what they depend on (a PostgreSQL server of the test's own
// restarted, crashed, its connections killed, taken away; a primary killed
// or stopped and its streaming standby promoted behind a multi-host URL; a
// worker SIGKILLed; the fleet's clock jumping; a full disk), then reconciles
// a ledger of every handler run and every outcome acknowledged with the rows
// the database kept.
package faults

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
	"github.com/rosterdb/roster/internal/diskfull"
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
	longEvery     int           // every longEvery-th execution's handler runs longFor (its first epoch)...
	longFrom      int           // ... from this execution...
	longUntil     int           // ... up to this one
	longFor       time.Duration
	tmpfs         bool          // the database on a small tmpfs of its own
	timeout       time.Duration // each execution's Timeout (0: none)
	// fault hurts the run (times relative to r.start) and returns when the
	// fault ended.
	fault func(r *run) (ended time.Time, err error)
	// noDuplicates: every handler must have run exactly once.
	noDuplicates bool
	// check, optional, checks more of the ledger.
	check func(t *testing.T, r *run, l *reconciled)
	// failover, set: the trial runs on a primary and its streaming standby,
	// every Store on one multi-host URL, a producer creating work
	// throughout, and fault is failoverFault.
	failover *failover
}

// failover says how a failover trial's servers replicate and switch.
type failover struct {
	sync       bool // synchronous replication (else asynchronous)
	freeze     bool // the replication link frozen 1 s before the primary dies
	switchover bool // the primary stopped -m fast, then the standby promoted (else SIGKILLed, promoted 2 s later)
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
	// Failover trials: the standby, when the primary died and when the
	// standby accepted writes, what the producer was told, and the probes.
	standby          *pgserver.Server
	killed, promoted time.Time
	producer         *producer
	probes           map[string][]probe
}

// probesPerWorker is how many probes each worker runs, one after the other.
const probesPerWorker = 5

// probe is an execution in a lane only one worker serves, created once the
// queue drained: how soon it starts says whether the worker listens.
type probe struct {
	id       uuid.UUID
	enqueued time.Time // before CreateExecution was called
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
		// Bound leases (LeaseTTL 0: nothing renewed, the workers'
		// heartbeats keep them): a SIGKILLed worker's executions are
		// reclaimed and run again after its TTL and one sweep; the server
		// away for longer than the TTL: no handler runs past its holder's
		// expiry, and the workers recover by themselves; a Timeout firing
		// while the server is away ends the handler at its deadline.
		{name: "pg-sigkill-worker-bound", postgres: true, executions: 2000, spread: 8 * time.Second,
			ttl: 2 * time.Second, fault: kill},
		{name: "sqlite-sigkill-worker-bound", executions: 2000, spread: 8 * time.Second,
			ttl: 2 * time.Second, fault: kill},
		{
			name: "pg-down-8s-bound", postgres: true, executions: 2000, spread: 20 * time.Second,
			ttl: 3 * time.Second, longEvery: 50, longUntil: 200, longFor: 15 * time.Second,
			fault: func(r *run) (time.Time, error) {
				sleepUntil(r.start.Add(3 * time.Second))
				if err := r.server.Down("immediate"); err != nil {
					return time.Now(), err
				}
				time.Sleep(8 * time.Second)
				return time.Now(), r.server.Up()
			},
			check: checkCancelledAtExpiry(3*time.Second, 3*time.Second),
		},
		{
			name: "pg-timeout-while-down-bound", postgres: true, executions: 1000, spread: 10 * time.Second,
			ttl: 10 * time.Second, timeout: 2 * time.Second, longEvery: 20, longUntil: 400, longFor: 10 * time.Second,
			fault: func(r *run) (time.Time, error) {
				sleepUntil(r.start.Add(3 * time.Second))
				if err := r.server.Down("immediate"); err != nil {
					return time.Now(), err
				}
				time.Sleep(4 * time.Second)
				return time.Now(), r.server.Up()
			},
			check: checkEndedByDeadline(3*time.Second, 4*time.Second, 2*time.Second),
		},
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
				if err := diskfull.Fill(filler); err != nil {
					return time.Now(), err
				}
				time.Sleep(3 * time.Second)
				return time.Now(), os.Remove(filler)
			},
		},
		// Failovers: the queue from 0 to 10 s, the producer creating from 0
		// to 8 s, the primary gone at 4 s. Synchronous, and the planned
		// switchover: a few handlers claimed before the switch run 4 s,
		// across it, renewing their leases on the new primary.
		{name: "pg-failover-sync", postgres: true, failover: &failover{sync: true}, executions: 2000, spread: 10 * time.Second,
			ttl: 5 * time.Second, leaseTTL: 5 * time.Second, longEvery: 50, longFrom: 500, longUntil: 799, longFor: 4 * time.Second,
			fault: failoverFault, check: checkFailover},
		{name: "pg-switchover", postgres: true, failover: &failover{sync: true, switchover: true}, executions: 2000, spread: 10 * time.Second,
			ttl: 5 * time.Second, leaseTTL: 5 * time.Second, longEvery: 50, longFrom: 500, longUntil: 799, longFor: 4 * time.Second,
			fault: failoverFault, check: checkFailover},
		// Asynchronous, the link frozen from 3 s: the claims, outcomes and
		// creates of the last second are lost. Every fourth handler claimed
		// in that second runs 1.5 s: ended before the new primary comes,
		// their outcomes are still to be written then, while the new
		// primary gives their executions (waiting again, their claims lost)
		// to new runs under the same epochs; a lease TTL of 15 s keeps their
		// next renewal (which the new primary would refuse) after that.
		// They end before the promotion because a handler of a lost claim
		// still running then runs beside the new run of its execution until
		// its renewal is refused or its lease expires by its own clock,
		// whatever roster does (about 0.5 s in a variant of this trial with
		// 4 s handlers): only a switch longer than the lease TTL, or
		// synchronous replication, rules that out.
		{name: "pg-failover-async", postgres: true, failover: &failover{freeze: true}, executions: 2000, spread: 10 * time.Second,
			ttl: 5 * time.Second, leaseTTL: 15 * time.Second, longEvery: 4, longFrom: 600, longUntil: 799, longFor: 1500 * time.Millisecond,
			fault: failoverFault, check: checkFailover},
	}
	var reports, failovers []string
	var mu sync.Mutex
	t.Cleanup(func() {
		sort.Strings(reports)
		sort.Strings(failovers)
		t.Logf("fault trials:\n%-28s %10s %10s %6s %10s  %-34s %10s %10s\n%s", "trial", "executions", "completed", "runs",
			"duplicates", "why", "recovery", "rerun", strings.Join(reports, "\n"))
		t.Logf("failover trials (recovery: from the promotion to each worker's first handler start / first outcome written; "+
			"probe: an idle worker's enqueue-to-start, the median of 5 and the slowest):\n%-20s %7s %6s %11s %10s %8s %10s  %-38s %s\n%s",
			"trial", "creates", "lost", "completions", "re-run", "overlaps", "non-holder", "recovery per worker", "probe per worker",
			strings.Join(failovers, "\n"))
		if path := os.Getenv("ROSTER_FAULT_REPORT"); path != "" {
			_ = os.WriteFile(path, []byte(strings.Join(append(reports, failovers...), "\n")+"\n"), 0o644)
		}
	})
	// Three lanes of trials run side by side (the 45 s outage with the
	// bound-lease trials of PostgreSQL in one, the other PostgreSQL trials
	// in another, SQLite's in the third), each lane's trials one after the
	// other: the machine stays loaded enough to be realistic, not so much
	// that timings mean nothing. Then the failovers, one after the other,
	// with nothing beside them: they hold each worker to a recovery within
	// 1 s, made of new connections and first statements on a server just
	// promoted, each of which the other lanes' load slowed two- or
	// threefold (beside them a worker took up to 1.19 s).
	lanes := [][]trial{{}, {}, {}}
	var alone []trial
	for _, tr := range trials {
		switch {
		case tr.failover != nil:
			alone = append(alone, tr)
		case tr.name == "pg-down-45s", tr.postgres && strings.HasSuffix(tr.name, "-bound"):
			lanes[0] = append(lanes[0], tr)
		case tr.postgres:
			lanes[1] = append(lanes[1], tr)
		default:
			lanes[2] = append(lanes[2], tr)
		}
	}
	runLane := func(t *testing.T, lane []trial) {
		for _, tr := range lane {
			t.Run(tr.name, func(t *testing.T) {
				line, failoverLine := runTrial(t, tr)
				mu.Lock()
				reports = append(reports, line)
				if failoverLine != "" {
					failovers = append(failovers, failoverLine)
				}
				mu.Unlock()
			})
		}
	}
	t.Run("lanes", func(t *testing.T) {
		for i, lane := range lanes {
			t.Run(fmt.Sprintf("lane%d", i), func(t *testing.T) {
				t.Parallel()
				runLane(t, lane)
			})
		}
	})
	t.Run("failovers", func(t *testing.T) { runLane(t, alone) })
}

func sleepUntil(at time.Time) { time.Sleep(time.Until(at)) }

// runTrial runs a trial and returns its report line (and, for a failover,
// its line of the failover table).
func runTrial(t *testing.T, tr trial) (string, string) {
	r := &run{t: t, tr: tr, dir: t.TempDir()}
	ctx := context.Background()
	switch {
	case tr.failover != nil:
		r.server, r.standby = startPair(t, tr.failover)
		r.loc = pgserver.MultiHostURL(r.server, r.standby)
	case tr.postgres:
		r.server = pgserver.Start(t)
		r.loc = r.server.URL
	case tr.tmpfs:
		r.loc = filepath.Join(diskfull.Mount(t, filepath.Join(r.dir, "disk"), "24m"), "roster.db")
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
	createAll(t, s, tr.executions, base, tr.spread, tr.timeout)
	for i := range 3 {
		r.workers = append(r.workers, r.startWorker(fmt.Sprintf("w%d", i)))
	}
	r.start = base
	if late := time.Since(base); late > 0 {
		t.Logf("the workers were ready %v after the queue's start", late)
		r.start = time.Now()
	}
	if tr.failover != nil {
		r.producer = r.produce(r.start.Add(8 * time.Second))
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
	if r.producer != nil {
		<-r.producer.done
	}

	// Every execution ends completed.
	deadline := r.start.Add(tr.spread + 90*time.Second)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("executions not completed by the deadline (of %d at least): %s", tr.executions, r.diagnose())
		}
		time.Sleep(200 * time.Millisecond)
		page, err := s.ListExecutions(ctx, service.ListExecutionsArgs{Namespace: "trial", Limit: 10000})
		if err != nil {
			requireSentinel(t, "ListExecutions", err)
			continue
		}
		completed := 0
		for _, e := range page.Executions {
			if e.State == service.ExecutionCompleted {
				completed++
			}
		}
		if completed == len(page.Executions) && completed >= tr.executions {
			break
		}
	}
	// Every surviving worker recovered by itself: each runs probes in a lane
	// only it serves, one after the other, idle in between (an
	// enqueue-to-start of milliseconds says it listens; polling, it would
	// take up to a second). One that does not run its probe is stuck: it
	// prints its goroutines (SIGQUIT) for the log.
	r.probes = map[string][]probe{}
	for _, w := range r.workers {
		if w.killed {
			continue
		}
	probing:
		for range probesPerWorker {
			time.Sleep(20 * time.Millisecond) // idle, listening again
			p := probe{enqueued: time.Now()}
			p.id, err = s.CreateExecution(ctx, service.CreateExecutionArgs{Namespace: "trial", Lane: "probe-" + w.instance, Payload: []byte("probe")})
			if err != nil {
				t.Fatalf("creating a probe of %s: %v", w.instance, err)
			}
			r.probes[w.instance] = append(r.probes[w.instance], p)
			probeDeadline := time.Now().Add(30 * time.Second)
			for {
				e, err := s.GetExecution(ctx, p.id)
				if err == nil && e.State == service.ExecutionCompleted {
					break
				}
				if time.Now().After(probeDeadline) {
					t.Errorf("worker %s did not recover: its probe is %s (%v)", w.instance, e.State, err)
					_ = w.cmd.Process.Signal(syscall.SIGQUIT)
					break probing
				}
				time.Sleep(2 * time.Millisecond)
			}
		}
		_ = w.cmd.Process.Signal(syscall.SIGTERM)
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
	executions := tr.executions
	if r.producer != nil {
		executions += len(r.producer.acked)
	}
	line := fmt.Sprintf("%-28s %10d %10d %6d %10d  %-34s %10v %10v", tr.name, executions, l.completed, l.runs, l.duplicates,
		whyText, l.recovery.Round(10*time.Millisecond), l.rerun.Round(10*time.Millisecond))
	if tr.failover == nil {
		return line, ""
	}
	var recovery, probes []string
	for _, w := range r.workers {
		rec := l.workers[w.instance]
		recovery = append(recovery, fmt.Sprintf("%s %v/%v", w.instance, rec.start.Round(time.Millisecond), rec.written.Round(time.Millisecond)))
		probes = append(probes, fmt.Sprintf("%s %v (%v)", w.instance, rec.probe.Round(100*time.Microsecond), rec.slowestProbe.Round(100*time.Microsecond)))
	}
	return line, fmt.Sprintf("%-20s %7d %6d %11d %10d %8d %10d  %-38s %s", tr.name, len(r.producer.acked)+tr.executions, l.lostCreates,
		l.ackedCompletions, l.lostCompletions, l.overlaps, l.nonHolder, strings.Join(recovery, " "), strings.Join(probes, " "))
}

// startPair starts a primary and its streaming standby (synchronous when f
// says so) and waits until the standby streams.
func startPair(t *testing.T, f *failover) (primary, standby *pgserver.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	primary = pgserver.StartPrimary(t)
	standby = primary.Standby(t, pgserver.StandbyOptions{Name: "standby", Link: f.freeze})
	names := ""
	if f.sync {
		names = standby.Name
	}
	if err := primary.SetSynchronous(ctx, names); err != nil {
		t.Fatal(err)
	}
	if err := primary.WaitStreaming(ctx, standby.Name, f.sync); err != nil {
		t.Fatal(err)
	}
	return primary, standby
}

// failoverFault takes the primary away 4 s after the start and promotes the
// standby: a SIGKILL of the primary's postmaster and the promotion 2 s
// later (the replication link frozen 1 s before the kill, if the trial says
// so), or a planned switchover (stop -m fast, then the promotion). It
// returns when the standby accepted writes.
func failoverFault(r *run) (time.Time, error) {
	const killAt = 4 * time.Second
	f := r.tr.failover
	if f.freeze {
		sleepUntil(r.start.Add(killAt - time.Second))
		r.standby.Link.Freeze()
	}
	sleepUntil(r.start.Add(killAt))
	r.killed = time.Now()
	var err error
	if f.switchover {
		err = r.server.Down("fast")
	} else {
		err = r.server.Kill()
		sleepUntil(r.killed.Add(2 * time.Second))
	}
	if err != nil {
		return time.Now(), err
	}
	err = r.standby.Promote()
	r.promoted = time.Now()
	r.t.Logf("the primary went away at %v; the standby accepted writes %v later",
		r.killed.Sub(r.start).Round(time.Millisecond), r.promoted.Sub(r.killed).Round(time.Millisecond))
	return r.promoted, err
}

// producer creates executions throughout a failover trial and keeps the id
// of every create that returned no error (each was acknowledged) and when
// it returned.
type producer struct {
	acked   []uuid.UUID
	ackedAt []time.Time
	failed  map[string]int // errors by sentinel
	done    chan struct{}
}

// servedAfter is when the first create acknowledged at or after t returned:
// after a promotion, when the new primary first answered a client of its
// own (zero: none did).
func (p *producer) servedAfter(t time.Time) time.Time {
	for _, at := range p.ackedAt {
		if !at.Before(t) {
			return at
		}
	}
	return time.Time{}
}

// produce creates an execution every 10 ms until until, on the trial's
// Store. Every error must be one of roster's sentinels.
func (r *run) produce(until time.Time) *producer {
	p := &producer{failed: map[string]int{}, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for i := 0; time.Now().Before(until); i++ {
			id, err := r.store.CreateExecution(context.Background(), service.CreateExecutionArgs{
				Namespace: "trial", Lane: "work", Payload: []byte("produced-" + strconv.Itoa(i)), MaxAttempts: 50,
			})
			if err != nil {
				requireSentinel(r.t, "CreateExecution", err)
				p.failed[sentinelName(err)]++
			} else {
				p.acked, p.ackedAt = append(p.acked, id), append(p.ackedAt, time.Now())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return p
}

// sentinelName names the sentinel err is.
func sentinelName(err error) string {
	if s := service.Sentinel(err); s != nil {
		return s.Error()
	}
	return "raw"
}

// createAll adds n executions claimable from start, their RunAts spread over
// spread, from 8 goroutines.
func createAll(t *testing.T, s *service.Store, n int, start time.Time, spread, timeout time.Duration) {
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
					RunAt: start.Add(spread * time.Duration(i) / time.Duration(n)), Timeout: timeout,
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
		childLongFrom+"="+strconv.Itoa(r.tr.longFrom), childLongUntil+"="+strconv.Itoa(r.tr.longUntil),
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
	lease      string
	epoch      int64
	start, end time.Time // end zero: the process died first
	cancelled  string    // the context's cause when the handler stopped early
}

// ack is an outcome a worker's runtime said it wrote.
type ack struct {
	worker, execution, lease string
	at                       time.Time
	failed                   bool
}

// attempt is a lease the database kept: an attempt that ended without
// completing (a history row) or the last lease of a completed execution.
type attempt struct {
	execution string
	state     string
	revoked   bool
}

// kept is what a completed execution's row holds: its last lease and its
// result.
type kept struct {
	epoch         int64
	lease, holder string
	result        string
}

// recovered is one worker's recovery after a failover: from the promotion
// to its first handler start and to its first outcome written, and its
// probes' enqueue-to-start (the median and the slowest).
type recovered struct {
	start, written      time.Duration
	probe, slowestProbe time.Duration
}

// reconciled is what the ledgers and the database say together.
type reconciled struct {
	runs, completed, duplicates int
	why                         map[string]int // the duplicates' earlier runs: how each lease was lost
	recovery                    time.Duration  // from the fault's end to the next handler start
	rerun                       time.Duration  // the longest wait of an execution whose lease was lost for its next run
	byExecution                 map[string][]*handlerRun
	// Acknowledged completions, and those whose execution was run again
	// afterwards (the database did not keep them); runs of one execution
	// that overlapped; completed executions whose result is not their
	// lease's run's; runs whose claim the database does not know (lost with
	// a primary's history); acknowledged creates missing.
	ackedCompletions, lostCompletions int
	overlaps, nonHolder, lostClaims   int
	lostCreates                       int
	workers                           map[string]recovered
}

// readLedgers reads every worker's ledger: the handler runs (by execution)
// and the outcomes acknowledged.
func (r *run) readLedgers(l *reconciled) []ack {
	t := r.t
	var acks []ack
	leases := map[string]*handlerRun{}
	for _, w := range r.workers {
		f, err := os.Open(w.ledger)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			switch fields[0] {
			case "start":
				epoch, _ := strconv.ParseInt(fields[2], 10, 64)
				ns, _ := strconv.ParseInt(fields[4], 10, 64)
				hr := &handlerRun{worker: w.instance, execution: fields[1], epoch: epoch, lease: fields[3], start: time.Unix(0, ns)}
				if prev := leases[hr.lease]; prev != nil {
					t.Errorf("execution %s: two handlers ran under one lease %s (%s and %s)", hr.execution, hr.lease, prev.worker, hr.worker)
				}
				leases[hr.lease] = hr
				l.byExecution[hr.execution] = append(l.byExecution[hr.execution], hr)
			case "end", "cancel":
				ns, _ := strconv.ParseInt(fields[4], 10, 64)
				if hr := leases[fields[3]]; hr != nil {
					hr.end = time.Unix(0, ns)
					if fields[0] == "cancel" {
						hr.cancelled = strings.Join(fields[5:], " ")
					}
				}
			case "written":
				ns, _ := strconv.ParseInt(fields[4], 10, 64)
				acks = append(acks, ack{worker: w.instance, execution: fields[1], lease: fields[3], at: time.Unix(0, ns), failed: fields[5] == "true"})
			case "raw":
				t.Errorf("worker %s logged a raw driver error: %s", w.instance, sc.Text())
			}
		}
		f.Close()
	}
	return acks
}

// reconcile reads every ledger and the database and checks the runtime's
// promises against each other: every execution completed; a handler ran
// only for a lease whose claim committed (on a failover: or was lost with
// the old primary's history), once per lease; a handler ran twice only where
// its first lease was truly lost (its attempt reclaimed, or its history
// lost); runs of one execution never overlapped; every completed
// execution's result came from the run of the lease its row holds (no
// result of a non-holder passed the fence); an acknowledged completion was
// kept, its execution never run again (but where a failover lost history);
// no raw driver error was logged; every surviving worker recovered by
// itself.
func (r *run) reconcile(faultEnd time.Time) *reconciled {
	t := r.t
	l := &reconciled{why: map[string]int{}, byExecution: map[string][]*handlerRun{}, workers: map[string]recovered{}}
	acks := r.readLedgers(l)
	acked := map[string]bool{} // leases whose completion was acknowledged
	for _, a := range acks {
		if !a.failed {
			acked[a.lease] = true
		}
	}
	attempts, rows := r.attempts(), r.completedRows()
	page, err := r.store.ListExecutions(context.Background(), service.ListExecutionsArgs{Namespace: "trial", Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	exists := map[uuid.UUID]bool{}
	for _, e := range page.Executions {
		exists[e.ID] = true
		if e.State != service.ExecutionCompleted {
			t.Errorf("execution %s ended %s (%s)", e.ID, e.State, e.LastError)
			continue
		}
		runs := l.byExecution[e.ID.String()]
		if e.Lane == "work" { // not a probe
			l.completed++
			l.runs += len(runs)
		}
		row := rows[e.ID.String()]
		if want := fmt.Sprintf("%s %d %s", row.holder, row.epoch, row.lease); row.result != want {
			l.nonHolder++
			t.Errorf("execution %s kept the result %q, but its lease is %q: a result from a non-holder passed the fence", e.ID, row.result, want)
		}
		sort.Slice(runs, func(i, j int) bool { return runs[i].start.Before(runs[j].start) })
		completing := 0
		var lastEnd time.Time // the latest end of the runs started before
		for i, hr := range runs {
			if hr.lease == row.lease {
				completing++
			} else {
				a, ok := attempts[hr.lease]
				switch {
				case ok && a.state == "reclaimed" && a.revoked:
					l.why["worker swept, reclaimed"]++
				case ok && a.state == "reclaimed":
					l.why["lease expired, reclaimed"]++
				case ok && a.state == "released":
					// A bound lease's handler stopped when its holder's
					// expiry, as last proved, passed; the heartbeat had
					// held after all, and the lease was given back.
					l.why["stopped at its holder's expiry, given back"]++
				case ok:
					t.Errorf("execution %s: a run under lease %s (epoch %d) whose attempt ended %s", e.ID, hr.lease, hr.epoch, a.state)
				case r.tr.failover != nil && acked[hr.lease]:
					l.why["completion lost in the failover"]++
				case r.tr.failover != nil:
					l.why["claim lost in the failover"]++
					l.lostClaims++
				default:
					t.Errorf("execution %s: a handler ran under lease %s (epoch %d), which no committed claim took", e.ID, hr.lease, hr.epoch)
				}
			}
			if i > 0 && !lastEnd.IsZero() && lastEnd.After(hr.start.Add(50*time.Millisecond)) {
				l.overlaps++
				t.Errorf("execution %s: %s's run (lease %s, epoch %d) started %v before an earlier run's handler returned",
					e.ID, hr.worker, hr.lease, hr.epoch, lastEnd.Sub(hr.start))
			}
			if hr.end.After(lastEnd) {
				lastEnd = hr.end
			}
			if hr.start.After(faultEnd) {
				if d := hr.start.Sub(faultEnd); l.recovery == 0 || d < l.recovery {
					l.recovery = d
				}
			}
		}
		if completing != 1 {
			t.Errorf("execution %s: %d runs of its completing lease %s (runs: %d)", e.ID, completing, row.lease, len(runs))
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
	// An acknowledged completion is the one its execution kept.
	for _, a := range acks {
		if a.failed {
			continue
		}
		l.ackedCompletions++
		if rows[a.execution].lease != a.lease {
			l.lostCompletions++
			if r.tr.failover == nil || r.tr.failover.sync {
				t.Errorf("execution %s: %s's completion under lease %s was acknowledged, but the execution kept lease %q",
					a.execution, a.worker, a.lease, rows[a.execution].lease)
			}
		}
	}
	if r.producer != nil {
		for _, id := range r.producer.acked {
			if !exists[id] {
				l.lostCreates++
			}
		}
	}
	if r.tr.noDuplicates && l.duplicates > 0 {
		t.Errorf("%d handlers ran twice where no lease could be lost: %v", l.duplicates, l.why)
	}
	if !r.promoted.IsZero() {
		for _, w := range r.workers {
			rec := recovered{start: -1, written: -1, probe: -1, slowestProbe: -1}
			for _, runs := range l.byExecution {
				for _, hr := range runs {
					if d := hr.start.Sub(r.promoted); hr.worker == w.instance && d >= 0 && (rec.start < 0 || d < rec.start) {
						rec.start = d
					}
				}
			}
			for _, a := range acks {
				if d := a.at.Sub(r.promoted); a.worker == w.instance && d >= 0 && (rec.written < 0 || d < rec.written) {
					rec.written = d
				}
			}
			var waits []time.Duration
			for _, p := range r.probes[w.instance] {
				if runs := l.byExecution[p.id.String()]; len(runs) > 0 {
					waits = append(waits, runs[0].start.Sub(p.enqueued))
				}
			}
			if len(waits) == probesPerWorker {
				slices.Sort(waits)
				rec.probe, rec.slowestProbe = waits[len(waits)/2], waits[len(waits)-1]
			}
			l.workers[w.instance] = rec
		}
	}
	return l
}

// checkFailover checks a failover trial's promises. Every trial: no result
// from a non-holder kept and no overlapping runs (reconcile). Synchronous
// replication and the switchover lose nothing: every acknowledged create
// exists, every acknowledged completion was kept, every run's claim is
// known; and every worker recovered by itself on the new primary: its first
// handler start and its first outcome written within 1 s of the new primary
// serving, and, idle, it starts new work within 50 ms (it listens there).
// The asynchronous trial reports what it lost.
//
// The new primary serves from its promotion, or, when it answers its first
// clients later than that, from its first answer to the producer (a create
// every 10 ms, by a Store of the test's own), at most 1 s later: on a loaded
// machine a server just promoted can take most of a second to answer the
// first statements of its new connections, and a worker that asked at once,
// as the producer did, waits for that too.
func checkFailover(t *testing.T, r *run, l *reconciled) {
	f := r.tr.failover
	t.Logf("%s: %d creates acknowledged (%d lost), %d failed (%v); %d completions acknowledged (%d re-run); %d runs' claims lost; duplicates: %v",
		r.tr.name, len(r.producer.acked), l.lostCreates, sum(r.producer.failed), r.producer.failed, l.ackedCompletions, l.lostCompletions,
		l.lostClaims, l.why)
	// From the promotion to the new primary's first answer, when later; at
	// most 1 s: the producer is a Store too, and a slowness of roster's own
	// in reaching a new primary must not hide behind it.
	late := time.Duration(0)
	if served := r.producer.servedAfter(r.promoted); !served.IsZero() {
		late = served.Sub(r.promoted)
	}
	t.Logf("the new primary acknowledged its first create %v after the promotion", late)
	late = min(late, time.Second)
	for _, w := range r.workers {
		rec := l.workers[w.instance]
		t.Logf("worker %s: first handler start %v, first outcome written %v after the promotion; probes started %v after their enqueue (median; the slowest %v)",
			w.instance, rec.start, rec.written, rec.probe, rec.slowestProbe)
		if !f.sync {
			continue
		}
		if bound := late + time.Second; rec.start < 0 || rec.start > bound || rec.written < 0 || rec.written > bound {
			t.Errorf("worker %s did not recover on the new primary within 1 s of its serving (%v after the promotion): first start %v, first outcome %v after the promotion",
				w.instance, late, rec.start, rec.written)
		}
		if rec.probe < 0 || rec.probe > 50*time.Millisecond {
			t.Errorf("worker %s, idle on the new primary, started new work %v after it was enqueued (median of %d): it does not listen there",
				w.instance, rec.probe, probesPerWorker)
		}
	}
	if !f.sync {
		return
	}
	if l.lostCreates > 0 {
		t.Errorf("%d acknowledged creates are missing after a synchronous failover", l.lostCreates)
	}
	if l.lostClaims > 0 {
		t.Errorf("%d handlers ran under leases the new primary does not know, after a synchronous failover", l.lostClaims)
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// rowScanner is what pgx.Rows and *sql.Rows share.
type rowScanner interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// query runs a query on the trial's database (PostgreSQL or SQLite) and
// scans each row.
func (r *run) query(query string, scan func(rows rowScanner) error) {
	t := r.t
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
		defer rows.Close()
		for rows.Next() {
			if err := scan(rows); err != nil {
				t.Fatal(err)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return
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
		if err := scan(rows); err != nil {
			t.Fatal(err)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// attempts reads every lease the database kept: lease id → its attempt.
// Attempts that ended without completing are history rows; a completed one
// is its execution's last lease.
func (r *run) attempts() map[string]attempt {
	out := map[string]attempt{}
	r.query(`SELECT CAST(lease_id AS TEXT), CAST(execution_id AS TEXT), state, revoked_at_ms IS NOT NULL FROM attempts
		UNION ALL
		SELECT CAST(lease_id AS TEXT), CAST(id AS TEXT), 'completed', revoked_at_ms IS NOT NULL FROM executions WHERE state = 'completed'`,
		func(rows rowScanner) error {
			var lease string
			var a attempt
			if err := rows.Scan(&lease, &a.execution, &a.state, &a.revoked); err != nil {
				return err
			}
			out[lease] = a
			return nil
		})
	return out
}

// diagnose says where a trial that did not finish stands: its executions
// by state, the registry's events by worker and kind (a worker swept again
// and again churns its leases), a few of the executions still running with
// their holders, what the workers' ledgers say of those, and the end of
// each worker's log.
func (r *run) diagnose() string {
	var b strings.Builder
	for _, q := range []string{
		`SELECT state, CAST(COUNT(*) AS TEXT) FROM executions GROUP BY state ORDER BY state`,
		`SELECT instance_id || ' ' || kind, CAST(COUNT(*) AS TEXT) FROM worker_events WHERE kind <> 'heartbeat' GROUP BY instance_id, kind ORDER BY instance_id, kind`,
		`SELECT 'running ' || CAST(x.id AS TEXT) || ' lease ' || CAST(x.lease_id AS TEXT) || ' holder ' || x.holder,
			'epoch ' || CAST(x.epoch AS TEXT) || ' bound ' || CAST(x.bound AS TEXT) ||
			' expires ' || CAST(x.expires_at_ms AS TEXT) || ' revoked ' || COALESCE(CAST(x.revoked_at_ms AS TEXT), '-') ||
			' holder expires ' || COALESCE(CAST(w.last_heartbeat_ms + w.ttl_ms AS TEXT), '-') ||
			' holder registered ' || COALESCE(CAST(w.registered_at_ms AS TEXT), '-')
		FROM executions AS x LEFT JOIN workers AS w ON w.namespace = x.namespace AND w.instance_id = x.holder
		WHERE x.state = 'running' LIMIT 5`,
		`SELECT instance_id || ' ' || kind || ' at', CAST(at_ms AS TEXT) FROM worker_events WHERE kind <> 'heartbeat' ORDER BY seq`,
	} {
		r.query(q, func(rows rowScanner) error {
			var k, n string
			if err := rows.Scan(&k, &n); err != nil {
				return err
			}
			fmt.Fprintf(&b, "%s: %s; ", k, n)
			return nil
		})
	}
	var stuck []string
	r.query(`SELECT CAST(lease_id AS TEXT) FROM executions WHERE state = 'running' LIMIT 5`, func(rows rowScanner) error {
		var id string
		err := rows.Scan(&id)
		stuck = append(stuck, id)
		return err
	})
	for _, w := range r.workers {
		led, _ := os.ReadFile(w.ledger)
		for _, line := range strings.Split(string(led), "\n") {
			for _, id := range stuck {
				if strings.Contains(line, id) {
					fmt.Fprintf(&b, "\n%s ledger: %s", w.instance, line)
				}
			}
		}
		errs := w.stderr.String()
		fmt.Fprintf(&b, "\n%s stderr (%d bytes), the last 3000: %s", w.instance, len(errs), errs[max(0, len(errs)-3000):])
	}
	return b.String()
}

// completedRows reads every completed execution's last lease and result.
func (r *run) completedRows() map[string]kept {
	out := map[string]kept{}
	r.query(`SELECT CAST(id AS TEXT), epoch, CAST(lease_id AS TEXT), holder, result FROM executions WHERE state = 'completed'`,
		func(rows rowScanner) error {
			var id string
			var k kept
			var result []byte
			if err := rows.Scan(&id, &k.epoch, &k.lease, &k.holder, &result); err != nil {
				return err
			}
			k.result = string(result)
			out[id] = k
			return nil
		})
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

// checkEndedByDeadline checks that every handler run ended by its deadline
// (its start + timeout, with a little slack for the ledger's own clock), and
// that some deadlines fell while the server was away (from outageAt, for
// outageFor), so the trial proves the timeout ends a run without the
// database.
func checkEndedByDeadline(outageAt, outageFor, timeout time.Duration) func(t *testing.T, r *run, l *reconciled) {
	return func(t *testing.T, r *run, l *reconciled) {
		from, to := r.start.Add(outageAt), r.start.Add(outageAt+outageFor)
		during := 0
		for _, runs := range l.byExecution {
			for _, hr := range runs {
				deadline := hr.start.Add(timeout)
				if hr.end.IsZero() || hr.end.After(deadline.Add(500*time.Millisecond)) {
					t.Errorf("a handler started at %v ran until %v, past its deadline", hr.start.Sub(r.start), hr.end.Sub(r.start))
				}
				if hr.cancelled != "" && deadline.After(from) && deadline.Before(to) {
					during++
				}
			}
		}
		if during == 0 {
			t.Error("no run reached its deadline while the server was away: the trial proves nothing")
		}
	}
}

// requireSentinel fails unless err is one of roster's sentinels.
func requireSentinel(t *testing.T, what string, err error) {
	t.Helper()
	if !service.IsSentinel(err) {
		t.Errorf("%s returned a raw driver error: %v", what, err)
	}
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))
