package sqlite

import (
	"context"
	"database/sql"

	"github.com/rosterdb/roster/internal/engine"
)

// Claim looks on the read pool first: a claim that finds nothing claimable
// writes nothing (no BEGIN IMMEDIATE, no commit). Only when there is
// something to claim does it queue a write, which picks again under the
// write lock.
func (e *Engine) Claim(ctx context.Context, p engine.ClaimParams) (engine.ClaimResult, error) {
	if e.closed.Load() {
		return engine.ClaimResult{}, engine.ErrClosed
	}
	if e.writer == nil {
		return engine.ClaimResult{}, engine.ErrReadOnly
	}
	var found bool
	var next int64
	err := e.Read(ctx, func(ctx context.Context, q engine.Queries) error {
		x := q.(queries)
		cands, lanes, err := x.pick(ctx, p, 1)
		if err != nil || len(cands) > 0 {
			found = len(cands) > 0
			return err
		}
		next, err = x.nextRunAt(ctx, p.Namespace, lanes, p.NowMs)
		return err
	})
	if err != nil || !found {
		return engine.ClaimResult{NextRunAtMs: next}, err
	}
	var res engine.ClaimResult
	err = e.Write(ctx, func(ctx context.Context, q engine.Queries) error {
		var err error
		res, err = q.ExecutionClaim(ctx, p)
		return err
	})
	return res, err
}

// Settle writes every outcome and the claim in one write (one commit, shared
// with the writes queued beside it), each in a savepoint of its own, so that
// one outcome's error rolls back that outcome only.
func (e *Engine) Settle(ctx context.Context, nowMs int64, outcomes []engine.Outcome, claim *engine.ClaimParams) engine.SettleResult {
	res := engine.SettleResult{Errs: make([]error, len(outcomes))}
	err := e.write(ctx, func(ctx context.Context, tx *sql.Tx, q queries) error {
		for i, o := range outcomes {
			itemErr, fatal := savepoint(ctx, tx, func() error {
				if o.Fail {
					return q.LeaseFail(ctx, o.Lease, nowMs, o.Reason)
				}
				return q.LeaseComplete(ctx, o.Lease, nowMs, o.Result)
			})
			if fatal != nil {
				return fatal
			}
			res.Errs[i] = itemErr
		}
		if claim == nil {
			return nil
		}
		var claimed engine.ClaimResult
		itemErr, fatal := savepoint(ctx, tx, func() error {
			var err error
			claimed, err = q.ExecutionClaim(ctx, *claim)
			return err
		})
		if fatal != nil {
			return fatal
		}
		if itemErr == nil {
			res.Claim = claimed
		}
		res.ClaimErr = itemErr
		return nil
	})
	if err != nil {
		// Nothing of it committed.
		for i := range res.Errs {
			res.Errs[i] = err
		}
		res.Claim, res.ClaimErr = engine.ClaimResult{}, err
	}
	return res
}

// savepoint runs fn in a savepoint of tx: fn's error (itemErr) rolls back
// fn's work only; an error of the savepoint statements themselves (fatal)
// means the transaction is lost (SQLite may have rolled it back, as it does
// on a full disk).
func savepoint(ctx context.Context, tx *sql.Tx, fn func() error) (itemErr, fatal error) {
	if _, err := tx.ExecContext(ctx, "SAVEPOINT item"); err != nil {
		return nil, translate(err)
	}
	itemErr = fn()
	if itemErr != nil {
		if _, err := tx.ExecContext(ctx, "ROLLBACK TO item"); err != nil {
			return nil, translate(err)
		}
	}
	if _, err := tx.ExecContext(ctx, "RELEASE item"); err != nil {
		return nil, translate(err)
	}
	return itemErr, nil
}
