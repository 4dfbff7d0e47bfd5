package service

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/uuid"
	"github.com/rosterdb/roster/db"
	"github.com/rosterdb/roster/schema"
)

// withMigrations substitutes the embedded migrations (tests only).
func withMigrations(fsys fs.FS) Option { return func(c *config) { c.migrations = fsys } }

// migrationsUpTo returns the embedded migrations numbered <= n, plus extra files.
func migrationsUpTo(t *testing.T, n int, extra map[string]string) fstest.MapFS {
	t.Helper()
	out := fstest.MapFS{}
	entries, err := fs.ReadDir(schema.FS, ".")
	must(t, err)
	for _, e := range entries {
		var v int
		if _, err := fmt.Sscanf(e.Name(), "%d_", &v); err != nil || v > n {
			continue
		}
		b, err := fs.ReadFile(schema.FS, e.Name())
		must(t, err)
		out[e.Name()] = &fstest.MapFile{Data: b}
	}
	for name, body := range extra {
		out[name] = &fstest.MapFile{Data: []byte(body)}
	}
	return out
}

func schemaVersion(t *testing.T, path string) (int, bool) {
	t.Helper()
	conn, err := sql.Open("sqlite", path)
	must(t, err)
	defer conn.Close()
	var v int
	var dirty bool
	must(t, conn.QueryRow("SELECT version, dirty FROM schema_migrations").Scan(&v, &dirty))
	return v, dirty
}

func tableExists(t *testing.T, path, table string) bool {
	t.Helper()
	conn, err := sql.Open("sqlite", path)
	must(t, err)
	defer conn.Close()
	var n int
	must(t, conn.QueryRow("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?", table).Scan(&n))
	return n == 1
}

func TestOpenCloseReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "fleet.db")
	s, err := Open(ctx, path)
	must(t, err)
	_, err = s.RegisterWorker(ctx, RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "i", TTL: time.Hour})
	must(t, err)
	must(t, s.Close())

	s, err = Open(ctx, path)
	must(t, err)
	defer s.Close()
	w, err := s.GetWorker(ctx, "ns", "i")
	must(t, err)
	if w.WorkerID != "w" {
		t.Fatalf("after reopen: worker %+v", w)
	}
	latest, err := fs.Glob(schema.FS, "*.up.sql")
	must(t, err)
	if v, dirty := schemaVersion(t, path); v != len(latest) || dirty {
		t.Fatalf("schema version %d dirty=%v, want %d clean", v, dirty, len(latest))
	}
}

func TestFileModeAndPragmas(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  Option
		sync int
	}{
		{"full", WithDurability(DurabilityFull), 2},
		{"normal", WithDurability(DurabilityNormal), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _, path := newFileStore(t, tc.opt)
			_, err := s.RegisterWorker(context.Background(), RegisterWorkerArgs{Namespace: "n", WorkerID: "w", InstanceID: "i", TTL: time.Second})
			must(t, err)
			for _, f := range []string{path, path + "-wal", path + "-shm"} {
				info, err := os.Stat(f)
				must(t, err)
				if info.Mode().Perm() != 0o600 {
					t.Fatalf("%s: mode = %v, want 0600", filepath.Base(f), info.Mode().Perm())
				}
			}
			var mode string
			var sync, fk int
			must(t, s.writer.QueryRow("PRAGMA journal_mode").Scan(&mode))
			must(t, s.writer.QueryRow("PRAGMA synchronous").Scan(&sync))
			must(t, s.writer.QueryRow("PRAGMA foreign_keys").Scan(&fk))
			if mode != "wal" || sync != tc.sync || fk != 1 {
				t.Fatalf("journal_mode=%s synchronous=%d foreign_keys=%d", mode, sync, fk)
			}
			// The read pool cannot write.
			_, err = s.reader.Exec("DELETE FROM workers")
			if err == nil {
				t.Fatal("a write on the read pool succeeded")
			}
		})
	}
}

func TestInMemoryStoresAreIndependent(t *testing.T) {
	ctx := context.Background()
	a, _ := newStore(t)
	b, _ := newStore(t)
	_, err := a.RegisterWorker(ctx, RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "i", TTL: time.Hour})
	must(t, err)
	if _, err := b.GetWorker(ctx, "ns", "i"); !errors.Is(err, ErrNotRegistered) {
		t.Fatalf("second in-memory store sees the first's worker: %v", err)
	}
	page, err := b.ListWorkers(ctx, ListWorkersArgs{})
	must(t, err)
	if len(page.Workers) != 0 {
		t.Fatalf("second in-memory store lists %d workers", len(page.Workers))
	}
}

func TestParallelOpensOfNewFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "new.db")
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	storesOut := make([]*Store, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			storesOut[i], errs[i] = Open(ctx, path)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Open #%d: %v", i, err)
		}
		defer storesOut[i].Close()
	}
	latest, err := fs.Glob(schema.FS, "*.up.sql")
	must(t, err)
	if v, dirty := schemaVersion(t, path); v != len(latest) || dirty {
		t.Fatalf("schema version %d dirty=%v", v, dirty)
	}
	// Every Store works on the shared file.
	for i, s := range storesOut {
		_, err := s.RegisterWorker(ctx, RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: string(rune('a' + i)), TTL: time.Hour})
		must(t, err)
	}
	page, err := storesOut[0].ListWorkers(ctx, ListWorkersArgs{Namespace: "ns"})
	must(t, err)
	if len(page.Workers) != n {
		t.Fatalf("%d workers, want %d", len(page.Workers), n)
	}
}

func TestSchemaTooNew(t *testing.T) {
	ctx := context.Background()
	_, _, path := newFileStore(t)
	conn, err := sql.Open("sqlite", path)
	must(t, err)
	_, err = conn.Exec("UPDATE schema_migrations SET version = 999")
	must(t, err)
	must(t, conn.Close())
	before, err := os.ReadFile(path)
	must(t, err)

	for _, opts := range [][]Option{nil, {WithoutMigrate()}} {
		_, err = Open(ctx, path, opts...)
		wantErr(t, err, ErrSchemaTooNew)
	}
	if v, dirty := schemaVersion(t, path); v != 999 || dirty {
		t.Fatalf("version %d dirty=%v after refusal", v, dirty)
	}
	after, err := os.ReadFile(path)
	must(t, err)
	if string(before) != string(after) {
		t.Fatal("the refused Open changed the database file")
	}
}

func TestWithoutMigrate(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	s, err := Open(ctx, path, withMigrations(migrationsUpTo(t, 1, nil)))
	must(t, err)
	must(t, s.Close())

	_, err = Open(ctx, path, WithoutMigrate())
	wantErr(t, err, ErrSchemaOutdated)
	if v, _ := schemaVersion(t, path); v != 1 {
		t.Fatalf("WithoutMigrate changed the version to %d", v)
	}
	s, err = Open(ctx, path) // migrates
	must(t, err)
	must(t, s.Close())
	s, err = Open(ctx, path, WithoutMigrate()) // now current
	must(t, err)
	must(t, s.Close())

	// A brand-new file is outdated too, and is left without tables.
	fresh := filepath.Join(t.TempDir(), "fresh.db")
	_, err = Open(ctx, fresh, WithoutMigrate())
	wantErr(t, err, ErrSchemaOutdated)
	if tableExists(t, fresh, "workers") {
		t.Fatal("WithoutMigrate created tables")
	}
}

func TestFailedMigrationLeavesPreviousVersionUsable(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "fail.db")
	s, err := Open(ctx, path, withMigrations(migrationsUpTo(t, 1, nil)))
	must(t, err)
	_, err = s.RegisterWorker(ctx, RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "i", TTL: time.Hour})
	must(t, err)
	must(t, s.Close())

	// Migration 2 creates a table, then fails: nothing of it may remain.
	broken := migrationsUpTo(t, 1, map[string]string{
		"0002_broken.up.sql":   "CREATE TABLE half_done (x INTEGER) STRICT; INSERT INTO no_such_table VALUES (1);",
		"0002_broken.down.sql": "DROP TABLE half_done;",
	})
	_, err = Open(ctx, path, withMigrations(broken))
	if err == nil {
		t.Fatal("Open with a failing migration succeeded")
	}
	if v, dirty := schemaVersion(t, path); v != 1 || dirty {
		t.Fatalf("after failure: version %d dirty=%v, want 1 clean", v, dirty)
	}
	if tableExists(t, path, "half_done") {
		t.Fatal("the failed migration left a table behind")
	}
	// The previous version still works, and a fixed migration applies next time.
	s, err = Open(ctx, path, withMigrations(migrationsUpTo(t, 1, nil)))
	must(t, err)
	if _, err := s.GetWorker(ctx, "ns", "i"); err != nil {
		t.Fatalf("previous version unusable: %v", err)
	}
	must(t, s.Close())
	fixed := migrationsUpTo(t, 1, map[string]string{
		"0002_fixed.up.sql":   "CREATE TABLE half_done (x INTEGER) STRICT;",
		"0002_fixed.down.sql": "DROP TABLE half_done;",
	})
	s, err = Open(ctx, path, withMigrations(fixed))
	must(t, err)
	must(t, s.Close())
	if v, dirty := schemaVersion(t, path); v != 2 || dirty {
		t.Fatalf("after fix: version %d dirty=%v", v, dirty)
	}
}

