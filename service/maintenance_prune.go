package service

import (
	"context"
	"time"

	"github.com/rosterdb/roster/internal/engine"
)

// PruneExecutions deletes the executions that finished (FinishedAt) before
// before, with their attempts, in bounded batches (one transaction each,
// oldest first), and returns how many it deleted. Live executions are never
// touched; the cost does not grow with them.
func (s *Store) PruneExecutions(ctx context.Context, before time.Time) (int, error) {
	if err := s.notClosed(); err != nil {
		return 0, err
	}
	beforeMs, err := s.at("before", before)
	if err != nil {
		return 0, err
	}
	return maintenance{s: s}.pruneExecutions(ctx, beforeMs)
}

// pruneExecutions is the job of PruneExecutions; the unique keys whose hold
// ended go with them.
func (m maintenance) pruneExecutions(ctx context.Context, beforeMs int64) (int, error) {
	total := 0
	for {
		var n int
		err := m.write(ctx, func(ctx context.Context, q engine.Queries) error {
			var err error
			n, err = q.ExecutionPruneBatch(ctx, beforeMs, sweepBatchSize)
			return err
		})
		total += n
		if err != nil {
			return total, err
		}
		if n < sweepBatchSize {
			// A key is held until its UniqueFor ends, whatever the prune's
			// horizon: only keys whose hold ended by now may go.
			return total, m.pruneKeys(ctx, min(beforeMs, m.s.now(time.Time{}).UnixMilli()))
		}
	}
}

// pruneKeys deletes, in bounded batches, the unique keys whose UniqueFor
// ended before beforeMs.
func (m maintenance) pruneKeys(ctx context.Context, beforeMs int64) error {
	for {
		var n int
		err := m.write(ctx, func(ctx context.Context, q engine.Queries) error {
			var err error
			n, err = q.ExecutionKeyPruneBatch(ctx, beforeMs, sweepBatchSize)
			return err
		})
		if err != nil || n < sweepBatchSize {
			return err
		}
	}
}
