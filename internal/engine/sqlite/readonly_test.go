package sqlite_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/rosterdb/roster/service"
)

// walFiles are the bytes of a database file and of its -wal, and whether the
// -wal exists.
type walFiles struct {
	main, wal []byte
	hasWAL    bool
}

func readWALFiles(t *testing.T, path string) walFiles {
	t.Helper()
	var f walFiles
	var err error
	f.main, err = os.ReadFile(path)
	must(t, err)
	f.wal, err = os.ReadFile(path + "-wal")
	switch {
	case err == nil:
		f.hasWAL = true
	case !errors.Is(err, os.ErrNotExist):
		t.Fatal(err)
	}
	return f
}

// killedWriter leaves the database at path as a writer killed with SIGKILL
// leaves it: committed registrations in the -wal, not yet checkpointed into
// the main file, and the -shm beside them. It returns how many registrations
// were acknowledged.
func killedWriter(t *testing.T, path string) int {
	t.Helper()
	cmd := childCmd(t, "ack-writer", path, "k")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	sc := bufio.NewScanner(stdout)
	acked := 0
	for acked < 40 && sc.Scan() {
		acked++
	}
	must(t, cmd.Process.Signal(syscall.SIGKILL))
	_, _ = io.Copy(io.Discard, stdout)
	_ = cmd.Wait()
	return acked
}

// copiedWhileOpen leaves at path a copy of a database taken while a Store
// had written to it and not yet checkpointed: the state a crashed writer
// leaves, with or without the -shm. It returns how many workers were
// registered.
func copiedWhileOpen(withSHM bool) func(t *testing.T, path string) int {
	return func(t *testing.T, path string) int {
		t.Helper()
		ctx := context.Background()
		src := filepath.Join(t.TempDir(), "src.db")
		s, err := service.Open(ctx, src)
		must(t, err)
		defer s.Close()
		for _, inst := range []string{"a", "b", "c"} {
			_, err := s.RegisterWorker(ctx, service.RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: inst, TTL: time.Hour})
			must(t, err)
		}
		suffixes := []string{"", "-wal"}
		if withSHM {
			suffixes = append(suffixes, "-shm")
		}
		for _, suffix := range suffixes {
			b, err := os.ReadFile(src + suffix)
			must(t, err)
			must(t, os.WriteFile(path+suffix, b, 0o600))
		}
		return 3
	}
}

// readStore opens a Store WithReadOnly, reads, and closes it; it returns
// how many workers it read.
func readStore(t *testing.T, path string) int {
	t.Helper()
	ctx := context.Background()
	s, err := service.Open(ctx, path, service.WithReadOnly())
	must(t, err)
	page, err := s.ListWorkers(ctx, service.ListWorkersArgs{Namespace: "ns", Limit: 10000})
	must(t, err)
	_, err = s.Stats(ctx, time.Time{})
	must(t, err)
	must(t, s.Close())
	return len(page.Workers)
}

// readSchemaVersion reads the schema version as `roster migrate version` does.
func readSchemaVersion(t *testing.T, path string) int {
	t.Helper()
	v, latest, err := service.SchemaVersion(context.Background(), path)
	must(t, err)
	if v != latest {
		t.Fatalf("version %d, want %d", v, latest)
	}
	return -1
}

// A Store opened WithReadOnly, and SchemaVersion, on a database a crashed
// writer left behind read what the -wal holds and leave every byte of the
// main file and of the -wal as they were: closing checkpoints nothing.
func TestReadOnlyLeavesCrashedWALUntouched(t *testing.T) {
	for _, leave := range []struct {
		name string
		fn   func(t *testing.T, path string) int
	}{
		{"writer killed with SIGKILL", killedWriter},
		{"copied while open, with -shm", copiedWhileOpen(true)},
		{"copied while open, without -shm", copiedWhileOpen(false)},
	} {
		for _, read := range []struct {
			name string
			fn   func(t *testing.T, path string) int // workers read, or -1
		}{
			{"Store WithReadOnly", readStore},
			{"SchemaVersion", readSchemaVersion},
		} {
			t.Run(leave.name+"/"+read.name, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "crashed.db")
				written := leave.fn(t, path)
				before := readWALFiles(t, path)
				if !before.hasWAL || len(before.wal) == 0 {
					t.Fatal("precondition: the writer left no -wal")
				}
				for range 2 { // the second time with the -shm the first one used
					if n := read.fn(t, path); n >= 0 && n < written {
						t.Fatalf("read %d workers, %d were acknowledged", n, written)
					}
					after := readWALFiles(t, path)
					if !bytes.Equal(before.main, after.main) {
						t.Fatalf("the main file changed: %d bytes before, %d after", len(before.main), len(after.main))
					}
					if !after.hasWAL || !bytes.Equal(before.wal, after.wal) {
						t.Fatalf("the -wal changed: %d bytes before, %d after (exists: %v)", len(before.wal), len(after.wal), after.hasWAL)
					}
				}
			})
		}
	}
}

// Read-only Opens still refuse what they refused: a missing file
// (ErrNotFound, not created) and a schema that is not exactly current.
func TestReadOnlyStillRefuses(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	current := filepath.Join(dir, "current.db")
	s, err := service.Open(ctx, current)
	must(t, err)
	must(t, s.Close())
	outdated := filepath.Join(dir, "outdated.db")
	s, err = service.Open(ctx, outdated)
	must(t, err)
	must(t, s.Close())
	must(t, service.MigrateDown(ctx, outdated, 1))
	empty := filepath.Join(dir, "empty.db")
	must(t, os.WriteFile(empty, nil, 0o600))
	for _, tc := range []struct {
		name string
		path string
		want error
	}{
		{"missing", filepath.Join(dir, "missing.db"), service.ErrNotFound},
		{"outdated", outdated, service.ErrSchemaOutdated},
		{"empty file", empty, service.ErrSchemaOutdated},
		{"current", current, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := service.Open(ctx, tc.path, service.WithReadOnly())
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if err == nil {
				must(t, s.Close())
			}
			if tc.want == service.ErrNotFound {
				if _, err := os.Stat(tc.path); !errors.Is(err, os.ErrNotExist) {
					t.Fatal("a read-only Open created the file")
				}
			}
		})
	}
}
