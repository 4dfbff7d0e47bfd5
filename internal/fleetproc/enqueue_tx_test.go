package fleetproc

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rosterdb/roster/service"
)

// beginApp begins a transaction of the application's own on db (SQLite: a
// database/sql transaction of modernc.org/sqlite on the file; PostgreSQL: a
// pgx.Tx) and returns it with its commit.
func beginApp(t *testing.T, name, db string) (tx any, commit func() error) {
	t.Helper()
	ctx := context.Background()
	if name == "sqlite" {
		sdb, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(5000)&_txlock=immediate")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sdb.Close() })
		stx, err := sdb.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = stx.Rollback() })
		return stx, stx.Commit
	}
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	ptx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ptx.Rollback(context.Background()) })
	return ptx, func() error { return ptx.Commit(ctx) }
}

// An execution created in the application's own transaction starts on an
// idle worker of another process within moments of the commit (PostgreSQL:
// the NOTIFY sent inside the transaction, delivered at its commit; SQLite:
// the change check), and not before it, however long the transaction stays
// open.
func TestCreateExecutionsTxWakesAnotherProcess(t *testing.T) {
	for name, db := range targets(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s, err := service.Open(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			f := startFlowWorkers(t, db, 1, 1)
			time.Sleep(300 * time.Millisecond) // it found nothing and waits
			tx, commit := beginApp(t, name, db)
			ids, err := s.CreateExecutionsTx(ctx, tx, []service.CreateExecutionArgs{{Namespace: "ns", Lane: "capped", Payload: []byte("g")}})
			if err != nil {
				t.Fatal(err)
			}
			select {
			case id := <-f.starts:
				t.Fatalf("%s started before the commit", id)
			case <-time.After(1500 * time.Millisecond): // past the worker's poll
			}
			committed := time.Now()
			if err := commit(); err != nil {
				t.Fatal(err)
			}
			select {
			case id := <-f.starts:
				d := time.Since(committed)
				if id != ids[0].String() || d > 500*time.Millisecond {
					t.Fatalf("%s started %v after the commit; want %s, woken (not polled)", id, d, ids[0])
				}
				t.Logf("started %v after the commit, in another process", d)
			case <-time.After(5 * time.Second):
				t.Fatal("the commit woke no worker")
			}
		})
	}
}
