package postgres

import (
	"context"

	"github.com/rosterdb/roster/internal/engine"
)

// The claim: Engine.ExecutionClaim, then queries.executionClaim (leases.go),
// the one statement ExecutionClaim of queries/postgres/leases.sql.

// ExecutionClaim is the claim: it runs the claim statement in autocommit: when nothing is claimable it
// locks nothing, so it takes no transaction id and writes no WAL.
func (e *Engine) ExecutionClaim(ctx context.Context, p engine.ClaimParams) (engine.ClaimResult, error) {
	var res engine.ClaimResult
	err := e.write(ctx, func(ctx context.Context, q queries) error {
		var err error
		res, err = q.executionClaim(ctx, p)
		return err
	}, false)
	return res, err
}
