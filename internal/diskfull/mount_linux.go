package diskfull

import (
	"os"
	"syscall"
	"testing"
)

// Mount mounts a tmpfs of size (as mount(8) reads it: "16m") at dir, made
// if absent, unmounted when t ends, and returns dir. Where mounting is not
// permitted it skips t, except under CI.
func Mount(t testing.TB, dir, size string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI must run the disk-full tests, but mounting a tmpfs failed: %v", err)
		}
		t.Skipf("mounting a tmpfs is not permitted here (%v): disk-full test skipped", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}
