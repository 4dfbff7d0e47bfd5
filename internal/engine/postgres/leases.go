package postgres

import (
	"context"

	"github.com/google/uuid"
	pgdb "github.com/rosterdb/roster/db/postgres"
	"github.com/rosterdb/roster/internal/engine"
)

// Claims and leases.

// executionClaim is one statement: the check for due scheduled work, the
// pick (FOR UPDATE SKIP LOCKED), the worker's liveness, the start and the
// next RunAt. When it found due scheduled work it claimed nothing: that work
// is made ready (ExecutionPromoteDue) and the claim runs again, so that the
// best of all claimable work wins.
func (x queries) executionClaim(ctx context.Context, p engine.ClaimParams) (engine.ClaimResult, error) {
	for try := 1; ; try++ {
		r, err := x.q.ExecutionClaim(ctx, pgdb.ExecutionClaimParams{
			LeaseIds: p.LeaseIDs, Namespace: p.Namespace, Now: p.NowMs, InstanceID: p.InstanceID,
			Promote: try <= maxPromotions, ExpiresAtMs: p.StoredExpiresAtMs(), Bind: p.Bound, MaxBytes: p.Bytes(),
		})
		if err != nil {
			return engine.ClaimResult{}, translate(err)
		}
		res, due, err := claimResult(r, p)
		if !due {
			return res, err
		}
		if _, err := x.q.ExecutionPromoteDue(ctx, pgdb.ExecutionPromoteDueParams{Namespace: p.Namespace, Now: p.NowMs}); err != nil {
			return engine.ClaimResult{}, translate(err)
		}
	}
}

func (x queries) LeaseRenew(ctx context.Context, l engine.LeaseRef, nowMs, expiresAtMs int64) (int64, error) {
	exp, err := x.q.LeaseRenew(ctx, pgdb.LeaseRenewParams{LeaseID: l.LeaseID, ExpiresAtMs: expiresAtMs, ID: l.ExecutionID, Epoch: l.Epoch, Now: nowMs})
	return exp.Int64, translate(err)
}

func (x queries) LeaseHolderExpiry(ctx context.Context, l engine.LeaseRef, nowMs int64) (int64, error) {
	exp, err := x.q.LeaseHolderExpiry(ctx, pgdb.LeaseHolderExpiryParams{LeaseID: l.LeaseID, ID: l.ExecutionID, Epoch: l.Epoch, Now: nowMs})
	return exp, translate(err)
}

func (x queries) LeaseRevokeLapsedBound(ctx context.Context, nowMs int64, batch int) (int, error) {
	n, err := x.q.LeaseRevokeLapsedBound(ctx, pgdb.LeaseRevokeLapsedBoundParams{Now: nowMs, BatchSize: int32(batch)})
	return int(n), translate(err)
}

func (x queries) LeaseRevokeBoundOfLapsed(ctx context.Context, k engine.WorkerKey, nowMs int64) error {
	return translate(x.q.LeaseRevokeBoundOfLapsed(ctx, pgdb.LeaseRevokeBoundOfLapsedParams{Namespace: k.Namespace, InstanceID: k.InstanceID, Now: nowMs}))
}

func (x queries) LeaseComplete(ctx context.Context, l engine.LeaseRef, nowMs int64, result []byte) error {
	_, err := x.q.LeaseComplete(ctx, pgdb.LeaseCompleteParams{LeaseID: l.LeaseID, Result: result, Now: nowMs, ID: l.ExecutionID, Epoch: l.Epoch})
	return translate(err)
}

func (x queries) LeaseCompleteMany(ctx context.Context, leases []engine.LeaseRef, results [][]byte, nowMs int64) ([]engine.LeaseRef, error) {
	p := pgdb.LeaseCompleteManyParams{Results: results, Now: nowMs}
	for _, l := range leases {
		p.Ids = append(p.Ids, l.ExecutionID)
		p.Epochs = append(p.Epochs, l.Epoch)
		p.LeaseIds = append(p.LeaseIds, l.LeaseID)
	}
	rows, err := x.q.LeaseCompleteMany(ctx, p)
	return engine.LeaseRefs(rows, err, translate)
}

func (x queries) LeaseRelease(ctx context.Context, l engine.LeaseRef, nowMs int64) error {
	_, err := x.q.LeaseRelease(ctx, pgdb.LeaseReleaseParams{LeaseID: l.LeaseID, ID: l.ExecutionID, Epoch: l.Epoch, Now: nowMs})
	return translate(err)
}

func (x queries) LeaseSnooze(ctx context.Context, l engine.LeaseRef, nowMs, runAtMs int64) error {
	_, err := x.q.LeaseSnooze(ctx, pgdb.LeaseSnoozeParams{
		RunAt: runAtMs, Now: nowMs, ID: l.ExecutionID, Epoch: l.Epoch, LeaseID: l.LeaseID,
	})
	return translate(err)
}

