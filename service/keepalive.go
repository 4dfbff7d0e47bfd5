package service

import (
	"context"
	"errors"
	"time"
)

// KeepAliveArgs configure KeepAlive.
type KeepAliveArgs struct {
	Namespace, WorkerID, InstanceID string
	Lanes, Capabilities             []string
	TTL                             time.Duration
	// Interval between heartbeats: 0 means TTL/3 (at least 1 ms), else at
	// least 1 ms (KeepAlive refuses less). Each wait is jittered by ±10%.
	Interval time.Duration
	// After replaces time.After for the waits between heartbeats (tests).
	After func(time.Duration) <-chan time.Time
}

// minHeartbeatInterval is the shortest Interval KeepAlive accepts.
const minHeartbeatInterval = time.Millisecond

// ShutdownReason is the reason KeepAlive gives when it marks its worker dead.
const ShutdownReason = "shutdown"

// KeepAlive registers a worker and keeps it alive until ctx ends: it
// heartbeats every Interval, registers again after ErrNotRegistered (the TTL
// lapsed or the instance was swept), and when ctx ends marks the worker dead
// with reason "shutdown" and returns nil. It returns early with an error only
// when the worker cannot be registered at all (ErrInvalidInput, ErrConflict)
// or the Store is closed. Transient failures are logged and retried.
func (s *Store) KeepAlive(ctx context.Context, a KeepAliveArgs) error {
	if err := s.notClosed(); err != nil {
		return err
	}
	if err := validTTL("TTL", a.TTL); err != nil {
		return err
	}
	interval := a.Interval
	switch {
	case interval == 0:
		interval = max(a.TTL/3, minHeartbeatInterval)
	case interval < minHeartbeatInterval:
		// A shorter one would heartbeat in a loop, a write each time.
		return invalid("Interval", "%v is below 1ms (0 means TTL/3)", interval)
	}
	after := a.After
	if after == nil {
		after = time.After
	}
	log := s.log.With("namespace", a.Namespace, "instance", a.InstanceID)
	register := func() error {
		_, err := s.RegisterWorker(ctx, RegisterWorkerArgs{
			Namespace: a.Namespace, WorkerID: a.WorkerID, InstanceID: a.InstanceID,
			Lanes: a.Lanes, Capabilities: a.Capabilities, TTL: a.TTL,
		})
		return err
	}
	fatal := func(err error) bool {
		return errors.Is(err, ErrInvalidInput) || errors.Is(err, ErrConflict) || errors.Is(err, ErrClosed)
	}
	if err := register(); err != nil && (fatal(err) || ctx.Err() != nil) {
		return err
	} else if err != nil {
		log.Warn("roster: keep-alive: register failed, will retry", "err", err)
	}
	for {
		select {
		case <-ctx.Done():
			err := s.MarkWorkerDead(context.WithoutCancel(ctx), MarkWorkerDeadArgs{
				Namespace: a.Namespace, InstanceID: a.InstanceID, Reason: ShutdownReason,
			})
			if err != nil && !errors.Is(err, ErrNotRegistered) {
				log.Warn("roster: keep-alive: mark dead on shutdown failed", "err", err)
			}
			return nil
		case <-after(jitter(interval)):
		}
		_, err := s.HeartbeatWorker(ctx, HeartbeatWorkerArgs{Namespace: a.Namespace, InstanceID: a.InstanceID})
		if errors.Is(err, ErrNotRegistered) {
			log.Warn("roster: keep-alive: worker was not registered; registering again")
			err = register()
		}
		switch {
		case err == nil, ctx.Err() != nil:
		case fatal(err):
			return err
		default:
			log.Warn("roster: keep-alive: heartbeat failed, will retry", "err", err)
		}
	}
}
