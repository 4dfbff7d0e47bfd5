package service

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// KeepAliveArgs configure KeepAlive.
type KeepAliveArgs struct {
	Namespace, WorkerID, InstanceID string
	Lanes, Capabilities             []string
	TTL                             time.Duration
	// Interval between heartbeats; 0 means TTL/3. Each wait is jittered by ±10%.
	Interval time.Duration
	// After replaces time.After for the waits between heartbeats (tests).
	After func(time.Duration) <-chan time.Time
}

// ShutdownReason is the reason KeepAlive gives when it marks its worker dead.
const ShutdownReason = "shutdown"

// KeepAlive registers a worker and keeps it alive until ctx ends: it
// heartbeats every Interval, registers again after ErrNotRegistered (the TTL
// lapsed or the instance was swept), and when ctx ends marks the worker dead
// with reason "shutdown" and returns nil. It returns early with an error only
// when the worker cannot be registered at all (ErrInvalidInput, ErrConflict)
// or the Store is closed. Transient failures are logged and retried.
func (s *Store) KeepAlive(ctx context.Context, a KeepAliveArgs) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := validTTL("TTL", a.TTL); err != nil {
		return err
	}
	interval := a.Interval
	if interval == 0 {
		interval = a.TTL / 3
	}
	if interval <= 0 {
		return invalid("Interval", "%v is not positive", interval)
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

// SweeperArgs configure RunSweeper.
type SweeperArgs struct {
	// Interval between runs; 0 means 10s. Each wait is jittered by ±10%.
	Interval time.Duration
	// EventRetention: events older than this are pruned; 0 means 7 days,
	// negative keeps every event.
	EventRetention time.Duration
	// After replaces time.After for the waits between runs (tests).
	After func(time.Duration) <-chan time.Time
}

// SweepReport counts what one maintenance run did.
type SweepReport struct {
	Swept, Reclaimed, Pruned int
}

// DefaultEventRetention is how long Sweep and RunSweeper keep audit events
// when the retention given is 0.
const DefaultEventRetention = 7 * 24 * time.Hour

// Sweep runs one full maintenance run at now: it sweeps expired workers,
// reclaims expired leases and prunes events older than retention (0: the
// default of 7 days, as for SweeperArgs; negative: keep every event).
func (s *Store) Sweep(ctx context.Context, now time.Time, retention time.Duration) (SweepReport, error) {
	if err := s.check(); err != nil {
		return SweepReport{}, err
	}
	if retention == 0 {
		retention = DefaultEventRetention
	}
	if err := validTime("now", now); err != nil {
		return SweepReport{}, err
	}
	now = s.now(now)
	var r SweepReport
	var err error
	if r.Swept, err = s.SweepExpiredWorkers(ctx, now); err != nil {
		return r, err
	}
	if r.Reclaimed, err = s.ReclaimExpiredLeases(ctx, now, 0); err != nil {
		return r, err
	}
	if retention >= 0 {
		if r.Pruned, err = s.PruneWorkerEvents(ctx, now.Add(-retention)); err != nil {
			return r, err
		}
	}
	return r, nil
}

// RunSweeper runs Sweep on an interval until ctx ends (returning nil) or the
// Store is closed (returning ErrClosed). Failures of a run are logged and the
// next run goes ahead.
func (s *Store) RunSweeper(ctx context.Context, a SweeperArgs) error {
	interval := a.Interval
	if interval == 0 {
		interval = 10 * time.Second
	}
	if interval < 0 {
		return invalid("Interval", "%v is negative", interval)
	}
	retention := a.EventRetention
	after := a.After
	if after == nil {
		after = time.After
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-after(jitter(interval)):
		}
		r, err := s.Sweep(ctx, time.Time{}, retention)
		switch {
		case errors.Is(err, ErrClosed):
			return err
		case err != nil && ctx.Err() == nil:
			s.log.Warn("roster: sweeper run failed", "err", err)
		case r != SweepReport{}:
			s.log.Debug("roster: sweeper run", "swept", r.Swept, "reclaimed", r.Reclaimed, "pruned", r.Pruned)
		}
	}
}

// jitter spreads d by ±10% so that a fleet's timers do not align.
func jitter(d time.Duration) time.Duration {
	spread := int64(d) / 5
	if spread <= 0 {
		return d
	}
	return d - time.Duration(spread/2) + time.Duration(rand.Int64N(spread))
}
