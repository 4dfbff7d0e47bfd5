package service

import (
	"context"
	"time"

	"github.com/rosterdb/roster/internal/engine"
)

// ReclaimExpiredLeases ends up to limit (0 = all) leases expired at now,
// soonest first (a bound lease expired when its holder's registration
// lapsed, was marked dead or swept): each execution returns to waiting with
// ReclaimCount + 1 while attempts remain, else ends failed, with LastError
// "timed out" when the lease reached its Deadline, else "lease expired". The old
// holders are fenced: their lease calls get ErrLeaseLost. It works in bounded
// batches, one transaction each.
func (s *Store) ReclaimExpiredLeases(ctx context.Context, now time.Time, limit int) (int, error) {
	if err := s.notClosed(); err != nil {
		return 0, err
	}
	if limit < 0 {
		return 0, invalid("limit", "%d is negative", limit)
	}
	nowMs, err := s.at("now", now)
	if err != nil {
		return 0, err
	}
	return maintenance{s: s}.reclaim(ctx, nowMs, limit)
}

// reclaim is the job of ReclaimExpiredLeases.
func (m maintenance) reclaim(ctx context.Context, nowMs int64, limit int) (int, error) {
	s := m.s
	total := 0
	for limit == 0 || total < limit {
		batch := sweepBatchSize
		if limit > 0 {
			batch = min(batch, limit-total)
		}
		var n int
		err := m.write(ctx, func(ctx context.Context, q engine.Queries) error {
			// Bound leases of holders that lapsed expire with them first.
			if _, err := q.LeaseRevokeLapsedBound(ctx, nowMs, batch); err != nil {
				return err
			}
			ids, err := q.LeaseReclaimBatch(ctx, nowMs, batch)
			n = len(ids)
			return err
		})
		total += n
		if err != nil {
			return total, err
		}
		if n < batch {
			break
		}
	}
	if total > 0 {
		s.roomFreed()
		s.work.signal() // executions with attempts left wait again
		s.lost.signal() // the old holders, if they run here, stop at once
		s.cfg.observer.Reclaimed(total)
		s.log.Info("roster: reclaimed expired leases", "count", total)
	}
	return total, nil
}
