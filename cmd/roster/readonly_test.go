package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rosterdb/roster/service"
)

// The read commands leave every byte of a database a crashed writer left
// behind (the main file and its -wal) as they were.
func TestCLIReadCommandsLeaveCrashedFilesUntouched(t *testing.T) {
	f := seed(t)
	ctx := context.Background()
	// A copy taken while a Store has written and not checkpointed is what a
	// crashed writer leaves.
	s, err := service.Open(ctx, f.path)
	must(t, err)
	_, err = s.RegisterWorker(ctx, service.RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "after-crash", TTL: time.Hour})
	must(t, err)
	crashed := filepath.Join(t.TempDir(), "crashed.db")
	for _, suffix := range []string{"", "-wal", "-shm"} {
		b, err := os.ReadFile(f.path + suffix)
		must(t, err)
		must(t, os.WriteFile(crashed+suffix, b, 0o600))
	}
	must(t, s.Close())
	read := func() (main, wal []byte) {
		main, err := os.ReadFile(crashed)
		must(t, err)
		wal, err = os.ReadFile(crashed + "-wal")
		must(t, err)
		return main, wal
	}
	main0, wal0 := read()
	if len(wal0) == 0 {
		t.Fatal("precondition: no -wal")
	}
	for _, args := range [][]string{
		{"workers", "list"}, {"events", "list"}, {"executions", "list"}, {"executions", "get", f.running.String()},
		{"leases", "expired"}, {"agents", "list"}, {"agents", "get", "ag1"}, {"stats"}, {"check"}, {"migrate", "version"},
	} {
		code, out, errOut := runCLI(t, append(args, "--db", crashed)...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
		if args[0] == "workers" && !strings.Contains(out, "after-crash") {
			t.Fatalf("workers list does not show the write in the -wal:\n%s", out)
		}
		main, wal := read()
		if !bytes.Equal(main, main0) || !bytes.Equal(wal, wal0) {
			t.Fatalf("%v changed the files: main %d -> %d bytes, -wal %d -> %d bytes", args, len(main0), len(main), len(wal0), len(wal))
		}
	}
}
