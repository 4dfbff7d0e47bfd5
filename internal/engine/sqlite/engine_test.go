package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/uuid"
	"github.com/rosterdb/roster/internal/engine"
	"github.com/rosterdb/roster/internal/engine/enginetest"
	sqliteschema "github.com/rosterdb/roster/schema/sqlite"
)

func testConfig() engine.Config {
	return engine.Config{
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		SyncFull:      true,
		ReadConns:     2,
		QueueCapacity: 64,
		Admission:     time.Second,
		BusyTimeout:   5 * time.Second,
		Migrate:       true,
	}
}

func openAt(t testing.TB, path string, edit ...func(*engine.Config)) *Engine {
	t.Helper()
	cfg := testConfig()
	for _, f := range edit {
		f(&cfg)
	}
	e, err := Open(context.Background(), path, cfg)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func openMemory(t testing.TB) *Engine { return openAt(t, MemoryPath) }

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantErr(t testing.TB, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("err = %v, want %v", err, want)
	}
}

// rawDB opens a plain connection to a database file, outside the engine.
func rawDB(t testing.TB, path string) *sql.DB {
	t.Helper()
	conn, err := sql.Open("sqlite", path)
	must(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func schemaVersion(t testing.TB, path string) (int, bool) {
	t.Helper()
	var v int
	var dirty bool
	must(t, rawDB(t, path).QueryRow("SELECT version, dirty FROM schema_migrations").Scan(&v, &dirty))
	return v, dirty
}

func tableExists(t testing.TB, path, table string) bool {
	t.Helper()
	var n int
	must(t, rawDB(t, path).QueryRow("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?", table).Scan(&n))
	return n == 1
}

func latest(t testing.TB) int {
	t.Helper()
	ups, err := fs.Glob(sqliteschema.FS, "*.up.sql")
	must(t, err)
	return len(ups)
}

// migrationsUpTo returns the embedded migrations numbered <= n, plus extra files.
func migrationsUpTo(t testing.TB, n int, extra map[string]string) fstest.MapFS {
	t.Helper()
	out := fstest.MapFS{}
	entries, err := fs.ReadDir(sqliteschema.FS, ".")
	must(t, err)
	for _, e := range entries {
		var v int
		if _, err := fmt.Sscanf(e.Name(), "%d_", &v); err != nil || v > n {
			continue
		}
		b, err := fs.ReadFile(sqliteschema.FS, e.Name())
		must(t, err)
		out[e.Name()] = &fstest.MapFile{Data: b}
	}
	for name, body := range extra {
		out[name] = &fstest.MapFile{Data: []byte(body)}
	}
	return out
}

// migrateFile applies migrations to the file at path with the engine's
// transactional migration, outside any Store.
func migrateFile(t testing.TB, path string, migrations fs.FS) error {
	t.Helper()
	e := &Engine{cfg: testConfig()}
	must(t, e.openDBs(path))
	defer e.closeDBs()
	return migrateSchema(context.Background(), e.writer, migrations, true, e.cfg.Logger)
}

func TestFileModeAndPragmas(t *testing.T) {
	for _, tc := range []struct {
		name     string
		syncFull bool
		sync     int
	}{
		{"full", true, 2},
		{"normal", false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "roster.db")
			e := openAt(t, path, func(c *engine.Config) { c.SyncFull = tc.syncFull })
			must(t, e.Write(context.Background(), func(ctx context.Context, q engine.Queries) error {
				return q.WorkerEventAppend(ctx, engine.WorkerEvent{Namespace: "n", InstanceID: "i", Kind: "registered"})
			}))
			for _, f := range []string{path, path + "-wal", path + "-shm"} {
				info, err := os.Stat(f)
				must(t, err)
				if info.Mode().Perm() != 0o600 {
					t.Fatalf("%s: mode = %v, want 0600", filepath.Base(f), info.Mode().Perm())
				}
			}
			var mode string
			var sync, fk int
			must(t, e.writer.QueryRow("PRAGMA journal_mode").Scan(&mode))
			must(t, e.writer.QueryRow("PRAGMA synchronous").Scan(&sync))
			must(t, e.writer.QueryRow("PRAGMA foreign_keys").Scan(&fk))
			if mode != "wal" || sync != tc.sync || fk != 1 {
				t.Fatalf("journal_mode=%s synchronous=%d foreign_keys=%d", mode, sync, fk)
			}
			// The read pool cannot write.
			if _, err := e.reader.Exec("DELETE FROM workers"); err == nil {
				t.Fatal("a write on the read pool succeeded")
			}
		})
	}
}

