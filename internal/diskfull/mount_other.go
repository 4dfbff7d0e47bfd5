//go:build !linux

package diskfull

import (
	"os"
	"testing"
)

// Mount is Linux's alone: elsewhere it skips t, except under CI (which runs
// on Linux).
func Mount(t testing.TB, dir, size string) string {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatal("CI must run the disk-full tests, which need Linux's tmpfs")
	}
	t.Skip("disk-full tests need Linux's tmpfs: skipped")
	return dir
}
