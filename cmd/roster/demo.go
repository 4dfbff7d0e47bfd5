package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/rosterdb/roster/service"
)

// demoClock is the demo's virtual clock, so that TTLs lapse without waiting.
type demoClock struct {
	mu sync.Mutex
	t  time.Time
}

// Now returns the virtual time.
func (c *demoClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *demoClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// refuseData refuses a --db that already holds data: the demo sweeps
// workers and ends every live agent, which must never touch a real fleet.
func (c *cli) refuseData(ctx context.Context) error {
	if isURL(c.db) {
		v, _, err := service.SchemaVersion(ctx, c.db)
		if err != nil {
			return err
		}
		if v != -1 {
			return usagef("--db %s already holds a roster database; the demo runs only on a fresh one (omit --db to use a temporary file)", displayDB(c.db))
		}
		return nil
	}
	if info, err := os.Stat(c.db); err == nil && info.Size() > 0 {
		return usagef("--db %s already holds data; the demo runs only on a new or empty file (omit --db to use a temporary file)", displayDB(c.db))
	}
	return nil
}

// demo runs a small fleet end to end: workers register and claim work, one
// crashes and its lease is reclaimed, and an agent runtime spawns, moves and
// finally loses its agents to a host restart.
func demo(ctx context.Context, c *cli, args []string) error {
	c.flags.Lookup("db").DefValue = "(a fresh temporary file)"
	if err := c.parse(args, 0); err != nil {
		return err
	}
	dbSet := false
	c.flags.Visit(func(f *flag.Flag) { dbSet = dbSet || f.Name == "db" })
	path := c.db
	if dbSet {
		if err := c.refuseData(ctx); err != nil {
			return err
		}
	} else {
		dir, err := os.MkdirTemp("", "roster-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		path = filepath.Join(dir, "fleet.db")
	}
	// The demo's clock starts two minutes ago and moves on as the story
	// does (31 s of a crash, a minute to a host restart), so that every time
	// it writes lies in the past of the wall clock when the demo ends.
	clock := &demoClock{t: time.Now().UTC().Add(-2 * time.Minute).Truncate(time.Millisecond)}
	s, err := service.Open(ctx, path, service.WithClock(clock.Now))
	if err != nil {
		return err
	}
	defer s.Close()
	out := c.stdout
	step := func(format string, a ...any) { fmt.Fprintf(out, "\n== "+format+"\n", a...) }
	step("roster demo on %s", displayDB(path))

	// Workers.
	type w struct {
		ns, inst, worker string
		lanes, caps      []string
	}
	fleet := []w{
		{"prod", "resizer-1", "resizer", []string{"images"}, []string{"gpu"}},
		{"prod", "resizer-2", "resizer", []string{"images"}, nil},
		{"staging", "mailer-1", "mailer", []string{"email"}, nil},
	}
	for _, x := range fleet {
		if _, err := s.RegisterWorker(ctx, service.RegisterWorkerArgs{Namespace: x.ns, WorkerID: x.worker, InstanceID: x.inst,
			Lanes: x.lanes, Capabilities: x.caps, TTL: 30 * time.Second}); err != nil {
			return err
		}
	}
	step("three workers registered (TTL 30s)")
	if err := printWorkers(ctx, c, s); err != nil {
		return err
	}

	// Work.
	jobs := []service.CreateExecutionArgs{
		// The job resizer-2 will hold when it crashes: retried (3 attempts),
		// and ahead of owl.jpg, so that it is the one re-claimed.
		{Namespace: "prod", Lane: "images", Payload: []byte("thumbnail cat.jpg"), Priority: 2, MaxAttempts: 3},
		{Namespace: "prod", Lane: "images", Payload: []byte("upscale dog.png"), Priority: 5, RequiredCapabilities: []string{"gpu"}},
		{Namespace: "prod", Lane: "images", Payload: []byte("thumbnail owl.jpg"), Priority: 1},
		{Namespace: "staging", Lane: "email", Payload: []byte("welcome mail"), Priority: 0},
	}
	for _, j := range jobs {
		if _, err := s.CreateExecution(ctx, j); err != nil {
			return err
		}
		clock.advance(time.Millisecond)
	}
	step("four executions queued; workers claim by priority, lane and capability")
	claims := []struct{ ns, inst string }{{"prod", "resizer-2"}, {"prod", "resizer-1"}, {"staging", "mailer-1"}}
	var crashed service.Lease
	for _, cl := range claims {
		l, err := s.ClaimExecution(ctx, service.ClaimArgs{Namespace: cl.ns, InstanceID: cl.inst, LeaseTTL: 20 * time.Second})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%-10s claimed %q (attempt %d, epoch %d, lease until %s)\n", cl.inst, l.Payload, l.AttemptIndex, l.Epoch,
			l.ExpiresAt.Format(time.TimeOnly))
		if cl.inst == "resizer-2" {
			crashed = l // resizer-2 crashes while holding this lease
			continue
		}
		if err := s.CompleteExecution(ctx, service.CompleteArgs{Lease: l, Result: []byte("ok")}); err != nil {
			return err
		}
	}

	step("resizer-2 crashes; 31s pass while the others keep heartbeating")
	clock.advance(15 * time.Second)
	for _, x := range []w{fleet[0], fleet[2]} {
		if _, err := s.HeartbeatWorker(ctx, service.HeartbeatWorkerArgs{Namespace: x.ns, InstanceID: x.inst}); err != nil {
			return err
		}
	}
	clock.advance(16 * time.Second)
	r, err := s.Sweep(ctx, time.Time{}, service.SweeperArgs{EventRetention: -1, ExecutionRetention: -1})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "sweeper: %d worker swept, %d lease reclaimed\n", r.Swept, r.Reclaimed)
	err = s.CompleteExecution(ctx, service.CompleteArgs{Lease: crashed, Result: []byte("late")})
	fmt.Fprintf(out, "resizer-2 comes back and tries to complete: %v\n", err)
	if !errors.Is(err, service.ErrLeaseLost) {
		return fmt.Errorf("the stale lease was not fenced: %v", err)
	}
	l, err := s.ClaimExecution(ctx, service.ClaimArgs{Namespace: "prod", InstanceID: "resizer-1", LeaseTTL: 20 * time.Second})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "resizer-1 re-claims %q (attempt %d, epoch %d)\n", l.Payload, l.AttemptIndex, l.Epoch)
	if l.ExecutionID != crashed.ExecutionID {
		return fmt.Errorf("resizer-1 claimed %q, not the crashed job", l.Payload)
	}
	if err := s.CompleteExecution(ctx, service.CompleteArgs{Lease: l, Result: []byte("ok")}); err != nil {
		return err
	}
	if err := printWorkers(ctx, c, s); err != nil {
		return err
	}
	step("the audit log")
	events, err := s.ListWorkerEvents(ctx, service.ListWorkerEventsArgs{})
	if err != nil {
		return err
	}
	var rows [][]string
	for _, e := range events {
		rows = append(rows, []string{strconv.FormatInt(e.Seq, 10), e.At.Format(time.TimeOnly), e.Namespace, e.InstanceID, string(e.Kind)})
	}
	if err := c.print(events, []string{"SEQ", "AT", "NAMESPACE", "INSTANCE", "KIND"}, rows, ""); err != nil {
		return err
	}

	// Agents.
	step("an agent runtime spawns agents (idempotently) and drives their state")
	spawn := service.Agent{ID: "agent-7", State: service.AgentSpawned, Provider: "anthropic", ProviderSessionID: "sess-42",
		OwnerActor: "alice", OwnerPeerClass: "human", OwnerWriteNamespace: "team-a", OwnerVisibleNamespaces: []string{"shared"},
		SpawnFingerprint: "fp-1", IdempotencyKey: "req-1"}
	for range 2 {
		a, created, err := s.SpawnAgent(ctx, spawn)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "spawn %s with key %s: created=%v\n", a.ID, spawn.IdempotencyKey, created)
		spawn.ID = "agent-7-retry" // a retried request: same key, same fingerprint
	}
	second := spawn
	second.ID, second.ProviderSessionID, second.IdempotencyKey, second.OwnerActor = "agent-8", "sess-43", "", "bob"
	if err := s.InsertAgent(ctx, second); err != nil {
		return err
	}
	for _, u := range []service.UpdateAgentStateArgs{
		{ID: "agent-7", State: service.AgentRunning, ExpectState: service.AgentSpawned},
		{ID: "agent-8", State: service.AgentRunning},
		{ID: "agent-8", State: service.AgentSuspended},
	} {
		if err := s.UpdateAgentState(ctx, u); err != nil {
			return err
		}
	}
	if err := printAgents(ctx, c, s); err != nil {
		return err
	}
	step("the host restarts: the boot scan ends every live agent")
	clock.advance(time.Minute)
	n, err := s.TerminateLiveAgents(ctx, time.Time{})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "terminated %d live agents\n", n)
	return printAgents(ctx, c, s)
}

func printWorkers(ctx context.Context, c *cli, s *service.Store) error {
	page, err := s.ListWorkers(ctx, service.ListWorkersArgs{})
	if err != nil {
		return err
	}
	var rows [][]string
	for _, w := range page.Workers {
		rows = append(rows, []string{w.Namespace, w.InstanceID, w.WorkerID, fmt.Sprint(w.Lanes), fmt.Sprint(w.Capabilities),
			w.ExpiresAt().Format(time.TimeOnly)})
	}
	return c.print(page, []string{"NAMESPACE", "INSTANCE", "WORKER", "LANES", "CAPABILITIES", "EXPIRES"}, rows, "")
}

func printAgents(ctx context.Context, c *cli, s *service.Store) error {
	page, err := s.ListAgents(ctx, service.ListAgentsArgs{})
	if err != nil {
		return err
	}
	var rows [][]string
	for _, a := range page.Agents {
		rows = append(rows, agentRow(a))
	}
	return c.print(page, agentHeader, rows, "")
}