// Any path the OS accepts opens, and names the file it should.
func TestPathForms(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"plain.db", "with space.db", "q?mark#hash%25.db", "dir/../dotdot.db"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			if name == "dir/../dotdot.db" {
				must(t, os.MkdirAll(filepath.Join(dir, "dir"), 0o700))
				path = dir + "/" + name
			}
			openAt(t, path)
			if _, err := os.Stat(filepath.Clean(path)); err != nil {
				t.Fatalf("the database is not at %s: %v", path, err)
			}
		})
	}
	t.Run("double leading slash", func(t *testing.T) {
		path := "/" + filepath.Join(dir, "slashes.db") // "//tmp/.../slashes.db"
		openAt(t, path)
		if _, err := os.Stat(filepath.Join(dir, "slashes.db")); err != nil {
			t.Fatalf("the database is not where //%s points: %v", dir, err)
		}
	})
}

func TestOverloaded(t *testing.T) {
	ctx := context.Background()
	e := openAt(t, MemoryPath, func(c *engine.Config) { c.QueueCapacity, c.Admission = 2, 20*time.Millisecond })
	release := make(chan struct{})
	started := make(chan struct{})
	var wg sync.WaitGroup
	// One write holds the writer; two more fill the queue.
	wg.Go(func() {
		_ = e.Write(ctx, func(context.Context, engine.Queries) error {
			close(started)
			<-release
			return nil
		})
	})
	<-started
	for range 2 {
		wg.Go(func() { _ = e.Write(ctx, func(context.Context, engine.Queries) error { return nil }) })
	}
	for e.QueueLen() < 2 {
		time.Sleep(time.Millisecond)
	}
	ran := false
	err := e.Write(ctx, func(context.Context, engine.Queries) error { ran = true; return nil })
	wantErr(t, err, engine.ErrOverloaded)
	close(release)
	wg.Wait()
	if ran {
		t.Fatal("the refused write ran")
	}
}

func TestGroupCommitIsolatesFailures(t *testing.T) {
	ctx := context.Background()
	e := openMemory(t)
	release := make(chan struct{})
	started := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = e.Write(ctx, func(context.Context, engine.Queries) error { close(started); <-release; return nil })
	})
	<-started
	// While the writer is busy, queue a failing write between two good ones:
	// they share one transaction, and only the failing one is rolled back.
	boom := errors.New("boom")
	errs := make([]error, 3)
	for i := range 3 {
		wg.Go(func() {
			errs[i] = e.Write(ctx, func(ctx context.Context, q engine.Queries) error {
				if err := q.WorkerEventAppend(ctx, engine.WorkerEvent{Namespace: "ns", InstanceID: string(rune('a' + i)), Kind: "registered", AtMs: 1}); err != nil {
					return err
				}
				if i == 1 {
					return boom
				}
				return nil
			})
		})
	}
	for e.QueueLen() < 3 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if errs[0] != nil || !errors.Is(errs[1], boom) || errs[2] != nil {
		t.Fatalf("errs = %v", errs)
	}
	var events []engine.WorkerEvent
	must(t, e.Read(ctx, func(ctx context.Context, q engine.Queries) error {
		var err error
		events, err = q.WorkerEventList(ctx, engine.WorkerEventListParams{Limit: 10})
		return err
	}))
	if len(events) != 2 || events[0].InstanceID == "b" || events[1].InstanceID == "b" {
		t.Fatalf("events = %+v, want a and c only", events)
	}
}

