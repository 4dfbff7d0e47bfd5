package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rosterdb/roster/internal/engine"
)

// A lone write, with no write queued and none being committed, is committed
// by its caller: its fn runs on the caller's goroutine, not the writer's.
func TestLoneWriteCommitsOnItsCaller(t *testing.T) {
	e := openMemory(t)
	var stack string
	must(t, e.Write(context.Background(), func(ctx context.Context, q engine.Queries) error {
		buf := make([]byte, 64<<10)
		stack = string(buf[:runtime.Stack(buf, false)])
		return q.WorkerEventAppend(ctx, engine.WorkerEvent{Namespace: "ns", InstanceID: "i", Kind: "registered", AtMs: 1})
	}))
	if !strings.Contains(stack, "TestLoneWriteCommitsOnItsCaller") || strings.Contains(stack, "runWriter") {
		t.Fatalf("the lone write did not run on its caller's goroutine:\n%s", stack)
	}
}

// Writes from many goroutines, some committed by their callers and some
// queued for the writer while a commit runs, are each committed exactly
// once.
func TestConcurrentWritesEachCommitOnce(t *testing.T) {
	e := openAt(t, filepath.Join(t.TempDir(), "w.db"))
	ctx := context.Background()
	const writers, each = 16, 40
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				err := e.Write(ctx, func(ctx context.Context, q engine.Queries) error {
					return q.WorkerEventAppend(ctx, engine.WorkerEvent{Namespace: "ns", InstanceID: fmt.Sprint(w, "-", i), Kind: "registered", AtMs: 1})
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	var events []engine.WorkerEvent
	must(t, e.Read(ctx, func(ctx context.Context, q engine.Queries) error {
		var err error
		events, err = q.WorkerEventList(ctx, engine.WorkerEventListParams{Limit: writers * each * 2})
		return err
	}))
	seen := map[string]int{}
	for _, ev := range events {
		seen[ev.InstanceID]++
	}
	if len(events) != writers*each || len(seen) != writers*each {
		t.Fatalf("%d events of %d instances, want %d of each", len(events), len(seen), writers*each)
	}
}

// A write that comes after Close, whether it would commit itself or queue,
// gets ErrClosed.
func TestWriteAfterCloseIsClosed(t *testing.T) {
	e := openMemory(t)
	must(t, e.Close())
	err := e.Write(context.Background(), func(context.Context, engine.Queries) error { return nil })
	wantErr(t, err, engine.ErrClosed)
}

// Close while writes run: each write returns nil (committed) or ErrClosed,
// none hangs, and Close waits for a commit in progress.
func TestCloseDuringWrites(t *testing.T) {
	for range 5 {
		e := openAt(t, filepath.Join(t.TempDir(), "c.db"))
		ctx := context.Background()
		var wg sync.WaitGroup
		var written atomic.Int64
		for w := range 8 {
			wg.Go(func() {
				for i := 0; ; i++ {
					err := e.Write(ctx, func(ctx context.Context, q engine.Queries) error {
						return q.WorkerEventAppend(ctx, engine.WorkerEvent{Namespace: "ns", InstanceID: fmt.Sprint(w, "-", i), Kind: "registered", AtMs: 1})
					})
					if err != nil {
						if !errors.Is(err, engine.ErrClosed) {
							t.Errorf("write: %v, want nil or ErrClosed", err)
						}
						return
					}
					written.Add(1)
				}
			})
		}
		for written.Load() < 50 {
			runtime.Gosched()
		}
		_ = e.Close()
		wg.Wait()
	}
}

// A lone write whose fn panics, recovered by its caller (as net/http
// does), leaves the engine writable: the transaction is rolled back and the
// commit lock let go.
func TestPanickingWriteLeavesTheEngineWritable(t *testing.T) {
	e := openAt(t, filepath.Join(t.TempDir(), "p.db"))
	ctx := context.Background()
	func() {
		defer func() {
			if r := recover(); r != "bug" {
				t.Errorf("recovered %v, want the write's own panic", r)
			}
		}()
		_ = e.Write(ctx, func(context.Context, engine.Queries) error { panic("bug") })
	}()
	done := make(chan error, 1)
	go func() {
		done <- e.Write(ctx, func(ctx context.Context, q engine.Queries) error {
			return q.WorkerEventAppend(ctx, engine.WorkerEvent{Namespace: "ns", InstanceID: "i", Kind: "registered", AtMs: 1})
		})
	}()
	select {
	case err := <-done:
		must(t, err)
	case <-time.After(10 * time.Second):
		t.Fatalf("a write after a recovered panic hangs (queue length %d)", e.QueueLen())
	}
}
