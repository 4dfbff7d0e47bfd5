package service

import (
	"context"
	"time"

	"github.com/rosterdb/roster/internal/engine"
)

// sweepBatchSize bounds the rows one sweep, reclaim or prune transaction
// touches, so the writer is never held for long.
const sweepBatchSize = 256

// SweepExpiredWorkers deletes every worker with LastHeartbeat + TTL <= now,
// logs a ttl_swept event for each, ends their running leases at now and the
// live agents they hold (terminal, reason abandoned, at now), and returns how
// many it swept. It works in bounded batches, one transaction
// each, so that it never holds the writer for long.
func (s *Store) SweepExpiredWorkers(ctx context.Context, now time.Time) (int, error) {
	if err := s.notClosed(); err != nil {
		return 0, err
	}
	nowMs, err := s.at("now", now)
	if err != nil {
		return 0, err
	}
	return maintenance{s: s}.sweepWorkers(ctx, nowMs)
}

// sweepWorkers is the job of SweepExpiredWorkers.
func (m maintenance) sweepWorkers(ctx context.Context, nowMs int64) (int, error) {
	total := 0
	for {
		var n int
		err := m.write(ctx, func(ctx context.Context, q engine.Queries) error {
			keys, err := q.WorkerSweepBatch(ctx, nowMs, sweepBatchSize)
			if err != nil || len(keys) == 0 {
				return err
			}
			n = len(keys)
			if err := q.WorkerEventAppendSwept(ctx, keys, nowMs); err != nil {
				return err
			}
			if err := q.LeaseRevokeHeldBy(ctx, keys, nowMs); err != nil {
				return err
			}
			return abandonHeldAgents(ctx, q, keys, nowMs)
		})
		total += n
		if err != nil {
			return total, err
		}
		if n < sweepBatchSize {
			if total > 0 {
				m.s.lost.signal() // the swept workers' handlers, if they run here, stop at once
				m.s.cfg.observer.Swept(total)
				m.s.log.Info("roster: swept expired workers", "count", total)
			}
			return total, nil
		}
	}
}

// PruneWorkerEvents deletes the events with At < before, in bounded batches,
// and returns how many it deleted.
func (s *Store) PruneWorkerEvents(ctx context.Context, before time.Time) (int, error) {
	if err := s.notClosed(); err != nil {
		return 0, err
	}
	beforeMs, err := s.at("before", before)
	if err != nil {
		return 0, err
	}
	return maintenance{s: s}.pruneEvents(ctx, beforeMs)
}

// pruneEvents is the job of PruneWorkerEvents.
func (m maintenance) pruneEvents(ctx context.Context, beforeMs int64) (int, error) {
	total := 0
	for {
		var n int
		err := m.write(ctx, func(ctx context.Context, q engine.Queries) error {
			var err error
			n, err = q.WorkerEventPruneBatch(ctx, beforeMs, sweepBatchSize)
			return err
		})
		total += n
		if err != nil || n < sweepBatchSize {
			return total, err
		}
	}
}
