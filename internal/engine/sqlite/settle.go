package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/google/uuid"
	"github.com/rosterdb/roster/internal/engine"
)

// Settle writes every outcome and the claim in one write (one commit, shared
// with the writes queued beside it). An outcome whose lease is lost writes
// nothing and affects nothing else. Should any statement fail for another
// reason, the write is rolled back and done again with each outcome, and the
// claim, in a savepoint of its own, so that the error rolls back that part
// only. (Savepoints are kept off the common path: each one copies the pages
// it changes to a sub-journal.)
func (e *Engine) Settle(ctx context.Context, nowMs int64, outcomes []engine.Outcome, claim *engine.ClaimParams) engine.SettleResult {
	res := e.settle(ctx, nowMs, outcomes, claim, false)
	if res.isolate {
		res = e.settle(ctx, nowMs, outcomes, claim, true)
	}
	return res.SettleResult
}

// errIsolate rolls back a settle without savepoints that met an error.
var errIsolate = errors.New("roster: settle again with a savepoint per part")

type settleResult struct {
	engine.SettleResult
	isolate bool // the write without savepoints met an error: do it again with them
}

func (e *Engine) settle(ctx context.Context, nowMs int64, outcomes []engine.Outcome, claim *engine.ClaimParams, isolated bool) settleResult {
	res := settleResult{SettleResult: engine.SettleResult{Errs: make([]error, len(outcomes))}}
	// part runs one outcome, or the claim: in its own savepoint when
	// isolated; else an error other than ErrNoRows (which wrote nothing)
	// rolls back the whole write.
	part := func(ctx context.Context, tx *sql.Tx, fn func() error) (itemErr, fatal error) {
		if isolated {
			return savepoint(ctx, tx, fn)
		}
		err := fn()
		switch {
		case err == nil, errors.Is(err, engine.ErrNoRows):
			return err, nil
		case engine.Transient(err):
			return nil, err // SQLite may have rolled the transaction back: all of it failed
		}
		return nil, errIsolate
	}
	err := e.write(ctx, func(ctx context.Context, tx *sql.Tx, q queries) error {
		// Without savepoints, two or more completions go in one statement;
		// the fails and snoozes, one each. Outcomes for the same execution
		// are written one by one, in their order: the first that holds the
		// lease ends it.
		batched := !isolated && len(outcomes) > 1 && distinctExecutions(outcomes)
		var completes []int
		for i, o := range outcomes {
			if batched && !o.Fail && !o.Snooze {
				completes = append(completes, i)
				continue
			}
			itemErr, fatal := part(ctx, tx, func() error {
				switch {
				case o.Fail:
					return q.LeaseFail(ctx, o.Lease, nowMs, o.Reason)
				case o.Snooze:
					return q.LeaseSnooze(ctx, o.Lease, nowMs, o.RunAtMs)
				}
				return q.LeaseComplete(ctx, o.Lease, nowMs, o.Result)
			})
			if fatal != nil {
				return fatal
			}
			res.Errs[i] = itemErr
		}
		if len(completes) > 0 {
			leases := make([]engine.LeaseRef, len(completes))
			results := make([][]byte, len(completes))
			for k, i := range completes {
				leases[k], results[k] = outcomes[i].Lease, outcomes[i].Result
			}
			var done []engine.LeaseRef
			_, fatal := part(ctx, tx, func() error {
				var err error
				done, err = q.LeaseCompleteMany(ctx, leases, results, nowMs)
				return err
			})
			if fatal != nil {
				return fatal
			}
			completed := make(map[engine.LeaseRef]bool, len(done))
			for _, l := range done {
				completed[l] = true
			}
			for k, i := range completes {
				if !completed[leases[k]] {
					res.Errs[i] = engine.ErrNoRows // its lease was lost
				}
			}
		}
		if claim == nil {
			return nil
		}
		var claimed engine.ClaimResult
		itemErr, fatal := part(ctx, tx, func() error {
			var err error
			claimed, err = q.executionClaim(ctx, *claim)
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
	if errors.Is(err, errIsolate) {
		res.isolate = true
		return res
	}
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
			return nil, rolledBack(itemErr, err)
		}
	}
	if _, err := tx.ExecContext(ctx, "RELEASE item"); err != nil {
		return nil, translate(err)
	}
	return itemErr, nil
}

// distinctExecutions reports whether no two outcomes are of the same
// execution.
func distinctExecutions(outcomes []engine.Outcome) bool {
	seen := make(map[uuid.UUID]bool, len(outcomes))
	for _, o := range outcomes {
		if seen[o.Lease.ExecutionID] {
			return false
		}
		seen[o.Lease.ExecutionID] = true
	}
	return true
}
