package sqlite

import (
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// A change check that begins looks again for a while, as after a write,
// even when it hears nothing and although its first look saw a change. A
// commit whose frames were written to the WAL file before the check began
// watching it (nobody heard them), like the second of two commits whose
// reports the system merged into one, shows only when its sync ends, and
// nothing is heard then: with a single look, an idle worker in another
// process missed it and waited for its poll (internal/runtimebench measured
// enqueue-to-start p99 near a second).
func TestChangeCheckLooksAgainWhenItBegins(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("writes to the WAL file are heard on Linux only; elsewhere the check polls")
	}
	e := openAt(t, filepath.Join(t.TempDir(), "w.db"))
	sub := e.Subscribe("")
	defer sub.Close()
	sub.Arm()
	deadline := time.Now().Add(5 * time.Second)
	for e.watchLooks.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	sub.Disarm()
	if n := e.watchLooks.Load(); n < 3 {
		t.Fatalf("the change check looked %d times in 5 s without a write, want it to look again after it began", n)
	}
}