func TestSchemaTooNew(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new.db")
	openAt(t, path).Close()
	_, err := rawDB(t, path).Exec("UPDATE schema_migrations SET version = 999")
	must(t, err)
	before, err := os.ReadFile(path)
	must(t, err)
	for name, edit := range map[string]func(*engine.Config){
		"migrate":   func(*engine.Config) {},
		"verify":    func(c *engine.Config) { c.Migrate = false },
		"read-only": func(c *engine.Config) { c.ReadOnly = true },
	} {
		cfg := testConfig()
		edit(&cfg)
		_, err = Open(context.Background(), path, cfg)
		if !errors.Is(err, engine.ErrSchemaTooNew) {
			t.Fatalf("%s: err = %v, want ErrSchemaTooNew", name, err)
		}
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

func TestWithoutMigrateAndReadOnlyRefuseOutdated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	must(t, migrateFile(t, path, migrationsUpTo(t, 1, nil)))
	for name, edit := range map[string]func(*engine.Config){
		"verify":    func(c *engine.Config) { c.Migrate = false },
		"read-only": func(c *engine.Config) { c.ReadOnly = true },
	} {
		cfg := testConfig()
		edit(&cfg)
		_, err := Open(context.Background(), path, cfg)
		if !errors.Is(err, engine.ErrSchemaOutdated) {
			t.Fatalf("%s: err = %v, want ErrSchemaOutdated", name, err)
		}
		if v, _ := schemaVersion(t, path); v != 1 {
			t.Fatalf("%s changed the version to %d", name, v)
		}
	}
	openAt(t, path).Close() // migrates
	if v, _ := schemaVersion(t, path); v != latest(t) {
		t.Fatalf("after migrating: version %d", v)
	}
	openAt(t, path, func(c *engine.Config) { c.Migrate = false }).Close()
	openAt(t, path, func(c *engine.Config) { c.ReadOnly = true }).Close()

	// A brand-new file is outdated too, and is left without tables.
	fresh := filepath.Join(t.TempDir(), "fresh.db")
	cfg := testConfig()
	cfg.Migrate = false
	_, err := Open(context.Background(), fresh, cfg)
	wantErr(t, err, engine.ErrSchemaOutdated)
	if tableExists(t, fresh, "workers") {
		t.Fatal("WithoutMigrate created tables")
	}
}

func TestReadOnly(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := testConfig()
	cfg.ReadOnly = true

	// A missing file is ErrNotFound and is not created.
	missing := filepath.Join(dir, "missing.db")
	_, err := Open(ctx, missing, cfg)
	wantErr(t, err, engine.ErrNotFound)
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("read-only Open created %s", missing)
	}
	// An empty file or a foreign SQLite database gets no tables.
	empty := filepath.Join(dir, "empty.db")
	must(t, os.WriteFile(empty, nil, 0o600))
	foreign := filepath.Join(dir, "foreign.db")
	_, err = rawDB(t, foreign).Exec("CREATE TABLE theirs (x INTEGER)")
	must(t, err)
	for _, path := range []string{empty, foreign} {
		before, err := os.ReadFile(path)
		must(t, err)
		_, err = Open(ctx, path, cfg)
		wantErr(t, err, engine.ErrSchemaOutdated)
		after, err := os.ReadFile(path)
		must(t, err)
		if string(before) != string(after) {
			t.Fatalf("read-only Open changed %s", filepath.Base(path))
		}
	}
	// A current database reads as usual, refuses writes, and is unchanged.
	path := filepath.Join(dir, "fleet.db")
	w := openAt(t, path)
	must(t, w.Write(ctx, func(ctx context.Context, q engine.Queries) error {
		return q.WorkerEventAppend(ctx, engine.WorkerEvent{Namespace: "n", InstanceID: "i", Kind: "registered", AtMs: 1})
	}))
	must(t, w.Close())
	before, err := os.ReadFile(path)
	must(t, err)
	r := openAt(t, path, func(c *engine.Config) { c.ReadOnly = true })
	var events []engine.WorkerEvent
	must(t, r.Read(ctx, func(ctx context.Context, q engine.Queries) error {
		events, err = q.WorkerEventList(ctx, engine.WorkerEventListParams{Limit: 10})
		return err
	}))
	if len(events) != 1 {
		t.Fatalf("read-only read %d events, want 1", len(events))
	}
	ran := false
	err = r.Write(ctx, func(context.Context, engine.Queries) error { ran = true; return nil })
	wantErr(t, err, engine.ErrReadOnly)
	if ran {
		t.Fatal("a write ran on a read-only engine")
	}
	must(t, r.Close())
	after, err := os.ReadFile(path)
	must(t, err)
	if string(before) != string(after) {
		t.Fatal("a read-only engine changed the file")
	}
}

func TestFailedMigrationLeavesPreviousVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fail.db")
	must(t, migrateFile(t, path, migrationsUpTo(t, 1, nil)))
	_, err := rawDB(t, path).Exec(`INSERT INTO workers VALUES ('ns', 'i', 'w', '[]', '[]', 1, 1000, 1)`)
	must(t, err)

	// Migration 2 creates a table, then fails: nothing of it may remain.
	broken := migrationsUpTo(t, 1, map[string]string{
		"0002_broken.up.sql":   "CREATE TABLE half_done (x INTEGER) STRICT; INSERT INTO no_such_table VALUES (1);",
		"0002_broken.down.sql": "DROP TABLE half_done;",
	})
	if err := migrateFile(t, path, broken); err == nil {
		t.Fatal("a failing migration succeeded")
	}
	if v, dirty := schemaVersion(t, path); v != 1 || dirty {
		t.Fatalf("after failure: version %d dirty=%v, want 1 clean", v, dirty)
	}
	if tableExists(t, path, "half_done") {
		t.Fatal("the failed migration left a table behind")
	}
	var n int
	must(t, rawDB(t, path).QueryRow("SELECT count(*) FROM workers").Scan(&n))
	if n != 1 {
		t.Fatalf("the previous version lost its rows: %d workers", n)
	}
	// A fixed migration applies next time.
	fixed := migrationsUpTo(t, 1, map[string]string{
		"0002_fixed.up.sql":   "CREATE TABLE half_done (x INTEGER) STRICT;",
		"0002_fixed.down.sql": "DROP TABLE half_done;",
	})
	must(t, migrateFile(t, path, fixed))
	if v, dirty := schemaVersion(t, path); v != 2 || dirty {
		t.Fatalf("after fix: version %d dirty=%v", v, dirty)
	}
}

// A query that does not prepare is an Open error, never a silent fallback.
func TestOpenFailsWhenAQueryDoesNotPrepare(t *testing.T) {
	path := filepath.Join(t.TempDir(), "partial.db")
	_, err := Open(context.Background(), path, func() engine.Config {
		c := testConfig()
		c.Migrations = migrationsUpTo(t, 1, nil) // no agents or executions tables
		return c
	}())
	if err == nil {
		t.Fatal("Open succeeded though queries name missing tables")
	}
}

