package service_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rosterdb/roster/service"
)

// A worker registers, heartbeats, and is listed.
func Example_workerRegistry() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "roster-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := service.Open(ctx, filepath.Join(dir, "fleet.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	outcome, err := store.RegisterWorker(ctx, service.RegisterWorkerArgs{
		Namespace: "prod", WorkerID: "resizer", InstanceID: "host-1:4242",
		Lanes: []string{"images", "thumbnails"}, Capabilities: []string{"gpu"},
		TTL: 30 * time.Second, Now: now,
	})
	if err != nil {
		log.Fatal(err)
	}
	next, err := store.HeartbeatWorker(ctx, service.HeartbeatWorkerArgs{
		Namespace: "prod", InstanceID: "host-1:4242", Now: now.Add(10 * time.Second),
	})
	if err != nil {
		log.Fatal(err)
	}
	page, err := store.ListWorkers(ctx, service.ListWorkersArgs{Namespace: "prod"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(outcome, "- alive until", next.Format(time.TimeOnly))
	for _, w := range page.Workers {
		fmt.Println(w.InstanceID, w.WorkerID, w.Lanes, w.Capabilities)
	}
	// Output:
	// registered - alive until 03:04:45
	// host-1:4242 resizer [images thumbnails] [gpu]
}

// A live worker claims an execution under a lease and completes it; a stale
// holder is fenced out.
func Example_leases() {
	ctx := context.Background()
	store, err := service.Open(ctx, ":memory:")
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

	_, err = store.RegisterWorker(ctx, service.RegisterWorkerArgs{
		Namespace: "prod", WorkerID: "resizer", InstanceID: "w1", Lanes: []string{"images"}, TTL: time.Minute, Now: now,
	})
	if err != nil {
		log.Fatal(err)
	}
	_, err = store.CreateExecution(ctx, service.CreateExecutionArgs{
		Namespace: "prod", Lane: "images", Payload: []byte("resize cat.jpg"), MaxAttempts: 2, Now: now,
	})
	if err != nil {
		log.Fatal(err)
	}
	lease, err := store.ClaimExecution(ctx, service.ClaimArgs{Namespace: "prod", InstanceID: "w1", LeaseTTL: 10 * time.Second, Now: now})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("claimed %q, attempt %d\n", lease.Payload, lease.AttemptIndex)

	// The worker stalls past its lease; the lease is reclaimed and the work retried.
	later := now.Add(11 * time.Second)
	if _, err := store.ReclaimExpiredLeases(ctx, later, 0); err != nil {
		log.Fatal(err)
	}
	err = store.CompleteExecution(ctx, service.CompleteArgs{Lease: lease, Result: []byte("stale"), Now: later})
	fmt.Println("stale holder:", errors.Is(err, service.ErrLeaseLost))

	retry, err := store.ClaimExecution(ctx, service.ClaimArgs{Namespace: "prod", InstanceID: "w1", LeaseTTL: 10 * time.Second, Now: later})
	if err != nil {
		log.Fatal(err)
	}
	if err := store.CompleteExecution(ctx, service.CompleteArgs{Lease: retry, Result: []byte("done"), Now: later}); err != nil {
		log.Fatal(err)
	}
	e, err := store.GetExecution(ctx, retry.ExecutionID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(e.State, string(e.Result), "after", e.Attempts, "attempts,", e.ReclaimCount, "reclaim")
	// Output:
	// claimed "resize cat.jpg", attempt 1
	// stale holder: true
	// completed done after 2 attempts, 1 reclaim
}

// A worker that claimed more than it can start gives the rest back: the
// execution waits again without having spent an attempt, and the released
// lease is fenced like any stale one.
func ExampleStore_ReleaseLease() {
	ctx := context.Background()
	store, err := service.Open(ctx, ":memory:")
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

	_, err = store.RegisterWorker(ctx, service.RegisterWorkerArgs{
		Namespace: "prod", WorkerID: "resizer", InstanceID: "w1", Lanes: []string{"images"}, TTL: time.Minute, Now: now,
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, name := range []string{"cat.jpg", "dog.jpg"} {
		if _, err := store.CreateExecution(ctx, service.CreateExecutionArgs{
			Namespace: "prod", Lane: "images", Payload: []byte(name), Now: now,
		}); err != nil {
			log.Fatal(err)
		}
	}
	leases, err := store.ClaimExecutions(ctx, service.ClaimArgs{Namespace: "prod", InstanceID: "w1", LeaseTTL: time.Minute, Now: now}, 2)
	if err != nil {
		log.Fatal(err)
	}
	// Only one can start now: give the other back.
	if err := store.ReleaseLease(ctx, service.ReleaseArgs{Lease: leases[1], Now: now}); err != nil {
		log.Fatal(err)
	}
	e, err := store.GetExecution(ctx, leases[1].ExecutionID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(e.Payload), e.State, "after", e.Attempts, "attempts")
	err = store.CompleteExecution(ctx, service.CompleteArgs{Lease: leases[1], Now: now})
	fmt.Println("released lease:", errors.Is(err, service.ErrLeaseLost))
	// Output:
	// dog.jpg waiting after 0 attempts
	// released lease: true
}

// An agent runtime spawns an agent idempotently, drives its state machine
// with compare-and-set, and ends every live agent after a host restart.
func Example_agents() {
	ctx := context.Background()
	store, err := service.Open(ctx, ":memory:")
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	spawn := service.Agent{
		ID: "agent-1", State: service.AgentSpawned, Provider: "anthropic", ProviderSessionID: "sess-9",
		OwnerActor: "alice", OwnerPeerClass: "human", OwnerWriteNamespace: "team-a",
		SpawnFingerprint: "sha256:abc", IdempotencyKey: "request-17",
	}
	_, created, err := store.SpawnAgent(ctx, spawn)
	if err != nil {
		log.Fatal(err)
	}
	spawn.ID = "agent-1-retry" // the same request, retried
	again, createdAgain, err := store.SpawnAgent(ctx, spawn)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(created, createdAgain, again.ID)

	err = store.UpdateAgentState(ctx, service.UpdateAgentStateArgs{ID: "agent-1", State: service.AgentRunning, ExpectState: service.AgentSpawned})
	fmt.Println("spawned→running:", err)
	err = store.UpdateAgentState(ctx, service.UpdateAgentStateArgs{ID: "agent-1", State: service.AgentSuspended, ExpectState: service.AgentSpawned})
	fmt.Println("stale compare-and-set:", errors.Is(err, service.ErrConflict))

	n, err := store.TerminateLiveAgents(ctx, time.Time{})
	if err != nil {
		log.Fatal(err)
	}
	a, err := store.GetAgent(ctx, "agent-1")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(n, a.State, a.TerminalReason)
	// Output:
	// true false agent-1
	// spawned→running: <nil>
	// stale compare-and-set: true
	// 1 terminal host_restart
}

// KeepAlive and RunSweeper are the background loops of a worker process and
// of whoever maintains the fleet.
func ExampleStore_KeepAlive() {
	ctx, cancel := context.WithCancel(context.Background())
	store, err := service.Open(ctx, ":memory:")
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	done := make(chan error, 2)
	go func() {
		done <- store.KeepAlive(ctx, service.KeepAliveArgs{
			Namespace: "prod", WorkerID: "resizer", InstanceID: "w1", Lanes: []string{"images"}, TTL: 30 * time.Second,
		})
	}()
	go func() { done <- store.RunSweeper(ctx, service.SweeperArgs{Interval: 5 * time.Second}) }()

	// ... the worker claims and runs executions here ...
	for {
		if _, err := store.GetWorker(ctx, "prod", "w1"); err == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel() // shutdown: KeepAlive marks the worker dead
	fmt.Println(<-done, <-done)
	_, err = store.GetWorker(context.Background(), "prod", "w1")
	fmt.Println(errors.Is(err, service.ErrNotRegistered))
	// Output:
	// <nil> <nil>
	// true
}

// RunWorker is a whole worker process: it registers, claims while handler
// slots are free, renews leases, writes outcomes, and on shutdown drains its
// handlers before it marks the worker dead.
func ExampleStore_RunWorker() {
	ctx, cancel := context.WithCancel(context.Background())
	store, err := service.Open(ctx, ":memory:")
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	for _, word := range []string{"hello", "roster"} {
		if _, err := store.CreateExecution(ctx, service.CreateExecutionArgs{
			Namespace: "prod", Lane: "upper", Payload: []byte(word),
		}); err != nil {
			log.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() {
		done <- store.RunWorker(ctx, service.WorkerArgs{
			Namespace: "prod", WorkerID: "upper", InstanceID: "w1", Lanes: []string{"upper"},
			TTL: 30 * time.Second, Concurrency: 2,
			Handler: func(ctx context.Context, l service.Lease) ([]byte, error) {
				return []byte(strings.ToUpper(string(l.Payload))), nil
			},
		})
	}()
	for {
		page, err := store.ListExecutions(ctx, service.ListExecutionsArgs{Namespace: "prod", State: service.ExecutionCompleted})
		if err != nil {
			log.Fatal(err)
		}
		if len(page.Executions) == 2 {
			for _, e := range page.Executions {
				fmt.Println(string(e.Payload), "->", string(e.Result))
			}
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel() // shutdown: drain, then mark the worker dead
	fmt.Println(<-done)
	// Output:
	// hello -> HELLO
	// roster -> ROSTER
	// <nil>
}

// Stats is the fleet at a glance, read in one consistent snapshot.
func ExampleStore_Stats() {
	ctx := context.Background()
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	store, err := service.Open(ctx, ":memory:", service.WithClock(func() time.Time { return at }))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	if _, err := store.RegisterWorker(ctx, service.RegisterWorkerArgs{
		Namespace: "prod", WorkerID: "resizer", InstanceID: "w1", Lanes: []string{"images"}, TTL: time.Minute,
	}); err != nil {
		log.Fatal(err)
	}
	for _, runAt := range []time.Time{at.Add(-time.Minute), at, at.Add(time.Hour)} {
		if _, err := store.CreateExecution(ctx, service.CreateExecutionArgs{Namespace: "prod", Lane: "images", RunAt: runAt}); err != nil {
			log.Fatal(err)
		}
	}
	st, err := store.Stats(ctx, time.Time{})
	if err != nil {
		log.Fatal(err)
	}
	for _, ns := range st.Namespaces {
		fmt.Printf("%s: %d alive, %d lapsed\n", ns.Namespace, ns.WorkersAlive, ns.WorkersLapsed)
		for _, l := range ns.Lanes {
			fmt.Printf("  %s: %d ready (oldest %v), %d scheduled, %d running\n",
				l.Lane, l.Ready, st.At.Sub(l.OldestReadyRunAt), l.Scheduled, l.Running)
		}
	}
	// Output:
	// prod: 1 alive, 0 lapsed
	//   images: 2 ready (oldest 1m0s), 1 scheduled, 0 running
}

// A producer that retries (a webhook delivered twice) creates one
// execution: the second create with the same UniqueKey returns the first's
// id. With UniqueFor the key stays held after the execution ended.
func Example_uniqueExecutions() {
	ctx := context.Background()
	store, err := service.Open(ctx, ":memory:")
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	delivery := service.CreateExecutionArgs{
		Namespace: "billing", Lane: "webhooks", Payload: []byte(`{"invoice": 42}`),
		UniqueKey: "stripe:evt_42", UniqueFor: 24 * time.Hour, Now: now,
	}
	first, err := store.CreateExecution(ctx, delivery)
	if err != nil {
		log.Fatal(err)
	}
	if err := store.CancelExecution(ctx, service.CancelExecutionArgs{ID: first, Reason: "handled by hand", Now: now}); err != nil {
		log.Fatal(err)
	}
	delivery.Now = now.Add(time.Hour) // the retry arrives an hour later
	again, err := store.CreateExecution(ctx, delivery)
	if err != nil {
		log.Fatal(err)
	}
	delivery.Now = now.Add(25 * time.Hour) // a day later the key is free again
	later, err := store.CreateExecution(ctx, delivery)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("the retry got the first id:", again == first)
	fmt.Println("a day later, a new execution:", later != first)
	// Output:
	// the retry got the first id: true
	// a day later, a new execution: true
}

// A failed execution is redriven once its cause is fixed: it waits again,
// with one more attempt, and keeps its history.
func ExampleStore_RetryExecution() {
	ctx := context.Background()
	store, err := service.Open(ctx, ":memory:")
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if _, err := store.RegisterWorker(ctx, service.RegisterWorkerArgs{
		Namespace: "prod", WorkerID: "mailer", InstanceID: "m-1", Lanes: []string{"mail"}, TTL: time.Minute, Now: now,
	}); err != nil {
		log.Fatal(err)
	}
	id, err := store.CreateExecution(ctx, service.CreateExecutionArgs{Namespace: "prod", Lane: "mail", Now: now})
	if err != nil {
		log.Fatal(err)
	}
	lease, err := store.ClaimExecution(ctx, service.ClaimArgs{Namespace: "prod", InstanceID: "m-1", LeaseTTL: time.Minute, Now: now})
	if err != nil {
		log.Fatal(err)
	}
	if err := store.FailExecution(ctx, service.FailArgs{Lease: lease, Reason: "SMTP relay down", Now: now}); err != nil {
		log.Fatal(err)
	}
	// The relay is back: redrive it.
	if err := store.RetryExecution(ctx, service.RetryExecutionArgs{ID: id, Now: now.Add(time.Minute)}); err != nil {
		log.Fatal(err)
	}
	e, err := store.GetExecution(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s, attempt %d of %d, last error %q\n", e.State, e.Attempts, e.MaxAttempts, e.LastError)
	// Output:
	// waiting, attempt 1 of 2, last error "SMTP relay down"
}

// Every process may run RunSweeper: one of them leads and does the
// maintenance, including the runs of schedules. A schedule creates one
// execution per period, keyed by the period, so no period runs twice.
func ExampleStore_PutSchedule() {
	ctx := context.Background()
	store, err := service.Open(ctx, ":memory:")
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	if err := store.PutSchedule(ctx, service.Schedule{
		Namespace: "prod", Name: "nightly-report", Cron: "0 2 * * *", // 02:00 UTC
		Template: service.CreateExecutionArgs{Lane: "reports", Payload: []byte("yesterday"), MaxAttempts: 3},
	}); err != nil {
		log.Fatal(err)
	}
	scs, err := store.ListSchedules(ctx, "prod")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(scs[0].Name, "next runs at", scs[0].NextRunAt.Format("15:04 MST"))

	// Maintenance in every process: one leads (here the only one).
	ctx, stop := context.WithTimeout(ctx, 200*time.Millisecond)
	defer stop()
	go func() {
		_ = store.RunSweeper(ctx, service.SweeperArgs{Interval: 40 * time.Millisecond, InstanceID: "host-1"})
	}()
	for {
		if leader, _, err := store.Leader(ctx); err == nil && leader != "" {
			fmt.Println("maintenance leader:", leader)
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Output:
	// nightly-report next runs at 02:00 UTC
	// maintenance leader: host-1
}

// An application writes its own row and the execution that processes it in
// one transaction of its own (here database/sql on the same SQLite file;
// on PostgreSQL a *sql.Tx or a pgx.Tx): both exist once it commits, and
// neither if it rolls back. Workers wake at the commit.
func ExampleStore_CreateExecutionsTx() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "roster-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "app.db")
	store, err := service.Open(ctx, path)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	// The application's own connection to the same file.
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_txlock=immediate")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL)"); err != nil {
		log.Fatal(err)
	}

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback() // a no-op once committed
	res, err := tx.ExecContext(ctx, "INSERT INTO orders (item) VALUES ('book')")
	if err != nil {
		log.Fatal(err)
	}
	order, _ := res.LastInsertId()
	ids, err := store.CreateExecutionsTx(ctx, tx, []service.CreateExecutionArgs{{
		Namespace: "shop", Lane: "ship", Payload: fmt.Appendf(nil, "order %d", order),
		UniqueKey: fmt.Sprintf("ship-order-%d", order),
	}})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := store.GetExecution(ctx, ids[0]); errors.Is(err, service.ErrNotFound) {
		fmt.Println("before the commit: no execution")
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
	e, err := store.GetExecution(ctx, ids[0])
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("after the commit: %s %q\n", e.State, e.Payload)
	// Output:
	// before the commit: no execution
	// after the commit: waiting "order 1"
}