func TestErrClosed(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newFileStore(t)
	must(t, s.Close())
	calls := map[string]func() error{
		"RegisterWorker": func() error {
			_, err := s.RegisterWorker(ctx, RegisterWorkerArgs{Namespace: "n", WorkerID: "w", InstanceID: "i", TTL: time.Second})
			return err
		},
		"HeartbeatWorker": func() error {
			_, err := s.HeartbeatWorker(ctx, HeartbeatWorkerArgs{Namespace: "n", InstanceID: "i"})
			return err
		},
		"GetWorker":   func() error { _, err := s.GetWorker(ctx, "n", "i"); return err },
		"ListWorkers": func() error { _, err := s.ListWorkers(ctx, ListWorkersArgs{}); return err },
		"SweepExpiredWorkers": func() error {
			_, err := s.SweepExpiredWorkers(ctx, time.Time{})
			return err
		},
		"ListWorkerEvents": func() error { _, err := s.ListWorkerEvents(ctx, ListWorkerEventsArgs{}); return err },
		"MarkWorkerDead": func() error {
			return s.MarkWorkerDead(ctx, MarkWorkerDeadArgs{Namespace: "n", InstanceID: "i"})
		},
		"PruneWorkerEvents": func() error { _, err := s.PruneWorkerEvents(ctx, time.Time{}); return err },
		"CreateExecution": func() error {
			_, err := s.CreateExecution(ctx, CreateExecutionArgs{Namespace: "n", Lane: "l"})
			return err
		},
		"GetExecution": func() error { _, err := s.GetExecution(ctx, uuid.New()); return err },
		"ClaimExecution": func() error {
			_, err := s.ClaimExecution(ctx, ClaimArgs{Namespace: "n", InstanceID: "i", LeaseTTL: time.Second})
			return err
		},
		"RenewLease": func() error {
			_, err := s.RenewLease(ctx, RenewLeaseArgs{TTL: time.Second})
			return err
		},
		"CompleteExecution":    func() error { return s.CompleteExecution(ctx, CompleteArgs{}) },
		"FailExecution":        func() error { return s.FailExecution(ctx, FailArgs{}) },
		"ListExpiredLeases":    func() error { _, err := s.ListExpiredLeases(ctx, ListExpiredLeasesArgs{}); return err },
		"ReclaimExpiredLeases": func() error { _, err := s.ReclaimExpiredLeases(ctx, time.Time{}, 0); return err },
		"InsertAgent":          func() error { return s.InsertAgent(ctx, agent("a")) },
		"SpawnAgent":           func() error { _, _, err := s.SpawnAgent(ctx, agent("a")); return err },
		"GetAgent":             func() error { _, err := s.GetAgent(ctx, "a"); return err },
		"UpdateAgentState": func() error {
			return s.UpdateAgentState(ctx, UpdateAgentStateArgs{ID: "a", State: AgentRunning})
		},
		"SetAgentCheckpoint": func() error { return s.SetAgentCheckpoint(ctx, "a", "c", 1) },
		"FindAgentByIdempotencyKey": func() error {
			_, err := s.FindAgentByIdempotencyKey(ctx, "o", "k")
			return err
		},
		"FindLiveAgentByProviderSession": func() error {
			_, err := s.FindLiveAgentByProviderSession(ctx, "p", "s")
			return err
		},
		"TerminateLiveAgents": func() error { _, err := s.TerminateLiveAgents(ctx, time.Time{}); return err },
		"ListAgents":          func() error { _, err := s.ListAgents(ctx, ListAgentsArgs{}); return err },
		"Sweep":               func() error { _, err := s.Sweep(ctx, time.Time{}, 0); return err },
		"Close":               s.Close,
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) { wantErr(t, call(), ErrClosed) })
	}
}

