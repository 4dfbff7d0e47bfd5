package service

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver, as an application would use it
	"github.com/lib/pq"                // the "postgres" database/sql driver, another an application may use
	"github.com/rosterdb/roster/internal/pgtest"
)

// appTx is a way an application begins its own transaction on the
// database of a Store: commit and rollback end it, exec runs its own SQL.
type appTx struct {
	tx       any
	exec     func(query string) error
	commit   func() error
	rollback func() error
}

// txKind names a driver the application uses and begins a transaction with
// it on the database at url.
type txKind struct {
	name  string
	begin func(t *testing.T, url string) appTx
}

// txKinds are the transactions an application on backend b may hand to
// CreateExecutionsTx: on SQLite a database/sql transaction of
// modernc.org/sqlite on the file; on PostgreSQL a pgx.Tx and database/sql
// transactions through pgx's stdlib and through lib/pq.
func txKinds(b backend) []txKind {
	ctx := context.Background()
	if !b.postgres {
		return []txKind{{"database/sql+sqlite", func(t *testing.T, path string) appTx {
			db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_txlock=immediate")
			must(t, err)
			t.Cleanup(func() { _ = db.Close() })
			tx, err := db.BeginTx(ctx, nil)
			must(t, err)
			return appTx{tx: tx, exec: func(q string) error { _, err := tx.ExecContext(ctx, q); return err }, commit: tx.Commit, rollback: tx.Rollback}
		}}}
	}
	return []txKind{
		{"pgx", func(t *testing.T, url string) appTx {
			conn, err := pgx.Connect(ctx, url)
			must(t, err)
			t.Cleanup(func() { _ = conn.Close(context.Background()) })
			tx, err := conn.Begin(ctx)
			must(t, err)
			return appTx{tx: tx, exec: func(q string) error { _, err := tx.Exec(ctx, q); return err },
				commit: func() error { return tx.Commit(ctx) }, rollback: func() error { return tx.Rollback(ctx) }}
		}},
		{"database/sql+lib/pq", func(t *testing.T, url string) appTx {
			db, err := sql.Open("postgres", url)
			must(t, err)
			t.Cleanup(func() { _ = db.Close() })
			tx, err := db.BeginTx(ctx, nil)
			must(t, err)
			return appTx{tx: tx, exec: func(q string) error { _, err := tx.ExecContext(ctx, q); return err }, commit: tx.Commit, rollback: tx.Rollback}
		}},
		{"database/sql+pgx-stdlib", func(t *testing.T, url string) appTx {
			db, err := sql.Open("pgx", url)
			must(t, err)
			t.Cleanup(func() { _ = db.Close() })
			tx, err := db.BeginTx(ctx, nil)
			must(t, err)
			return appTx{tx: tx, exec: func(q string) error { _, err := tx.ExecContext(ctx, q); return err }, commit: tx.Commit, rollback: tx.Rollback}
		}},
	}
}

// appURL is where the application's own connections go: the Store's
// database and schema, directly (its own pool, not roster's).
func appURL(t *testing.T, b backend, loc string) string {
	if b.postgres {
		return b.direct(t, loc)
	}
	return loc
}

