package sqlite

import (
	"context"
	"database/sql"

	sqlitedb "github.com/rosterdb/roster/db/sqlite"
	"github.com/rosterdb/roster/internal/engine"
)

// The claim: Engine.ExecutionClaim, then queries.executionClaim (leases.go)
// under the write lock, over the statements of queries/sqlite/leases.sql.

// ExecutionClaim is the claim. It looks on the read pool first: a claim that finds nothing claimable
// (nothing ready, nothing scheduled that is due, or all of it held back by
// its lanes' limits) writes nothing (no BEGIN IMMEDIATE, no commit). Only
// when there is something to claim or to make ready does it queue a write,
// which looks again under the write lock. A worker whose last claim under
// the write lock took something skips the look (Engine.busy): it would most
// likely find work again, and only add its reads.
func (e *Engine) ExecutionClaim(ctx context.Context, p engine.ClaimParams) (engine.ClaimResult, error) {
	if e.closed.Load() {
		return engine.ClaimResult{}, engine.ErrClosed
	}
	if e.writer == nil {
		return engine.ClaimResult{}, engine.ErrReadOnly
	}
	k := engine.WorkerKey{Namespace: p.Namespace, InstanceID: p.InstanceID}
	if !e.busy.Has(k) {
		res, found, err := e.claimLook(ctx, p)
		if err != nil || !found {
			return res, err
		}
	}
	var res engine.ClaimResult
	err := e.write(ctx, func(ctx context.Context, _ *sql.Tx, q queries) error {
		var err error
		res, err = q.executionClaim(ctx, p)
		return err
	})
	// A claim that failed (the worker gone, the disk failing) forgets the
	// worker too: its next claims look first, on the read pool.
	e.busy.Set(k, err == nil && len(res.Leases) > 0)
	return res, err
}

// claimLook looks on the read pool whether a claim would find anything to
// claim or to make ready; when not, res says when to look again and how
// many lanes held work back.
func (e *Engine) claimLook(ctx context.Context, p engine.ClaimParams) (res engine.ClaimResult, found bool, err error) {
	var next int64
	held := 0
	err = e.readWith(ctx, func(ctx context.Context, x queries) error {
		due, err := x.q.ExecutionDueExists(ctx, sqlitedb.ExecutionDueExistsParams{Namespace: p.Namespace, Now: p.NowMs})
		if err != nil || due {
			found = due
			return translate(err)
		}
		if flow, err := x.flow(ctx, p); err != nil || flow {
			if err != nil {
				return err
			}
			// A look at what the lanes' limits allow, writing nothing.
			res, err := engine.FlowClaim(ctx, x, p, true)
			found, next, held = len(res.Leases) > 0, res.NextRunAtMs, res.Held
			return err
		}
		w, cands, err := x.pick(ctx, p, 1)
		if err != nil || len(cands) > 0 {
			found = len(cands) > 0
			return err
		}
		next, err = x.nextRunAt(ctx, p.Namespace, p.InstanceID, w, p.NowMs)
		return err
	})
	return engine.ClaimResult{NextRunAtMs: next, Held: held}, found, err
}