func TestOverloaded(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t, WithWriteQueue(2, 20*time.Millisecond))
	release := make(chan struct{})
	started := make(chan struct{})
	var wg sync.WaitGroup
	// One write holds the writer; two more fill the queue.
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = s.write(ctx, func(context.Context, *db.Queries) error {
			close(started)
			<-release
			return nil
		})
	}()
	<-started
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = s.write(ctx, func(context.Context, *db.Queries) error { return nil })
		}()
	}
	for len(s.queue) < 2 {
		time.Sleep(time.Millisecond)
	}
	_, err := s.RegisterWorker(ctx, RegisterWorkerArgs{Namespace: "n", WorkerID: "w", InstanceID: "i", TTL: time.Second})
	wantErr(t, err, ErrOverloaded)
	close(release)
	wg.Wait()
	if _, err := s.GetWorker(ctx, "n", "i"); !errors.Is(err, ErrNotRegistered) {
		t.Fatalf("the refused write changed something: %v", err)
	}
}

func TestGroupCommitIsolatesFailures(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	release := make(chan struct{})
	started := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = s.write(ctx, func(context.Context, *db.Queries) error { close(started); <-release; return nil })
	}()
	<-started
	// While the writer is busy, queue a failing write between two good ones:
	// they share one transaction, and only the failing one is rolled back.
	boom := errors.New("boom")
	errs := make([]error, 3)
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.write(ctx, func(ctx context.Context, q *db.Queries) error {
				if err := appendEvent(ctx, q, "ns", string(rune('a'+i)), EventRegistered, 1, ""); err != nil {
					return err
				}
				if i == 1 {
					return boom
				}
				return nil
			})
		}()
	}
	for len(s.queue) < 3 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if errs[0] != nil || !errors.Is(errs[1], boom) || errs[2] != nil {
		t.Fatalf("errs = %v", errs)
	}
	events, err := s.ListWorkerEvents(ctx, ListWorkerEventsArgs{})
	must(t, err)
	if len(events) != 2 || events[0].InstanceID == "b" || events[1].InstanceID == "b" {
		t.Fatalf("events = %+v, want a and c only", events)
	}
}

func TestOpenRejectsBadOptions(t *testing.T) {
	ctx := context.Background()
	for name, opt := range map[string]Option{
		"WithReadConns":   WithReadConns(0),
		"WithWriteQueue":  WithWriteQueue(0, time.Second),
		"WithDurability":  WithDurability(Durability(7)),
		"WithClock":       WithClock(nil),
		"WithLogger":      WithLogger(nil),
		"WithBusyTimeout": WithBusyTimeout(-time.Second),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Open(ctx, ":memory:", opt)
			wantErr(t, err, ErrInvalidInput)
		})
	}
	_, err := Open(ctx, "")
	wantErr(t, err, ErrInvalidInput)
}

func TestMigrateDownAndForce(t *testing.T) {
	ctx := context.Background()
	s, _, path := newFileStore(t)
	must(t, s.Close())
	latest, err := fs.Glob(schema.FS, "*.up.sql")
	must(t, err)
	v, l, err := SchemaVersion(ctx, path)
	must(t, err)
	if v != len(latest) || l != len(latest) {
		t.Fatalf("version %d latest %d", v, l)
	}
	must(t, MigrateDown(ctx, path, 1))
	if v, _, _ := SchemaVersion(ctx, path); v != len(latest)-1 || tableExists(t, path, "attempts") {
		t.Fatalf("after one step down: version %d", v)
	}
	must(t, MigrateDown(ctx, path, 0)) // all the way
	if v, _, _ := SchemaVersion(ctx, path); v != -1 || tableExists(t, path, "workers") || tableExists(t, path, "agents") {
		t.Fatalf("after all down: version %d", v)
	}
	s, err = Open(ctx, path) // and up again
	must(t, err)
	must(t, s.Close())
	if v, _ := schemaVersion(t, path); v != len(latest) {
		t.Fatalf("after up: %d", v)
	}
	// Force records a version without running anything.
	must(t, ForceVersion(ctx, path, 1))
	if v, dirty := schemaVersion(t, path); v != 1 || dirty || !tableExists(t, path, "attempts") {
		t.Fatalf("after force: %d %v", v, dirty)
	}
	wantErr(t, ForceVersion(ctx, path, -2), ErrInvalidInput)
	wantErr(t, MigrateDown(ctx, path, -1), ErrInvalidInput)
	_, _, err = SchemaVersion(ctx, filepath.Join(t.TempDir(), "absent.db"))
	if err == nil {
		t.Fatal("SchemaVersion of a missing file succeeded")
	}
}
