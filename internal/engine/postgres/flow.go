package postgres

import (
	"context"

	"github.com/google/uuid"
	pgdb "github.com/rosterdb/roster/db/postgres"
	"github.com/rosterdb/roster/internal/engine"
)

// Flow control: lane limits, groups, and the claim of a lane that has
// either (queries/postgres/flow.sql; the claim is the server-side function
// roster_flow_claim, as schema/postgres/0018_flow_turns.up.sql defines it).

func (x queries) LaneLimitsDelete(ctx context.Context, namespace, lane string) error {
	_, err := x.q.LaneLimitsDelete(ctx, pgdb.LaneLimitsDeleteParams{Namespace: namespace, Lane: lane})
	return translate(err)
}

func (x queries) LaneTurnsTouch(ctx context.Context, es []engine.Execution) error {
	var p pgdb.LaneTurnsTouchParams
	for _, k := range engine.GroupedLanes(es) {
		p.Namespaces = append(p.Namespaces, k.Namespace)
		p.Lanes = append(p.Lanes, k.Lane)
	}
	if len(p.Namespaces) == 0 {
		return nil
	}
	return translate(x.q.LaneTurnsTouch(ctx, p))
}

// flowClaim claims for a worker one of whose lanes has limits or groups
// in one call of roster_flow_claim (ExecutionClaimFlow): the lane locks it
// takes last until the transaction of the call ends (the call alone, or the
// settle it is part of).
func (x queries) flowClaim(ctx context.Context, p engine.ClaimParams) (engine.ClaimResult, error) {
	rows, err := x.q.ExecutionClaimFlow(ctx, flowParams(p))
	if err != nil {
		return engine.ClaimResult{}, translate(err)
	}
	return flowResult(rows, p)
}

func flowParams(p engine.ClaimParams) pgdb.ExecutionClaimFlowParams {
	return pgdb.ExecutionClaimFlowParams{
		Namespace: p.Namespace, InstanceID: p.InstanceID, Now: p.NowMs, LeaseIds: p.LeaseIDs,
		ExpiresAtMs: p.StoredExpiresAtMs(), Bind: p.Bound, MaxBytes: p.Bytes(),
	}
}

// flowResult reads ExecutionClaimFlow's rows: a lease each, then what held
// the claim back (the nil id); none: the worker is not alive (ErrNoRows).
func flowResult(rows []pgdb.ExecutionClaimFlowRow, p engine.ClaimParams) (engine.ClaimResult, error) {
	var res engine.ClaimResult
	if len(rows) == 0 {
		return res, engine.ErrNoRows
	}
	for _, r := range rows {
		if r.ID == uuid.Nil {
			res.Held, res.NextRunAtMs, res.Flow = int(r.Held), r.NextRunAtMs, r.Flow
			continue
		}
		res.Leases = append(res.Leases, engine.ClaimedLease{
			ExecutionID: r.ID, LeaseID: r.LeaseID, AttemptIndex: r.Attempts, Epoch: r.Epoch,
			Namespace: p.Namespace, Lane: r.Lane, Payload: r.Payload,
			ExpiresAtMs: p.LeaseExpiresAtMs(r.ExpiresAtMs, r.HolderExpiresAtMs), DeadlineMs: r.DeadlineMs,
			Metadata: r.Metadata, RunAtMs: r.RunAtMs,
		})
	}
	return res, nil
}

// flowClaim runs the flow claim on its own, in autocommit.
func (e *Engine) flowClaim(ctx context.Context, p engine.ClaimParams) (engine.ClaimResult, error) {
	var res engine.ClaimResult
	err := e.write(ctx, func(ctx context.Context, q queries) error {
		var err error
		res, err = q.flowClaim(ctx, p)
		return err
	}, false)
	return res, err
}