func TestAdmin(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "admin.db")
	openAt(t, path).Close()
	a, err := Admin(path)
	must(t, err)
	defer a.Close()
	v, l, err := a.Version(ctx)
	must(t, err)
	if v != latest(t) || l != latest(t) {
		t.Fatalf("version %d latest %d", v, l)
	}
	must(t, a.Down(ctx, 1))
	if v, _, _ := a.Version(ctx); v != latest(t)-1 {
		t.Fatalf("after one step down: version %d", v)
	}
	must(t, a.Down(ctx, 0)) // all the way
	if v, _, _ := a.Version(ctx); v != -1 || tableExists(t, path, "workers") || tableExists(t, path, "agents") {
		t.Fatalf("after all down: version %d", v)
	}
	openAt(t, path).Close() // and up again
	if v, _ := schemaVersion(t, path); v != latest(t) {
		t.Fatalf("after up: %d", v)
	}
	// Force records a version without running anything.
	must(t, a.Force(ctx, 1))
	if v, dirty := schemaVersion(t, path); v != 1 || dirty || !tableExists(t, path, "attempts") {
		t.Fatalf("after force: %d %v", v, dirty)
	}
	_, err = Admin(filepath.Join(t.TempDir(), "absent.db"))
	wantErr(t, err, engine.ErrNotFound)
	_, err = Admin(MemoryPath)
	wantErr(t, err, engine.ErrInvalidInput)
}

func TestCheckFindsDamage(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "check.db")
	e := openAt(t, path)
	problems, err := e.Check(ctx)
	must(t, err)
	if len(problems) != 0 {
		t.Fatalf("a new database has problems: %v", problems)
	}
	raw := rawDB(t, path)
	// A running execution whose current attempt is already recorded as
	// ended, and a count of agents that is wrong.
	_, err = raw.Exec(`INSERT INTO executions (id, namespace, lane, state, priority, payload, attempts, max_attempts, epoch, created_at_ms, run_at_ms,
			lease_id, holder, claimed_at_ms, expires_at_ms)
		VALUES ('00000000-0000-7000-8000-000000000001', 'ns', 'l', 'running', 0, x'', 1, 1, 1, 0, 0,
			'00000000-0000-7000-8000-000000000002', 'i', 0, 10)`)
	must(t, err)
	_, err = raw.Exec(`INSERT INTO attempts (execution_id, epoch, attempt_index, lease_id, namespace, instance_id, state, claimed_at_ms, expires_at_ms, ended_at_ms)
		VALUES ('00000000-0000-7000-8000-000000000001', 1, 1, '00000000-0000-7000-8000-000000000002', 'ns', 'i', 'completed', 0, 10, 5)`)
	must(t, err)
	_, err = raw.Exec(`UPDATE agent_state_counts SET n = 5 WHERE state = 'running'`)
	must(t, err)
	problems, err = e.Check(ctx)
	must(t, err)
	if len(problems) != 2 || !strings.Contains(problems[0], "running executions whose attempt is recorded as ended") ||
		!strings.Contains(problems[1], "agent states whose kept count is wrong") {
		t.Fatalf("problems = %v", problems)
	}
	// Lane rows that differ from a worker's lanes.
	_, err = raw.Exec(`INSERT INTO workers VALUES ('ns', 'i', 'w', '["a","b"]', '[]', 0, 1000, 0)`)
	must(t, err)
	_, err = raw.Exec(`DELETE FROM worker_lanes WHERE lane = 'b'`)
	must(t, err)
	problems, err = e.Check(ctx)
	must(t, err)
	if len(problems) != 3 || !strings.Contains(problems[1], "workers whose lane rows differ from their lanes") {
		t.Fatalf("problems = %v", problems)
	}
}

// The seam tests every engine passes (internal/engine/enginetest).
func TestSeam(t *testing.T) {
	enginetest.Run(t, enginetest.Harness{
		Fresh: func(t *testing.T) string { return filepath.Join(t.TempDir(), "seam.db") },
		Open:  func(t *testing.T, loc string) engine.Engine { return openAt(t, loc) },
		Exec: func(t *testing.T, loc, query string) {
			db, err := sql.Open("sqlite", loc)
			must(t, err)
			defer db.Close()
			_, err = db.Exec(query)
			must(t, err)
		},
		Refuse: `CREATE TRIGGER refuse_boom BEFORE UPDATE OF result ON executions
			WHEN NEW.result = CAST('boom' AS BLOB) BEGIN SELECT RAISE(ABORT, 'refused'); END`,
	})
}