func (x queries) AttemptList(ctx context.Context, id uuid.UUID) ([]engine.Attempt, error) {
	rows, err := x.q.AttemptList(ctx, id)
	return engine.Rows(len(rows), err, translate, func(i int) engine.Attempt { return engine.Attempt(rows[i]) })
}

func (x queries) LeaseGetOutcome(ctx context.Context, l engine.LeaseRef) (string, error) {
	outcome, err := x.q.LeaseGetOutcome(ctx, pgdb.LeaseGetOutcomeParams{ID: l.ExecutionID, LeaseID: l.LeaseID, Epoch: l.Epoch})
	return outcome, translate(err)
}

func (x queries) LeaseFindHeld(ctx context.Context, k engine.WorkerKey, leaseIDs []uuid.UUID) ([]engine.LeaseRef, error) {
	rows, err := x.q.LeaseFindHeld(ctx, pgdb.LeaseFindHeldParams{Namespace: k.Namespace, Holder: k.InstanceID, LeaseIds: leaseIDs})
	return engine.LeaseRefs(rows, err, translate)
}

func (x queries) WorkerNextRunAt(ctx context.Context, k engine.WorkerKey, nowMs int64) (int64, error) {
	next, err := x.q.WorkerNextRunAt(ctx, pgdb.WorkerNextRunAtParams{Namespace: k.Namespace, InstanceID: k.InstanceID, Now: nowMs})
	return next, translate(err)
}

func (x queries) LeaseFail(ctx context.Context, l engine.LeaseRef, nowMs int64, reason string) error {
	_, err := x.q.LeaseFail(ctx, pgdb.LeaseFailParams{LeaseID: l.LeaseID, LastError: reason, Now: nowMs, ID: l.ExecutionID, Epoch: l.Epoch})
	return translate(err)
}

func (x queries) LeaseRevokeHeldBy(ctx context.Context, holders []engine.WorkerKey, nowMs int64) error {
	namespaces, instances := splitKeys(holders)
	return translate(x.q.LeaseRevokeHeldBy(ctx, pgdb.LeaseRevokeHeldByParams{Now: nowMs, Namespaces: namespaces, Holders: instances}))
}

func (x queries) LeaseListExpired(ctx context.Context, p engine.ExpiredLeaseListParams) ([]engine.ExpiredLease, error) {
	rows, err := x.q.LeaseListExpired(ctx, pgdb.LeaseListExpiredParams{
		AsOf: p.AsOfMs, Namespace: p.Namespace, AfterExpiresAtMs: p.AfterExpiresAtMs, AfterID: p.AfterExecutionID,
		MaxRows: int32(p.Limit),
	})
	return engine.ExpiredLeases(rows, err, translate)
}

func (x queries) LeaseReclaimBatch(ctx context.Context, nowMs int64, batch int) ([]uuid.UUID, error) {
	ids, err := x.q.LeaseReclaimBatch(ctx, pgdb.LeaseReclaimBatchParams{Now: nowMs, BatchSize: int32(batch)})
	return ids, translate(err)
}

// claimResult reads the claim statement's row: the leases it took, best
// first, the next RunAt when it took fewer than asked; due when it made due
// scheduled work ready and claimed nothing (claim again); ErrNoRows when the
// worker is not alive.
func claimResult(r pgdb.ExecutionClaimRow, p engine.ClaimParams) (res engine.ClaimResult, due bool, err error) {
	switch {
	case !r.Alive:
		return res, false, engine.ErrNoRows
	case r.Due:
		return res, true, nil
	case r.Flow:
		return res, false, errFlow
	}
	res.Leases = make([]engine.ClaimedLease, len(r.Ids))
	for i, id := range r.Ids {
		res.Leases[i] = engine.ClaimedLease{
			ExecutionID: id, LeaseID: r.LeaseIds[i], AttemptIndex: r.Attempts[i], Epoch: r.Epochs[i],
			Namespace: p.Namespace, Lane: r.Lanes[i], Payload: r.Payloads[i],
			ExpiresAtMs: p.LeaseExpiresAtMs(r.Expires[i], r.HolderExpiresAtMs), DeadlineMs: r.Deadlines[i],
			Metadata: r.Metadata[i], RunAtMs: r.RunAts[i],
		}
	}
	switch {
	case r.Bounded:
		res.NextRunAtMs = p.NowMs // more is claimable now
	case len(res.Leases) < len(p.LeaseIDs):
		res.NextRunAtMs = r.NextRunAtMs
	}
	return res, false, nil
}
