package engine

import (
	"context"
	"sync"
)

// Loop is the one goroutine an engine runs while someone needs it (SQLite's
// change check, PostgreSQL's listener): Start runs it unless it runs, Stop
// ends it and waits for it. Its zero value is stopped.
type Loop struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// Start runs run in a goroutine of its own until Stop cancels its context,
// unless it already runs or closed reports the engine closed (checked under
// the lock Stop takes, so that a Close that stops the loop is never followed
// by a start).
func (l *Loop) Start(closed func() bool, run func(ctx context.Context)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if closed() || l.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	l.cancel, l.done = cancel, done
	go func() {
		defer close(done)
		run(ctx)
	}()
}

// Running reports whether the loop runs.
func (l *Loop) Running() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cancel != nil
}

// Stop ends the loop, if it runs, and waits for its goroutine.
func (l *Loop) Stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancel == nil {
		return
	}
	l.cancel()
	<-l.done
	l.cancel, l.done = nil, nil
}