// A claim that finds nothing claimable writes nothing: no commit, and another
// connection sees no change (PRAGMA data_version).
func TestIdleClaimWritesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idle.db")
	var commits atomicCounter
	e := openAt(t, path, func(c *engine.Config) { c.Observer = &commits })
	ctx := context.Background()
	must(t, e.Write(ctx, func(ctx context.Context, q engine.Queries) error {
		return q.WorkerRegister(ctx, engine.Worker{Namespace: "ns", InstanceID: "i", WorkerID: "w", Lanes: []string{"default"}, LastHeartbeatMs: 1, TTLMs: 1000000})
	}))
	version := dataVersion(t, path)
	before, commitsBefore := version(), commits.n.Load()
	for range 100 {
		res, err := e.ExecutionClaim(ctx, engine.ClaimParams{Namespace: "ns", InstanceID: "i", NowMs: 5, ExpiresAtMs: 1005, LeaseIDs: []uuid.UUID{uuid.New()}})
		must(t, err)
		if len(res.Leases) != 0 {
			t.Fatal("claimed from an empty queue")
		}
	}
	if after := version(); after != before || commits.n.Load() != commitsBefore {
		t.Fatalf("100 idle claims: data_version %d -> %d, %d commits", before, after, commits.n.Load()-commitsBefore)
	}
}

// A worker whose last claim took something claims under the write lock at
// once; the claim that then finds nothing writes nothing (no data_version
// change) and makes the worker look first again: its idle claims after it
// take no write lock at all.
func TestBusyWorkerSkipsTheLook(t *testing.T) {
	path := filepath.Join(t.TempDir(), "busy.db")
	var commits atomicCounter
	e := openAt(t, path, func(c *engine.Config) { c.Observer = &commits })
	ctx := context.Background()
	workerWithOneExecution(t, e)
	version := dataVersion(t, path)
	k := engine.WorkerKey{Namespace: "ns", InstanceID: "i"}
	claim := func() int {
		res, err := e.ExecutionClaim(ctx, engine.ClaimParams{Namespace: "ns", InstanceID: "i", NowMs: 5, ExpiresAtMs: 1005, LeaseIDs: []uuid.UUID{uuid.New()}})
		must(t, err)
		return len(res.Leases)
	}
	if claim() != 1 || !e.busy.Has(k) {
		t.Fatal("the first claim took nothing, or left the worker not busy")
	}
	before, commitsBefore := version(), commits.n.Load()
	if claim() != 0 {
		t.Fatal("claimed from an empty queue")
	}
	if commits.n.Load() != commitsBefore+1 {
		t.Fatalf("the busy worker's claim: %d commits, want 1 (the look skipped)", commits.n.Load()-commitsBefore)
	}
	if e.busy.Has(k) {
		t.Fatal("a claim that took nothing left the worker busy")
	}
	for range 50 {
		claim()
	}
	if after := version(); after != before || commits.n.Load() != commitsBefore+1 {
		t.Fatalf("empty claims: data_version %d -> %d, %d commits after the first", before, after, commits.n.Load()-commitsBefore-1)
	}
}

// A busy worker whose claim fails (here: it was deleted) is forgotten: its
// next claims look on the read pool first instead of taking the write lock.
func TestBusyWorkerForgottenWhenItsClaimFails(t *testing.T) {
	ctx := context.Background()
	e := openMemory(t)
	k := engine.WorkerKey{Namespace: "ns", InstanceID: "i"}
	workerWithOneExecution(t, e)
	p := engine.ClaimParams{Namespace: "ns", InstanceID: "i", NowMs: 5, ExpiresAtMs: 1005, LeaseIDs: []uuid.UUID{uuid.New()}}
	res, err := e.ExecutionClaim(ctx, p)
	must(t, err)
	if len(res.Leases) != 1 || !e.busy.Has(k) {
		t.Fatal("the first claim took nothing, or left the worker not busy")
	}
	must(t, e.Write(ctx, func(ctx context.Context, q engine.Queries) error { _, err := q.WorkerDelete(ctx, k); return err }))
	if _, err := e.ExecutionClaim(ctx, p); err == nil {
		t.Fatal("a deleted worker claimed")
	}
	if e.busy.Has(k) {
		t.Fatal("a worker whose claim failed is still busy: each claim takes the write lock")
	}
}