// TestCreateExecutionsTx: the executions exist exactly when the caller's
// transaction commits (with the application's own row), not before and
// not after a rollback; unique keys hold inside it; Metadata is stored;
// validation comes first and writes nothing.
func TestCreateExecutionsTx(t *testing.T) {
	conformanceShared(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		loc := b.fresh(t)
		s, _ := b.open(t, loc)
		url := appURL(t, b, loc)
		b.exec(t, url, "CREATE TABLE app_orders (id INTEGER PRIMARY KEY)")
		held := create(t, s, CreateExecutionArgs{UniqueKey: "held", Now: t0})
		for _, k := range txKinds(b) {
			t.Run(k.name, func(t *testing.T) {
				ns := "tx-" + strings.ReplaceAll(k.name, "/", "-")
				// Commit: the row and its work together.
				tx := k.begin(t, url)
				must(t, tx.exec("INSERT INTO app_orders (id) VALUES ("+fmt.Sprint(len(ns))+")"))
				ids, err := s.CreateExecutionsTx(ctx, tx.tx, []CreateExecutionArgs{
					{Namespace: ns, Lane: "l", Payload: []byte("a"), Metadata: map[string]string{"k": "v"}},
					{Namespace: ns, Lane: "l", Payload: []byte{0, 1, 2}, RequiredCapabilities: []string{"gpu", "cpu"}, UniqueKey: "k1", Priority: 3},
					{Namespace: ns, Lane: "l", UniqueKey: "k1"},
					{Namespace: "ns", Lane: "default", UniqueKey: "held"},
				})
				must(t, err)
				if len(ids) != 4 || ids[2] != ids[1] || ids[3] != held || ids[0] == ids[1] {
					t.Fatalf("ids %v (held %s)", ids, held)
				}
				if _, err := s.GetExecution(ctx, ids[0]); !errors.Is(err, ErrNotFound) {
					t.Fatalf("before the commit the execution is visible: %v", err)
				}
				must(t, tx.commit())
				e, err := s.GetExecution(ctx, ids[0])
				must(t, err)
				if e.State != ExecutionWaiting || string(e.Payload) != "a" || e.Metadata["k"] != "v" {
					t.Fatalf("after the commit %+v", e)
				}
				e, err = s.GetExecution(ctx, ids[1])
				must(t, err)
				if e.UniqueKey != "k1" || e.Priority != 3 || string(e.Payload) != "\x00\x01\x02" || fmt.Sprint(e.RequiredCapabilities) != "[cpu gpu]" {
					t.Fatalf("the keyed item %+v", e)
				}
				// The key is held for the next create, in or out of a transaction.
				if again := create(t, s, CreateExecutionArgs{Namespace: ns, Lane: "l", UniqueKey: "k1"}); again != ids[1] {
					t.Fatalf("the key made %s, want %s", again, ids[1])
				}

				// Rollback: nothing.
				tx = k.begin(t, url)
				ids, err = s.CreateExecutionsTx(ctx, tx.tx, []CreateExecutionArgs{{Namespace: ns, Lane: "gone"}, {Namespace: ns, Lane: "gone", UniqueKey: "k2"}})
				must(t, err)
				must(t, tx.rollback())
				for _, id := range ids {
					if _, err := s.GetExecution(ctx, id); !errors.Is(err, ErrNotFound) {
						t.Fatalf("a rolled back execution exists: %v", err)
					}
				}

				// Validation first: a bad item writes nothing, and the
				// transaction goes on.
				tx = k.begin(t, url)
				_, err = s.CreateExecutionsTx(ctx, tx.tx, []CreateExecutionArgs{{Namespace: ns, Lane: "bad"}, {Namespace: ns, Lane: ""}})
				if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "[1].Lane") {
					t.Fatalf("bad item: %v", err)
				}
				_, err = s.CreateExecutionsTx(ctx, tx.tx, nil)
				wantErr(t, err, ErrInvalidInput)
				must(t, tx.commit())
				page, err := s.ListExecutions(ctx, ListExecutionsArgs{Namespace: ns, Lane: "bad"})
				must(t, err)
				if len(page.Executions) != 0 {
					t.Fatalf("a refused batch wrote %d", len(page.Executions))
				}
			})
		}
		// The application's rows committed with their work.
		problems, err := s.Check(ctx)
		must(t, err)
		if len(problems) > 0 {
			t.Fatal(problems)
		}
	})
}

