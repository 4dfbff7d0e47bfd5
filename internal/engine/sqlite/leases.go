package sqlite

import (
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/google/uuid"
	sqlitedb "github.com/rosterdb/roster/db/sqlite"
	"github.com/rosterdb/roster/internal/engine"
)

// Claims and leases.

// executionClaim reads the worker and what its claim must do first
// (WorkerGetClaimPlan), makes the namespace's due scheduled executions ready
// when there are any (up to promoteBatch), hands a worker with a lane of
// limits or groups to FlowClaim, else picks the best candidates and starts
// each with a conditional UPDATE (state = 'waiting' in the statement that
// writes). The single writer runs the whole claim in one transaction, so no
// other claim can take a candidate between the pick and the start.
func (x queries) executionClaim(ctx context.Context, p engine.ClaimParams) (engine.ClaimResult, error) {
	plan, err := x.q.WorkerGetClaimPlan(ctx, sqlitedb.WorkerGetClaimPlanParams{Namespace: p.Namespace, InstanceID: p.InstanceID, Now: p.NowMs})
	if err = translate(err); err != nil {
		if err == engine.ErrNoRows {
			// Not alive: due work is made ready all the same, as by every
			// claim (a settle whose claim fails so still commits it).
			_, perr := x.q.ExecutionPromoteDue(ctx, sqlitedb.ExecutionPromoteDueParams{Namespace: p.Namespace, Now: p.NowMs, BatchSize: promoteBatch})
			err = cmp.Or(translate(perr), err)
		}
		return engine.ClaimResult{}, err
	}
	if plan.Due {
		if _, err := x.q.ExecutionPromoteDue(ctx, sqlitedb.ExecutionPromoteDueParams{Namespace: p.Namespace, Now: p.NowMs, BatchSize: promoteBatch}); err != nil {
			return engine.ClaimResult{}, translate(err)
		}
	}
	if plan.Flow {
		return engine.FlowClaim(ctx, x, p, false)
	}
	want := len(p.LeaseIDs)
	w := sqlitedb.WorkerGetClaimerRow{Capabilities: plan.Capabilities, ExpiresAtMs: plan.ExpiresAtMs, FirstLane: plan.FirstLane, LastLane: plan.LastLane}
	cands, err := x.candidates(ctx, p, w, want)
	if err != nil {
		return engine.ClaimResult{}, err
	}
	var res engine.ClaimResult
	bounded, size, take := false, int64(0), 0
	for _, c := range cands {
		if size += c.bytes; take > 0 && size > p.Bytes() {
			bounded = true // the rest would carry too many payload bytes
			break
		}
		take++
	}
	if res.Leases, err = x.startMany(ctx, p, cands[:take], w.ExpiresAtMs); err != nil {
		return engine.ClaimResult{}, translate(err)
	}
	switch {
	case bounded:
		res.NextRunAtMs = p.NowMs // more is claimable now
	case len(res.Leases) < want:
		if res.NextRunAtMs, err = x.nextRunAt(ctx, p.Namespace, p.InstanceID, w, p.NowMs); err != nil {
			return engine.ClaimResult{}, err
		}
	}
	return res, nil
}

func (x queries) WorkerNextRunAt(ctx context.Context, k engine.WorkerKey, nowMs int64) (int64, error) {
	w, err := x.q.WorkerGetClaimer(ctx, sqlitedb.WorkerGetClaimerParams{Namespace: k.Namespace, InstanceID: k.InstanceID, Now: nowMs})
	if err != nil {
		return 0, translate(err)
	}
	return x.nextRunAt(ctx, k.Namespace, k.InstanceID, w, nowMs)
}

