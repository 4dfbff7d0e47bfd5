package postgres

import (
	"context"
	"errors"

	"github.com/rosterdb/roster/internal/engine"
)

// The claim: Engine.ExecutionClaim, then queries.executionClaim (leases.go),
// the one statement ExecutionClaim of queries/postgres/leases.sql.

// ExecutionClaim is the claim: it runs the claim statement in autocommit: when nothing is claimable it
// locks nothing, so it takes no transaction id and writes no WAL.
func (e *Engine) ExecutionClaim(ctx context.Context, p engine.ClaimParams) (engine.ClaimResult, error) {
	k := engine.WorkerKey{Namespace: p.Namespace, InstanceID: p.InstanceID}
	if e.flowWorkers.Has(k) {
		res, err := e.flowClaim(ctx, p)
		if err == nil && !res.Flow {
			e.flowWorkers.Set(k, false) // its lanes no longer have limits or groups
		}
		return res, err
	}
	var res engine.ClaimResult
	err := e.write(ctx, func(ctx context.Context, q queries) error {
		var err error
		res, err = q.executionClaim(ctx, p)
		return err
	}, false)
	if err == errFlow {
		e.flowWorkers.Set(k, true)
		return e.flowClaim(ctx, p)
	}
	return res, err
}

// errFlow says the claim statement found that one of the worker's lanes has
// limits or groups and claimed nothing: the claim runs as a flow claim
// (flowClaim), in a transaction of its own.
var errFlow = errors.New("roster: the worker's lanes have limits or groups")