// TestCreateExecutionsTxRefused: a tx of another type, nil, or one on
// another database or schema is ErrInvalidInput, with nothing written and
// the caller's transaction left usable; a closed Store is ErrClosed and a
// read-only one ErrReadOnly.
func TestCreateExecutionsTxRefused(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		loc := b.fresh(t)
		s, _ := b.open(t, loc)
		item := []CreateExecutionArgs{{Namespace: "ns", Lane: "l"}}
		for _, tx := range []any{nil, "a string", (*sql.Tx)(nil), struct{}{}} {
			_, err := s.CreateExecutionsTx(ctx, tx, item)
			if !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("tx %#v: err = %v, want ErrInvalidInput", tx, err)
			}
		}
		closed, _ := b.newStore(t)
		must(t, closed.Close())
		_, err := closed.CreateExecutionsTx(ctx, "whatever", nil)
		wantErr(t, err, ErrClosed)
		if b.shared {
			ro, _ := b.open(t, loc, WithReadOnly())
			tx := txKinds(b)[0].begin(t, appURL(t, b, loc))
			_, err := ro.CreateExecutionsTx(ctx, tx.tx, item)
			wantErr(t, err, ErrReadOnly)
			must(t, tx.rollback())
		}
		if !b.shared {
			// A private in-memory database: no other connection reaches it.
			db, err := sql.Open("sqlite", ":memory:")
			must(t, err)
			defer db.Close()
			tx, err := db.Begin()
			must(t, err)
			defer tx.Rollback()
			_, err = s.CreateExecutionsTx(ctx, tx, item)
			wantErr(t, err, ErrInvalidInput)
			return
		}
		var elsewhere string // the same server, another database or schema
		if b.postgres {
			elsewhere = pgtest.Fresh(t)
			other, err := Open(ctx, elsewhere) // a migrated roster schema of its own
			must(t, err)
			must(t, other.Close())
		} else {
			elsewhere = filepath.Join(t.TempDir(), "other.db")
			other, err := Open(ctx, elsewhere)
			must(t, err)
			must(t, other.Close())
		}
		for _, k := range txKinds(b) {
			t.Run(k.name, func(t *testing.T) {
				tx := k.begin(t, elsewhere)
				_, err := s.CreateExecutionsTx(ctx, tx.tx, item)
				if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "tx") {
					t.Fatalf("a tx on another database: err = %v, want ErrInvalidInput", err)
				}
				must(t, tx.commit()) // left usable: the check wrote and broke nothing
				page, err := s.ListExecutions(ctx, ListExecutionsArgs{})
				must(t, err)
				if len(page.Executions) != 0 {
					t.Fatalf("written: %d", len(page.Executions))
				}
				if b.postgres {
					// A schema without roster's tables.
					tx := k.begin(t, pgtest.Fresh(t))
					_, err := s.CreateExecutionsTx(ctx, tx.tx, item)
					wantErr(t, err, ErrInvalidInput)
					must(t, tx.rollback())
				}
			})
		}
		if b.postgres {
			// A namesake: the same database and schema names, another roster
			// schema (as on another server): its identity differs.
			url := appURL(t, b, loc)
			tx := txKinds(b)[0].begin(t, url)
			_, err := s.CreateExecutionsTx(ctx, tx.tx, item) // the Store learns its identity
			must(t, err)
			must(t, tx.rollback())
			b.exec(t, url, "UPDATE roster_identity SET id = '00000000-0000-4000-8000-000000000001'")
			tx = txKinds(b)[0].begin(t, url)
			_, err = s.CreateExecutionsTx(ctx, tx.tx, item)
			if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "namesake") {
				t.Fatalf("a namesake schema: err = %v", err)
			}
			must(t, tx.rollback())
		}
	})
}

// TestCreateExecutionsTxWakesAtCommit: an idle worker of another Store on
// the database (polling once an hour) starts the work within moments of
// the commit, and not while the transaction is open.
func TestCreateExecutionsTxWakesAtCommit(t *testing.T) {
	conformanceShared(t, func(t *testing.T, b backend) {
		if b.pooled {
			t.Skip("behind PgBouncer's transaction pooling no LISTEN: workers poll")
		}
		ctx := context.Background()
		loc := b.fresh(t)
		s, _ := b.open(t, loc, WithClock(time.Now))
		w, _ := b.open(t, loc, WithClock(time.Now), WithWorkerPoll(time.Hour))
		started := make(chan uuid.UUID, 1)
		ready := make(chan struct{})
		stop := runWorker(t, w, WorkerArgs{
			Namespace: "ns", WorkerID: "w", InstanceID: "i", Lanes: []string{"l"}, LeaseTTL: 10 * time.Second,
			Ready:   func() { close(ready) },
			Handler: func(ctx context.Context, l Lease) ([]byte, error) { started <- l.ExecutionID; return nil, nil },
		})
		defer func() { must(t, stop()) }()
		<-ready
		time.Sleep(200 * time.Millisecond) // the worker found nothing and waits
		tx := txKinds(b)[0].begin(t, appURL(t, b, loc))
		ids, err := s.CreateExecutionsTx(ctx, tx.tx, []CreateExecutionArgs{{Namespace: "ns", Lane: "l"}})
		must(t, err)
		select {
		case id := <-started:
			t.Fatalf("%s started before the commit", id)
		case <-time.After(300 * time.Millisecond):
		}
		committed := time.Now()
		must(t, tx.commit())
		select {
		case id := <-started:
			if id != ids[0] {
				t.Fatalf("started %s, want %s", id, ids[0])
			}
			t.Logf("started %v after the commit", time.Since(committed))
		case <-time.After(5 * time.Second):
			t.Fatal("the commit woke no worker")
		}
	})
}

