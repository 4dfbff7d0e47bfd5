package service

// The disk-full tests: a tmpfs of their own, filled up (Linux: the file
// name's suffix builds them there only).

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rosterdb/roster/internal/diskfull"
)

// ErrStorage is "the storage refused the write (disk full ...)", and no
// driver error leaks raw: on a full disk, writes that share a group
// commit (SQLite rolls the whole transaction back) all return ErrStorage.
func TestDiskFullErrorsAreSentinels(t *testing.T) {
	dir := diskfull.Mount(t, t.TempDir(), "16m")
	s, _ := backends()[1].open(t, filepath.Join(dir, "roster.db"), WithClock(time.Now))
	create(t, s, CreateExecutionArgs{})
	must(t, diskfull.Fill(filepath.Join(dir, "filler")))
	big := make([]byte, 3<<20)
	var wg sync.WaitGroup
	var mu sync.Mutex
	raw := map[string]int{}
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := big
			if i%2 == 1 {
				p = []byte("small")
			}
			_, err := s.CreateExecution(context.Background(), CreateExecutionArgs{Namespace: "ns", Lane: "default", Payload: p})
			if err != nil && !IsSentinel(err) {
				mu.Lock()
				raw[err.Error()]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for msg, n := range raw {
		t.Errorf("%d× a raw error on a full disk: %s", n, msg)
	}
}

// "An outcome is written or its lease is truly lost ... retried through
// every transient error"; a full disk is ErrStorage (transient). A
// handler's result that meets a full disk must be written once space returns,
// not turned into a failure.
func TestRunWorkerDiskFullKeepsResult(t *testing.T) {
	dir := diskfull.Mount(t, t.TempDir(), "16m")
	s, _ := backends()[1].open(t, filepath.Join(dir, "roster.db"), WithClock(time.Now))
	id := create(t, s, CreateExecutionArgs{})
	started, finish := make(chan struct{}), make(chan struct{})
	result := bytes.Repeat([]byte("r"), 3<<20)
	stop := runWorker(t, s, WorkerArgs{TTL: time.Minute, LeaseTTL: time.Minute, Handler: func(context.Context, Lease) ([]byte, error) {
		close(started)
		<-finish
		return result, nil
	}})
	<-started
	filler := filepath.Join(dir, "filler")
	must(t, diskfull.Fill(filler))
	close(finish)
	time.Sleep(1500 * time.Millisecond) // the settler meets the full disk
	must(t, os.Remove(filler))
	eventually(t, "the outcome", func() bool { return getExecution(t, s, id).State != ExecutionRunning })
	must(t, stop())
	if e := getExecution(t, s, id); e.State != ExecutionCompleted || !bytes.Equal(e.Result, result) {
		t.Fatalf("after a full disk: state %s, attempts %d, last error %q, result %d bytes", e.State, e.Attempts, e.LastError, len(e.Result))
	}
}