// A claim makes the namespace's due executions ready even when its worker
// is not alive: a settle whose claim fails so commits the rest, and a ready
// execution is then claimable by a worker whose clock is behind its RunAt.
func TestClaimOfADeadWorkerStillPromotes(t *testing.T) {
	ctx := context.Background()
	e := openMemory(t)
	must(t, e.Write(ctx, func(ctx context.Context, q engine.Queries) error {
		for inst, ttl := range map[string]int64{"dead": 10, "alive": 1000000} {
			if err := q.WorkerRegister(ctx, engine.Worker{Namespace: "ns", InstanceID: inst, WorkerID: "w", Lanes: []string{"default"}, LastHeartbeatMs: 1, TTLMs: ttl}); err != nil {
				return err
			}
		}
		return q.ExecutionInsert(ctx, engine.Execution{ID: uuid.Must(uuid.NewV7()), Namespace: "ns", Lane: "default", MaxAttempts: 1, CreatedAtMs: 1, RunAtMs: 100})
	}))
	dead := engine.ClaimParams{Namespace: "ns", InstanceID: "dead", NowMs: 200, ExpiresAtMs: 1200, LeaseIDs: []uuid.UUID{uuid.New()}}
	res := e.Settle(ctx, 200, nil, &dead)
	wantErr(t, res.ClaimErr, engine.ErrNoRows)
	got, err := e.ExecutionClaim(ctx, engine.ClaimParams{Namespace: "ns", InstanceID: "alive", NowMs: 50, ExpiresAtMs: 1050, LeaseIDs: []uuid.UUID{uuid.New()}})
	must(t, err)
	if len(got.Leases) != 1 {
		t.Fatalf("a claim at 50 after the dead worker's settle at 200 took %d executions (next RunAt %d), want the one its claim made ready", len(got.Leases), got.NextRunAtMs)
	}
}

// dataVersion reads PRAGMA data_version of the database at path on a
// connection of its own: it changes exactly when another connection commits.
func dataVersion(t *testing.T, path string) func() int64 {
	other, err := sql.Open("sqlite", path)
	must(t, err)
	t.Cleanup(func() { other.Close() })
	other.SetMaxOpenConns(1)
	return func() (v int64) {
		must(t, other.QueryRow("PRAGMA data_version").Scan(&v))
		return v
	}
}

// workerWithOneExecution registers worker ns/i of lane default and creates
// one execution it can claim.
func workerWithOneExecution(t *testing.T, e *Engine) {
	must(t, e.Write(context.Background(), func(ctx context.Context, q engine.Queries) error {
		if err := q.WorkerRegister(ctx, engine.Worker{Namespace: "ns", InstanceID: "i", WorkerID: "w", Lanes: []string{"default"}, LastHeartbeatMs: 1, TTLMs: 1000000}); err != nil {
			return err
		}
		return q.ExecutionInsert(ctx, engine.Execution{ID: uuid.Must(uuid.NewV7()), Namespace: "ns", Lane: "default", MaxAttempts: 1, CreatedAtMs: 1, RunAtMs: 1})
	}))
}

// atomicCounter is an engine.Observer counting commits.
type atomicCounter struct{ n atomic.Int64 }

func (c *atomicCounter) WriteWaited(time.Duration)    {}
func (c *atomicCounter) Committed(time.Duration, int) { c.n.Add(1) }