// start starts one waiting execution under its new lease (ErrNoRows: no
// longer waiting), holderMs being the worker's expiry (a bound lease's).
func (x queries) start(ctx context.Context, p engine.ClaimParams, id, leaseID uuid.UUID, holderMs int64) (engine.ClaimedLease, error) {
	started, err := x.q.ExecutionStart(ctx, sqlitedb.ExecutionStartParams{
		LeaseID: leaseID.String(), Holder: p.InstanceID, Now: p.NowMs, ExpiresAtMs: p.StoredExpiresAtMs(),
		Bound: sqliteBool(p.Bound), ID: id,
	})
	if err != nil {
		return engine.ClaimedLease{}, err
	}
	return engine.ClaimedLease{
		ExecutionID: id, LeaseID: leaseID, AttemptIndex: started.Attempts, Epoch: started.Epoch,
		Namespace: p.Namespace, Lane: started.Lane, Payload: started.Payload,
		ExpiresAtMs: p.LeaseExpiresAtMs(started.ExpiresAtMs.Int64, holderMs), DeadlineMs: started.DeadlineMs.Int64,
		Metadata: started.Metadata.String, RunAtMs: started.RunAtMs,
	}, nil
}

// startMany starts the candidates, in their order, each under the next of
// p's lease ids: one statement for several (ExecutionStartMany).
func (x queries) startMany(ctx context.Context, p engine.ClaimParams, cands []candidate, holderMs int64) ([]engine.ClaimedLease, error) {
	if len(cands) <= 1 {
		var leases []engine.ClaimedLease
		for _, c := range cands {
			started, err := x.start(ctx, p, c.id, p.LeaseIDs[0], holderMs)
			if err != nil {
				return nil, err
			}
			leases = append(leases, started)
		}
		return leases, nil
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, c := range cands {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:%q", c.id.String(), p.LeaseIDs[i].String())
	}
	b.WriteByte('}')
	rows, err := x.q.ExecutionStartMany(ctx, sqlitedb.ExecutionStartManyParams{
		Leases: b.String(), Holder: p.InstanceID, Now: p.NowMs, ExpiresAtMs: p.StoredExpiresAtMs(), Bound: sqliteBool(p.Bound),
	})
	if err != nil {
		return nil, err
	}
	byID := make(map[uuid.UUID]sqlitedb.ExecutionStartManyRow, len(rows))
	for _, r := range rows {
		byID[r.ID] = r
	}
	leases := make([]engine.ClaimedLease, len(cands))
	for i, c := range cands {
		r, ok := byID[c.id]
		if !ok {
			return nil, engine.ErrNoRows // picked under the write lock: not reached
		}
		leases[i] = engine.ClaimedLease{
			ExecutionID: c.id, LeaseID: r.LeaseID.UUID, AttemptIndex: r.Attempts, Epoch: r.Epoch,
			Namespace: p.Namespace, Lane: r.Lane, Payload: r.Payload,
			ExpiresAtMs: p.LeaseExpiresAtMs(r.ExpiresAtMs.Int64, holderMs), DeadlineMs: r.DeadlineMs.Int64,
			Metadata: r.Metadata.String, RunAtMs: r.RunAtMs,
		}
	}
	return leases, nil
}

func (x queries) LeaseRenew(ctx context.Context, l engine.LeaseRef, nowMs, expiresAtMs int64) (int64, error) {
	exp, err := x.q.LeaseRenew(ctx, sqlitedb.LeaseRenewParams{LeaseID: l.LeaseID.String(), ExpiresAtMs: expiresAtMs, ID: l.ExecutionID, Epoch: l.Epoch, Now: nowMs})
	return exp.Int64, translate(err)
}

func (x queries) LeaseHolderExpiry(ctx context.Context, l engine.LeaseRef, nowMs int64) (int64, error) {
	exp, err := x.q.LeaseHolderExpiry(ctx, sqlitedb.LeaseHolderExpiryParams{LeaseID: l.LeaseID.String(), ID: l.ExecutionID, Epoch: l.Epoch, Now: nowMs})
	return exp, translate(err)
}

func (x queries) LeaseRevokeLapsedBound(ctx context.Context, nowMs int64, batch int) (int, error) {
	n, err := x.q.LeaseRevokeLapsedBound(ctx, sqlitedb.LeaseRevokeLapsedBoundParams{Now: nowMs, BatchSize: int64(batch)})
	return int(n), translate(err)
}

func (x queries) LeaseRevokeBoundOfLapsed(ctx context.Context, k engine.WorkerKey, nowMs int64) error {
	return translate(x.q.LeaseRevokeBoundOfLapsed(ctx, sqlitedb.LeaseRevokeBoundOfLapsedParams{Namespace: k.Namespace, InstanceID: k.InstanceID, Now: nowMs}))
}

// LeaseComplete ends the lease and its execution, fenced in its UPDATE (the
// lease stays on the row as its last).
func (x queries) LeaseComplete(ctx context.Context, l engine.LeaseRef, nowMs int64, result []byte) error {
	_, err := x.q.LeaseComplete(ctx, sqlitedb.LeaseCompleteParams{LeaseID: l.LeaseID.String(), Result: result, Now: nowMs, ID: l.ExecutionID, Epoch: l.Epoch})
	return translate(err)
}

// LeaseCompleteMany completes the leases, each fenced on its own, in one
// statement (LeaseCompleteBatch; one lease: LeaseComplete, which costs less
// than the batch's JSON); the leases it completed are returned in the order
// given.
func (x queries) LeaseCompleteMany(ctx context.Context, leases []engine.LeaseRef, results [][]byte, nowMs int64) ([]engine.LeaseRef, error) {
	switch len(leases) {
	case 0:
		return nil, nil
	case 1:
		switch err := x.LeaseComplete(ctx, leases[0], nowMs, results[0]); err {
		case nil:
			return leases, nil
		case engine.ErrNoRows:
			return nil, nil
		default:
			return nil, err
		}
	}
	var ls, rs strings.Builder
	keyed := make(map[engine.LeaseRef]bool, len(leases))
	ls.WriteByte('[')
	rs.WriteByte('{')
	for i, l := range leases {
		if i > 0 {
			ls.WriteByte(',')
		}
		fmt.Fprintf(&ls, "[%q,%d,%q]", l.ExecutionID.String(), l.Epoch, l.LeaseID.String())
		if results[i] != nil && !keyed[l] {
			keyed[l] = true // a lease given twice completes with its first result
			if rs.Len() > 1 {
				rs.WriteByte(',')
			}
			fmt.Fprintf(&rs, "\"%s:%d:%s\":%q", l.ExecutionID, l.Epoch, l.LeaseID, hex.EncodeToString(results[i]))
		}
	}
	ls.WriteByte(']')
	rs.WriteByte('}')
	rows, err := x.q.LeaseCompleteBatch(ctx, sqlitedb.LeaseCompleteBatchParams{Now: nowMs, Leases: ls.String(), Results: rs.String()})
	if err != nil {
		return nil, translate(err)
	}
	completed := make(map[engine.LeaseRef]bool, len(rows))
	for _, r := range rows {
		completed[engine.LeaseRef{ExecutionID: r.ID, Epoch: r.Epoch, LeaseID: r.LeaseID.UUID}] = true
	}
	var done []engine.LeaseRef
	for _, l := range leases {
		if completed[l] {
			done = append(done, l)
			delete(completed, l) // a lease given twice is completed once
		}
	}
	return done, nil
}

func (x queries) LeaseGetOutcome(ctx context.Context, l engine.LeaseRef) (string, error) {
	outcome, err := x.q.LeaseGetOutcome(ctx, sqlitedb.LeaseGetOutcomeParams{ID: l.ExecutionID, LeaseID: l.LeaseID.String(), Epoch: l.Epoch})
	return outcome, translate(err)
}

func (x queries) LeaseFindHeld(ctx context.Context, k engine.WorkerKey, leaseIDs []uuid.UUID) ([]engine.LeaseRef, error) {
	rows, err := x.q.LeaseFindHeld(ctx, sqlitedb.LeaseFindHeldParams{Namespace: k.Namespace, Holder: k.InstanceID, LeaseIds: mustJSON(leaseIDs)})
	return engine.LeaseRefs(rows, err, translate)
}

// LeaseRelease returns the execution to waiting, fenced in its UPDATE, then
// records the attempt as released, in the writer's transaction.
func (x queries) LeaseRelease(ctx context.Context, l engine.LeaseRef, nowMs int64) error {
	r, err := x.q.LeaseRelease(ctx, sqlitedb.LeaseReleaseParams{LeaseID: l.LeaseID.String(), Now: nowMs, ID: l.ExecutionID, Epoch: l.Epoch})
	if err != nil {
		return translate(err)
	}
	return x.record(ctx, ended{
		id: l.ExecutionID, attempts: r.Column1, epoch: l.Epoch, leaseID: r.LeaseID, namespace: r.Namespace,
		holder: r.Holder, claimedAtMs: r.ClaimedAtMs, expiresAtMs: r.ExpiresAtMs,
	}, "released", nowMs)
}

// LeaseSnooze returns the execution to waiting until runAtMs, fenced in its
// UPDATE, then records the attempt as snoozed, in the writer's transaction.
func (x queries) LeaseSnooze(ctx context.Context, l engine.LeaseRef, nowMs, runAtMs int64) error {
	r, err := x.q.LeaseSnooze(ctx, sqlitedb.LeaseSnoozeParams{
		RunAt: runAtMs, Now: nowMs, LeaseID: l.LeaseID.String(), ID: l.ExecutionID, Epoch: l.Epoch,
	})
	if err != nil {
		return translate(err)
	}
	return x.record(ctx, ended{
		id: l.ExecutionID, attempts: r.Column1, epoch: l.Epoch, leaseID: r.LeaseID, namespace: r.Namespace,
		holder: r.Holder, claimedAtMs: r.ClaimedAtMs, expiresAtMs: r.ExpiresAtMs,
	}, "snoozed", nowMs)
}

// AttemptList reads the recorded attempts and the row's lease in one query.
func (x queries) AttemptList(ctx context.Context, id uuid.UUID) ([]engine.Attempt, error) {
	rows, err := x.q.AttemptList(ctx, id)
	return engine.Rows(len(rows), err, translate, func(i int) engine.Attempt { return engine.Attempt(rows[i]) })
}

// LeaseFail ends the lease, fenced in its UPDATE, returning the execution to
// waiting or ending it, then records the attempt, in the writer's
// transaction.
func (x queries) LeaseFail(ctx context.Context, l engine.LeaseRef, nowMs int64, reason string) error {
	r, err := x.q.LeaseFail(ctx, sqlitedb.LeaseFailParams{LeaseID: l.LeaseID.String(), Now: nowMs, LastError: reason, ID: l.ExecutionID, Epoch: l.Epoch})
	if err != nil {
		return translate(err)
	}
	return x.record(ctx, ended{
		id: l.ExecutionID, attempts: r.Attempts, epoch: l.Epoch, leaseID: r.LeaseID, namespace: r.Namespace,
		holder: r.Holder, claimedAtMs: r.ClaimedAtMs, expiresAtMs: r.ExpiresAtMs, err: reason,
	}, "failed", nowMs)
}

func (x queries) LeaseRevokeHeldBy(ctx context.Context, holders []engine.WorkerKey, nowMs int64) error {
	return translate(x.q.LeaseRevokeHeldBy(ctx, sqlitedb.LeaseRevokeHeldByParams{Now: nowMs, Holders: keyPairs(holders)}))
}

func (x queries) LeaseListExpired(ctx context.Context, p engine.ExpiredLeaseListParams) ([]engine.ExpiredLease, error) {
	rows, err := x.q.LeaseListExpired(ctx, sqlitedb.LeaseListExpiredParams{
		AsOf: p.AsOfMs, Namespace: p.Namespace, AfterExpiresAtMs: p.AfterExpiresAtMs,
		AfterID: p.AfterExecutionID.String(), Limit: int64(p.Limit),
	})
	return engine.ExpiredLeases(rows, err, translate)
}

// LeaseReclaimBatch ends the expired leases in one UPDATE, then records
// each attempt as reclaimed, in the writer's transaction: ended now, or
// when its lease was revoked (at its expiry) for one that MarkWorkerDead, a
// sweep or its holder's lapse ended before.
func (x queries) LeaseReclaimBatch(ctx context.Context, nowMs int64, batch int) ([]uuid.UUID, error) {
	rows, err := x.q.LeaseReclaimBatch(ctx, sqlitedb.LeaseReclaimBatchParams{Now: nowMs, BatchSize: int64(batch)})
	if err != nil {
		return nil, translate(err)
	}
	ids := make([]uuid.UUID, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
		endedAt := nowMs
		if r.RevokedAtMs.Valid && r.ExpiresAtMs.Valid && r.ExpiresAtMs.Int64 < nowMs {
			endedAt = max(r.ExpiresAtMs.Int64, r.ClaimedAtMs.Int64) // never before it began
		}
		if err := x.record(ctx, ended{
			id: r.ID, attempts: r.Attempts, epoch: r.Epoch, leaseID: r.LeaseID, namespace: r.Namespace,
			holder: r.Holder, claimedAtMs: r.ClaimedAtMs, expiresAtMs: r.ExpiresAtMs, revokedAtMs: r.RevokedAtMs,
			err: r.LastError,
		}, "reclaimed", endedAt); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// pick reads an alive worker (ErrNoRows when it is not alive) and its
// candidates, up to want.
func (x queries) pick(ctx context.Context, p engine.ClaimParams, want int) (sqlitedb.WorkerGetClaimerRow, []candidate, error) {
	w, err := x.q.WorkerGetClaimer(ctx, sqlitedb.WorkerGetClaimerParams{Namespace: p.Namespace, InstanceID: p.InstanceID, Now: p.NowMs})
	if err != nil {
		return w, nil, translate(err)
	}
	cands, err := x.candidates(ctx, p, w, want)
	return w, cands, err
}

// candidates finds up to want of the best ready executions for the worker
// w, best first, with their payloads' sizes. A worker of one lane reads that
// lane's ready index; a worker of several reads the namespace's, testing
// each lane with one probe of worker_lanes, so the cost does not grow with
// the number of lanes. It only reads.
func (x queries) candidates(ctx context.Context, p engine.ClaimParams, w sqlitedb.WorkerGetClaimerRow, want int) ([]candidate, error) {
	var ids []candidate
	switch {
	case w.FirstLane == "":
		return nil, nil // no lanes: nothing is claimable
	case w.FirstLane == w.LastLane:
		rows, err := x.q.ExecutionPickOneLane(ctx, sqlitedb.ExecutionPickOneLaneParams{
			Namespace: p.Namespace, Lane: w.FirstLane, Capabilities: w.Capabilities, Limit: int64(want),
		})
		if err != nil {
			return nil, translate(err)
		}
		for _, r := range rows {
			ids = append(ids, candidate{id: r.ID, bytes: r.PayloadBytes})
		}
	default:
		rows, err := x.q.ExecutionPickManyLanes(ctx, sqlitedb.ExecutionPickManyLanesParams{
			Namespace: p.Namespace, InstanceID: p.InstanceID, Capabilities: w.Capabilities, Limit: int64(want),
		})
		if err != nil {
			return nil, translate(err)
		}
		for _, r := range rows {
			ids = append(ids, candidate{id: r.ID, bytes: r.PayloadBytes})
		}
	}
	return ids, nil
}

// nextRunAt is the earliest RunAt after now among the scheduled executions
// of the worker's lanes (0: none).
func (x queries) nextRunAt(ctx context.Context, namespace, instanceID string, w sqlitedb.WorkerGetClaimerRow, nowMs int64) (int64, error) {
	var next int64
	var err error
	switch {
	case w.FirstLane == "":
	case w.FirstLane == w.LastLane:
		next, err = x.q.ExecutionNextRunAtOneLane(ctx, sqlitedb.ExecutionNextRunAtOneLaneParams{Namespace: namespace, Lane: w.FirstLane, Now: nowMs})
	default:
		next, err = x.q.ExecutionNextRunAtManyLanes(ctx, sqlitedb.ExecutionNextRunAtManyLanesParams{Namespace: namespace, Now: nowMs, InstanceID: instanceID})
	}
	return next, translate(err)
}

// record writes the history row of an attempt that ended at nowMs.
func (x queries) record(ctx context.Context, a ended, state string, nowMs int64) error {
	return translate(x.q.AttemptInsert(ctx, sqlitedb.AttemptInsertParams{
		ExecutionID: a.id, Epoch: a.epoch, AttemptIndex: a.attempts, LeaseID: a.leaseID.UUID,
		Namespace: a.namespace, InstanceID: a.holder.String, State: state,
		ClaimedAtMs: a.claimedAtMs.Int64, ExpiresAtMs: a.expiresAtMs.Int64, EndedAtMs: nowMs, RevokedAtMs: a.revokedAtMs,
		Error: a.err,
	}))
}
