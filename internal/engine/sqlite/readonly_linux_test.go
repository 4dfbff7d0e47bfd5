package sqlite_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rosterdb/roster/service"
)

// readOnlyView mounts dir read-only at a new directory (unmounted when t
// ends) and returns it. Where mounting is not permitted it skips t, except
// under CI.
func readOnlyView(t *testing.T, dir string) string {
	t.Helper()
	view := filepath.Join(t.TempDir(), "view")
	must(t, os.Mkdir(view, 0o700))
	if err := syscall.Mount(dir, view, "", syscall.MS_BIND, ""); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI must run the read-only directory test, but a bind mount failed: %v", err)
		}
		t.Skipf("bind mounts are not permitted here (%v): the read-only directory test is skipped", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(view, syscall.MNT_DETACH) })
	must(t, syscall.Mount("", view, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""))
	return view
}

// Where SQLite can create nothing beside the database (a read-only file
// system), a read-only Store reads a database whose -wal and -shm exist, and
// otherwise fails with a message saying what it needs. Either way nothing
// changes.
func TestReadOnlyInReadOnlyDirectory(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		leave func(t *testing.T, path string) int
		ok    bool
	}{
		{"closed cleanly: no -wal, no -shm", func(t *testing.T, path string) int {
			s, err := service.Open(ctx, path)
			must(t, err)
			must(t, s.Close())
			return 0
		}, false},
		{"crashed: -wal and -shm", copiedWhileOpen(true), true},
		{"crashed: -wal without -shm", copiedWhileOpen(false), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			written := tc.leave(t, filepath.Join(dir, "x.db"))
			path := filepath.Join(readOnlyView(t, dir), "x.db")
			before := readWALFiles(t, path)
			s, err := service.Open(ctx, path, service.WithReadOnly())
			if !tc.ok {
				if err == nil || errors.Is(err, service.ErrNotFound) || !strings.Contains(err.Error(), "-shm") {
					t.Fatalf("err = %v, want a message naming the -wal and -shm", err)
				}
			} else {
				must(t, err)
				page, err := s.ListWorkers(ctx, service.ListWorkersArgs{})
				must(t, err)
				if len(page.Workers) != written {
					t.Fatalf("read %d workers, want %d", len(page.Workers), written)
				}
				must(t, s.Close())
			}
			after := readWALFiles(t, path)
			if !bytes.Equal(before.main, after.main) || !bytes.Equal(before.wal, after.wal) {
				t.Fatal("the files changed")
			}
		})
	}
}