// TestCreateExecutionsTxDriverErrors: an error the caller's driver reports
// inside its transaction maps to the roster error it means on every driver
// (a lock the create could not take in time is ErrUnavailable), and the
// driver's own error stays in the chain for the caller's retry logic (its
// SQLSTATE on PostgreSQL, lib/pq's *pq.Error as pgx's *pgconn.PgError); a
// transaction a failed statement aborted is ErrInvalidInput naming tx.
func TestCreateExecutionsTxDriverErrors(t *testing.T) {
	conformanceShared(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		loc := b.fresh(t)
		s, _ := b.open(t, loc)
		url := appURL(t, b, loc)
		item := []CreateExecutionArgs{{Namespace: "ns", Lane: "l", UniqueKey: "busy"}}
		if !b.postgres {
			// A deferred transaction that read before another connection
			// wrote cannot write: SQLITE_BUSY at its first write.
			db, err := sql.Open("sqlite", "file:"+url+"?_pragma=busy_timeout(50)")
			must(t, err)
			defer db.Close()
			tx, err := db.BeginTx(ctx, nil)
			must(t, err)
			defer tx.Rollback()
			var n int
			must(t, tx.QueryRowContext(ctx, "SELECT count(*) FROM executions").Scan(&n))
			create(t, s, CreateExecutionArgs{Namespace: "ns", Lane: "other"})
			_, err = s.CreateExecutionsTx(ctx, tx, item)
			if !errors.Is(err, ErrUnavailable) {
				t.Fatalf("a stale deferred transaction: err = %v, want ErrUnavailable", err)
			}
			return
		}
		// Another transaction creates the key and stays open: the key's
		// lock is held.
		holder := txKinds(b)[0].begin(t, url)
		_, err := s.CreateExecutionsTx(ctx, holder.tx, item)
		must(t, err)
		defer holder.rollback()
		for _, k := range txKinds(b) {
			t.Run(k.name, func(t *testing.T) {
				tx := k.begin(t, url)
				must(t, tx.exec("SET LOCAL lock_timeout = '50ms'"))
				_, err := s.CreateExecutionsTx(ctx, tx.tx, item)
				if !errors.Is(err, ErrUnavailable) {
					t.Fatalf("a lock not taken in time: err = %v, want ErrUnavailable", err)
				}
				var state interface{ SQLState() string }
				if !errors.As(err, &state) || state.SQLState() != "55P03" {
					t.Fatalf("the driver's error is not in the chain (SQLSTATE 55P03): %#v", err)
				}
				var pe *pgconn.PgError
				if !errors.As(err, &pe) || pe.Code != "55P03" {
					t.Fatalf("no *pgconn.PgError 55P03 in the chain: %#v", err)
				}
				if k.name == "database/sql+lib/pq" {
					var pqe *pq.Error
					if !errors.As(err, &pqe) || pqe.Code != "55P03" {
						t.Fatalf("lib/pq's *pq.Error is not in the chain: %#v", err)
					}
				}
				must(t, tx.rollback())

				// An aborted transaction takes no statement until it rolls back.
				tx = k.begin(t, url)
				if err := tx.exec("SELECT 1/0"); err == nil {
					t.Fatal("1/0 succeeded")
				}
				_, err = s.CreateExecutionsTx(ctx, tx.tx, []CreateExecutionArgs{{Namespace: "ns", Lane: "l"}})
				if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "tx") {
					t.Fatalf("an aborted transaction: err = %v, want ErrInvalidInput naming tx", err)
				}
				must(t, tx.rollback())
			})
		}
		page, err := s.ListExecutions(ctx, ListExecutionsArgs{})
		must(t, err)
		if len(page.Executions) != 0 {
			t.Fatalf("written: %d", len(page.Executions))
		}
	})
}
