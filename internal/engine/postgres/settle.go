package postgres

import (
	"context"

	"github.com/rosterdb/roster/internal/engine"
)

// Claim runs the claim statement in autocommit: when nothing is claimable it
// locks nothing, so it takes no transaction id and writes no WAL.
func (e *Engine) Claim(ctx context.Context, p engine.ClaimParams) (engine.ClaimResult, error) {
	var res engine.ClaimResult
	err := e.WriteOne(ctx, func(ctx context.Context, q engine.Queries) error {
		var err error
		res, err = q.ExecutionClaim(ctx, p)
		return err
	})
	return res, err
}

// Settle writes the completions in one statement (LeaseCompleteMany, each
// lease fenced on its own), each failure in one statement, then claims; each
// statement in autocommit. When the completions' statement fails for a
// reason of its own (not the connection's, not the server's), each
// completion is written alone, so that one bad outcome fails no other.
func (e *Engine) Settle(ctx context.Context, nowMs int64, outcomes []engine.Outcome, claim *engine.ClaimParams) engine.SettleResult {
	res := engine.SettleResult{Errs: make([]error, len(outcomes))}
	var completes []int
	var refs []engine.LeaseRef
	var results [][]byte
	for i, o := range outcomes {
		if !o.Fail {
			completes = append(completes, i)
			refs = append(refs, o.Lease)
			results = append(results, o.Result)
		}
	}
	if len(completes) > 0 {
		var done []engine.LeaseRef
		err := e.WriteOne(ctx, func(ctx context.Context, q engine.Queries) error {
			var err error
			done, err = q.LeaseCompleteMany(ctx, refs, results, nowMs)
			return err
		})
		switch {
		case err == nil:
			written := make(map[engine.LeaseRef]bool, len(done))
			for _, l := range done {
				written[l] = true
			}
			for _, i := range completes {
				if !written[outcomes[i].Lease] {
					res.Errs[i] = engine.ErrNoRows
				}
			}
		case engine.Transient(err):
			for _, i := range completes {
				res.Errs[i] = err
			}
		default:
			for _, i := range completes {
				o := outcomes[i]
				res.Errs[i] = e.WriteOne(ctx, func(ctx context.Context, q engine.Queries) error {
					return q.LeaseComplete(ctx, o.Lease, nowMs, o.Result)
				})
			}
		}
	}
	for i, o := range outcomes {
		if o.Fail {
			res.Errs[i] = e.WriteOne(ctx, func(ctx context.Context, q engine.Queries) error {
				return q.LeaseFail(ctx, o.Lease, nowMs, o.Reason)
			})
		}
	}
	if claim != nil {
		res.Claim, res.ClaimErr = e.Claim(ctx, *claim)
	}
	return res
}
