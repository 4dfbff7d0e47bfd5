package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rosterdb/roster/service"
)

// Tests of the Store that only a SQLite file shows: several Stores and
// processes on one file, reopening, and the benchmarks and crash tests in the
// files beside this one.

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func agent(id string) service.Agent {
	return service.Agent{
		ID: id, State: service.AgentSpawned, Provider: "anthropic", OwnerActor: "alice",
		OwnerPeerClass: "human", OwnerWriteNamespace: "team-a", OwnerVisibleNamespaces: []string{"shared", "team-b"},
		SpawnFingerprint: "fp-" + id, SpawnedAt: t0, StateChangedAt: t0,
	}
}

func worker(t testing.TB, s benchDB, ns, inst string, lanes, caps []string) {
	t.Helper()
	_, err := s.RegisterWorker(context.Background(), service.RegisterWorkerArgs{
		Namespace: ns, WorkerID: "w", InstanceID: inst, Lanes: lanes, Capabilities: caps, TTL: time.Hour, Now: t0,
	})
	must(t, err)
}

func schemaVersion(t *testing.T, path string) int {
	t.Helper()
	conn, err := sql.Open("sqlite", path)
	must(t, err)
	defer conn.Close()
	var v int
	must(t, conn.QueryRow("SELECT version FROM schema_migrations").Scan(&v))
	return v
}

func TestOpenCloseReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "fleet.db")
	s, err := service.Open(ctx, path)
	must(t, err)
	_, err = s.RegisterWorker(ctx, service.RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "i", TTL: time.Hour})
	must(t, err)
	must(t, s.Close())

	s, err = service.Open(ctx, path)
	must(t, err)
	defer s.Close()
	w, err := s.GetWorker(ctx, "ns", "i")
	must(t, err)
	if w.WorkerID != "w" {
		t.Fatalf("after reopen: worker %+v", w)
	}
	v, latest, err := service.SchemaVersion(ctx, path)
	must(t, err)
	if v != latest || schemaVersion(t, path) != latest {
		t.Fatalf("schema version %d, want %d", v, latest)
	}
}

func TestParallelOpensOfNewFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "new.db")
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	stores := make([]*service.Store, n)
	for i := range n {
		wg.Go(func() { stores[i], errs[i] = service.Open(ctx, path) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Open #%d: %v", i, err)
		}
		defer stores[i].Close()
	}
	// Every Store works on the shared file.
	for i, s := range stores {
		_, err := s.RegisterWorker(ctx, service.RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: fmt.Sprint(i), TTL: time.Hour})
		must(t, err)
	}
	page, err := stores[0].ListWorkers(ctx, service.ListWorkersArgs{Namespace: "ns"})
	must(t, err)
	if len(page.Workers) != n {
		t.Fatalf("%d workers, want %d", len(page.Workers), n)
	}
}

// The migrate commands of the CLI, through the public API.
func TestMigrateDownAndForce(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	s, err := service.Open(ctx, path)
	must(t, err)
	must(t, s.Close())
	_, latest, err := service.SchemaVersion(ctx, path)
	must(t, err)
	must(t, service.MigrateDown(ctx, path, 1))
	if v, _, _ := service.SchemaVersion(ctx, path); v != latest-1 {
		t.Fatalf("after one step down: version %d", v)
	}
	must(t, service.ForceVersion(ctx, path, latest))
	if v := schemaVersion(t, path); v != latest {
		t.Fatalf("after force: version %d", v)
	}
	for _, bad := range []int{-2, latest + 1, 99} {
		if err := service.ForceVersion(ctx, path, bad); !errors.Is(err, service.ErrInvalidInput) {
			t.Fatalf("ForceVersion(%d) = %v, want ErrInvalidInput", bad, err)
		}
	}
	if err := service.MigrateDown(ctx, path, -1); !errors.Is(err, service.ErrInvalidInput) {
		t.Fatalf("MigrateDown(-1) = %v", err)
	}
	if _, _, err := service.SchemaVersion(ctx, filepath.Join(t.TempDir(), "absent.db")); !errors.Is(err, service.ErrNotFound) {
		t.Fatalf("SchemaVersion of a missing file: %v", err)
	}
}

func TestOpenPathsThroughTheStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	// "//dir/x.db" is a path the OS accepts; it must open, not be read as a URI authority.
	s, err := service.Open(ctx, "/"+filepath.Join(dir, "x.db"))
	must(t, err)
	must(t, s.Close())
	// Read-only never creates a file.
	_, err = service.Open(ctx, filepath.Join(dir, "absent.db"), service.WithReadOnly())
	if !errors.Is(err, service.ErrNotFound) {
		t.Fatalf("read-only Open of a missing file: %v", err)
	}
	// A URL of an engine this build lacks is refused, never created as a file.
	_, err = service.Open(ctx, "mysql://127.0.0.1/x")
	if !errors.Is(err, service.ErrInvalidInput) {
		t.Fatalf("Open of an unknown URL scheme: %v", err)
	}
}
