package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
	sqlitedb "github.com/rosterdb/roster/db/sqlite"
	"github.com/rosterdb/roster/internal/engine"
)

// queries implements engine.Queries on the code sqlc generated from
// queries/sqlite. Each method passes its driver error through translate.
type queries struct{ q *sqlitedb.Queries }

var _ engine.Queries = queries{}

// Workers.

func (x queries) WorkerGet(ctx context.Context, k engine.WorkerKey) (engine.Worker, error) {
	r, err := x.q.WorkerGet(ctx, sqlitedb.WorkerGetParams{Namespace: k.Namespace, InstanceID: k.InstanceID})
	if err != nil {
		return engine.Worker{}, translate(err)
	}
	return workerFromRow(r)
}

func (x queries) WorkerGetAlive(ctx context.Context, k engine.WorkerKey, nowMs int64) (engine.Worker, error) {
	r, err := x.q.WorkerGetAlive(ctx, sqlitedb.WorkerGetAliveParams{Namespace: k.Namespace, InstanceID: k.InstanceID, Now: nowMs})
	if err != nil {
		return engine.Worker{}, translate(err)
	}
	return workerFromRow(r)
}

func (x queries) WorkerRefresh(ctx context.Context, w engine.Worker) (int64, error) {
	at, err := x.q.WorkerRefresh(ctx, sqlitedb.WorkerRefreshParams{
		Lanes: jsonArray(w.Lanes), Capabilities: jsonArray(w.Capabilities), Now: w.LastHeartbeatMs,
		TtlMs: w.TTLMs, Namespace: w.Namespace, InstanceID: w.InstanceID, WorkerID: w.WorkerID,
	})
	return at, translate(err)
}

func (x queries) WorkerRegister(ctx context.Context, w engine.Worker) error {
	_, err := x.q.WorkerRegister(ctx, sqlitedb.WorkerRegisterParams{
		Namespace: w.Namespace, InstanceID: w.InstanceID, WorkerID: w.WorkerID,
		Lanes: jsonArray(w.Lanes), Capabilities: jsonArray(w.Capabilities), Now: w.LastHeartbeatMs, TtlMs: w.TTLMs,
	})
	return translate(err)
}

func (x queries) WorkerHeartbeat(ctx context.Context, k engine.WorkerKey, nowMs int64, logEvent bool) (int64, error) {
	ttl, err := x.q.WorkerHeartbeat(ctx, sqlitedb.WorkerHeartbeatParams{Now: nowMs, Namespace: k.Namespace, InstanceID: k.InstanceID})
	if err != nil || !logEvent {
		return ttl, translate(err)
	}
	return ttl, x.WorkerEventAppend(ctx, engine.WorkerEvent{
		Namespace: k.Namespace, InstanceID: k.InstanceID, Kind: "heartbeat", AtMs: nowMs,
	})
}

func (x queries) WorkerDelete(ctx context.Context, k engine.WorkerKey) (bool, error) {
	n, err := x.q.WorkerDelete(ctx, sqlitedb.WorkerDeleteParams{Namespace: k.Namespace, InstanceID: k.InstanceID})
	return n > 0, translate(err)
}

func (x queries) WorkerList(ctx context.Context, p engine.WorkerListParams) ([]engine.Worker, error) {
	var rows []sqlitedb.Worker
	var err error
	if p.Namespace != "" {
		rows, err = x.q.WorkerListByNamespace(ctx, sqlitedb.WorkerListByNamespaceParams{
			Namespace: p.Namespace, AfterInstanceID: p.AfterInstanceID, Limit: int64(p.Limit),
		})
	} else {
		rows, err = x.q.WorkerListAll(ctx, sqlitedb.WorkerListAllParams{
			AfterNamespace: p.AfterNamespace, AfterInstanceID: p.AfterInstanceID, Limit: int64(p.Limit),
		})
	}
	if err != nil {
		return nil, translate(err)
	}
	out := make([]engine.Worker, len(rows))
	for i, r := range rows {
		if out[i], err = workerFromRow(r); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (x queries) WorkerSweepBatch(ctx context.Context, nowMs int64, batch int) ([]engine.WorkerKey, error) {
	rows, err := x.q.WorkerSweepBatch(ctx, sqlitedb.WorkerSweepBatchParams{Now: nowMs, BatchSize: int64(batch)})
	if err != nil {
		return nil, translate(err)
	}
	keys := make([]engine.WorkerKey, len(rows))
	for i, r := range rows {
		keys[i] = engine.WorkerKey{Namespace: r.Namespace, InstanceID: r.InstanceID}
	}
	return keys, nil
}

func (x queries) WorkerEventAppend(ctx context.Context, e engine.WorkerEvent) error {
	return translate(x.q.WorkerEventAppend(ctx, sqlitedb.WorkerEventAppendParams{
		Namespace: e.Namespace, InstanceID: e.InstanceID, Kind: e.Kind, AtMs: e.AtMs, Reason: e.Reason,
	}))
}

func (x queries) WorkerEventAppendSwept(ctx context.Context, keys []engine.WorkerKey, atMs int64) error {
	return translate(x.q.WorkerEventAppendSwept(ctx, sqlitedb.WorkerEventAppendSweptParams{AtMs: atMs, Instances: keyPairs(keys)}))
}

func (x queries) WorkerEventList(ctx context.Context, p engine.WorkerEventListParams) ([]engine.WorkerEvent, error) {
	var rows []sqlitedb.WorkerEvent
	var err error
	switch {
	case p.InstanceID != "":
		rows, err = x.q.WorkerEventListByInstance(ctx, sqlitedb.WorkerEventListByInstanceParams{
			InstanceID: p.InstanceID, Namespace: p.Namespace, AfterSeq: p.AfterSeq, Limit: int64(p.Limit),
		})
	case p.Namespace != "":
		rows, err = x.q.WorkerEventListByNamespace(ctx, sqlitedb.WorkerEventListByNamespaceParams{
			Namespace: p.Namespace, AfterSeq: p.AfterSeq, Limit: int64(p.Limit),
		})
	default:
		rows, err = x.q.WorkerEventList(ctx, sqlitedb.WorkerEventListParams{AfterSeq: p.AfterSeq, Limit: int64(p.Limit)})
	}
	if err != nil {
		return nil, translate(err)
	}
	out := make([]engine.WorkerEvent, len(rows))
	for i, r := range rows {
		out[i] = engine.WorkerEvent{Seq: r.Seq, Namespace: r.Namespace, InstanceID: r.InstanceID, Kind: r.Kind, AtMs: r.AtMs, Reason: r.Reason}
	}
	return out, nil
}

func (x queries) WorkerEventLatest(ctx context.Context, namespace string, n int) ([]engine.WorkerEvent, error) {
	var rows []sqlitedb.WorkerEvent
	var err error
	if namespace == "" {
		rows, err = x.q.WorkerEventListLatest(ctx, int64(n))
	} else {
		rows, err = x.q.WorkerEventListLatestByNamespace(ctx, sqlitedb.WorkerEventListLatestByNamespaceParams{Namespace: namespace, Limit: int64(n)})
	}
	if err != nil {
		return nil, translate(err)
	}
	out := make([]engine.WorkerEvent, len(rows))
	for i, r := range rows {
		out[i] = engine.WorkerEvent{Seq: r.Seq, Namespace: r.Namespace, InstanceID: r.InstanceID, Kind: r.Kind, AtMs: r.AtMs, Reason: r.Reason}
	}
	return out, nil
}

func (x queries) WorkerEventPruneBatch(ctx context.Context, beforeMs int64, batch int) (int, error) {
	n, err := x.q.WorkerEventPruneBatch(ctx, sqlitedb.WorkerEventPruneBatchParams{BeforeMs: beforeMs, BatchSize: int64(batch)})
	return int(n), translate(err)
}

// Executions and leases.

func (x queries) ExecutionInsert(ctx context.Context, e engine.Execution) error {
	payload := e.Payload
	if payload == nil {
		payload = []byte{}
	}
	return translate(x.q.ExecutionInsert(ctx, sqlitedb.ExecutionInsertParams{
		ID: e.ID, Namespace: e.Namespace, Lane: e.Lane, Priority: e.Priority, Payload: payload,
		RequiredCapabilities: jsonArray(e.RequiredCapabilities), MaxAttempts: e.MaxAttempts, CreatedAtMs: e.CreatedAtMs,
		RunAtMs: e.RunAtMs, RetryBackoffMs: e.RetryBackoffMs, Ready: sqliteBool(e.ReadyAtCreate()),
	}))
}

// ExecutionInsertMany inserts one by one in the writer's transaction: the
// single writer makes a prepared insert per row cheap.
func (x queries) ExecutionInsertMany(ctx context.Context, es []engine.Execution) error {
	for _, e := range es {
		if err := x.ExecutionInsert(ctx, e); err != nil {
			return err
		}
	}
	return nil
}

func (x queries) ExecutionGet(ctx context.Context, id uuid.UUID) (engine.Execution, error) {
	r, err := x.q.ExecutionGet(ctx, id)
	if err != nil {
		return engine.Execution{}, translate(err)
	}
	return executionFromRow(r)
}

func executionFromRow(r sqlitedb.Execution) (engine.Execution, error) {
	caps, err := parseJSONArray(r.RequiredCapabilities)
	if err != nil {
		return engine.Execution{}, err
	}
	return engine.Execution{
		ID: r.ID, Namespace: r.Namespace, Lane: r.Lane, State: r.State, Priority: r.Priority,
		Payload: r.Payload, Result: r.Result, RequiredCapabilities: caps,
		Attempts: r.Attempts, MaxAttempts: r.MaxAttempts, ReclaimCount: r.ReclaimCount,
		LastError: r.LastError, CreatedAtMs: r.CreatedAtMs, RunAtMs: r.RunAtMs, RetryBackoffMs: r.RetryBackoffMs,
		Holder: r.Holder.String, ClaimedAtMs: r.ClaimedAtMs.Int64, ExpiresAtMs: r.ExpiresAtMs.Int64,
		FinishedAtMs: r.FinishedAtMs.Int64, UniqueKey: r.UniqueKey.String,
	}, nil
}

// ExecutionList runs the query of its leading filter (namespace, else
// state, else lane), each walking an index in id order (running executions:
// the live rows of the running index, sorted); the other filters are applied
// along the way.
func (x queries) ExecutionList(ctx context.Context, p engine.ExecutionListParams) ([]engine.Execution, error) {
	if p.Newest {
		return x.executionListNewest(ctx, p)
	}
	n := int64(p.Limit)
	var rows []sqlitedb.Execution
	var err error
	switch {
	case p.Namespace != "":
		rows, err = x.q.ExecutionListByNamespace(ctx, sqlitedb.ExecutionListByNamespaceParams{
			Namespace: p.Namespace, AfterID: p.AfterID, Lane: p.Lane, State: p.State, Limit: n,
		})
	case p.State == "running":
		rows, err = x.q.ExecutionListRunning(ctx, sqlitedb.ExecutionListRunningParams{AfterID: p.AfterID, Lane: p.Lane, Limit: n})
	case p.State != "":
		rows, err = x.q.ExecutionListByState(ctx, sqlitedb.ExecutionListByStateParams{State: p.State, AfterID: p.AfterID, Lane: p.Lane, Limit: n})
	case p.Lane != "":
		rows, err = x.q.ExecutionListByLane(ctx, sqlitedb.ExecutionListByLaneParams{Lane: p.Lane, AfterID: p.AfterID, Limit: n})
	default:
		rows, err = x.q.ExecutionList(ctx, sqlitedb.ExecutionListParams{AfterID: p.AfterID, Limit: n})
	}
	if err != nil {
		return nil, translate(err)
	}
	out := make([]engine.Execution, len(rows))
	for i, r := range rows {
		if out[i], err = executionFromRow(r); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ExecutionCancel records a running execution's attempt as cancelled, then
// ends the execution, in the writer's transaction.
func (x queries) ExecutionCancel(ctx context.Context, id uuid.UUID, reason string, nowMs int64) (bool, error) {
	if err := x.q.AttemptInsertCancelled(ctx, sqlitedb.AttemptInsertCancelledParams{Now: nowMs, ID: id}); err != nil {
		return false, translate(err)
	}
	_, err := x.q.ExecutionCancel(ctx, sqlitedb.ExecutionCancelParams{Reason: reason, Now: nowMs, ID: id})
	if err = translate(err); err == engine.ErrNoRows {
		return false, nil
	}
	return err == nil, err
}

func (x queries) ExecutionGetState(ctx context.Context, id uuid.UUID) (string, error) {
	st, err := x.q.ExecutionGetState(ctx, id)
	return st, translate(err)
}

func (x queries) ExecutionPruneBatch(ctx context.Context, beforeMs int64, batch int) (int, error) {
	n, err := x.q.ExecutionPruneBatch(ctx, sqlitedb.ExecutionPruneBatchParams{Before: beforeMs, BatchSize: int64(batch)})
	return int(n), translate(err)
}

// promoteBatch is how many due scheduled executions a claim makes ready at
// once.
const promoteBatch = 1000

// ExecutionClaim makes the namespace's due scheduled executions ready (up to
// promoteBatch), picks the best candidates (pick), and starts each with a
// conditional UPDATE (state = 'waiting' in the statement that writes). The
// single writer runs the whole claim in one transaction, so no other claim
// can take a candidate between the pick and the start.
func (x queries) ExecutionClaim(ctx context.Context, p engine.ClaimParams) (engine.ClaimResult, error) {
	if _, err := x.q.ExecutionPromoteDue(ctx, sqlitedb.ExecutionPromoteDueParams{Namespace: p.Namespace, Now: p.NowMs, BatchSize: promoteBatch}); err != nil {
		return engine.ClaimResult{}, translate(err)
	}
	want := len(p.LeaseIDs)
	w, cands, err := x.pick(ctx, p, want)
	if err != nil {
		return engine.ClaimResult{}, err
	}
	var res engine.ClaimResult
	bounded, size := false, int64(0)
	for _, c := range cands {
		if size += c.bytes; len(res.Leases) > 0 && size > p.Bytes() {
			bounded = true // the rest would carry too many payload bytes
			break
		}
		id := c.id
		leaseID := p.LeaseIDs[len(res.Leases)]
		started, err := x.q.ExecutionStart(ctx, sqlitedb.ExecutionStartParams{
			LeaseID: leaseID.String(), Holder: p.InstanceID, Now: p.NowMs, ExpiresAtMs: p.ExpiresAtMs, ID: id,
		})
		if err != nil {
			return engine.ClaimResult{}, translate(err)
		}
		res.Leases = append(res.Leases, engine.ClaimedLease{
			ExecutionID: id, LeaseID: leaseID, AttemptIndex: started.Attempts, Epoch: started.Epoch,
			Namespace: p.Namespace, Lane: started.Lane, Payload: started.Payload, ExpiresAtMs: p.ExpiresAtMs,
		})
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

// candidate is an execution a claim may take, with its payload's size.
type candidate struct {
	id    uuid.UUID
	bytes int64
}

// pick finds up to want of the best ready executions for an alive worker
// (ErrNoRows when it is not alive), best first, with their payloads' sizes,
// and returns the worker. A
// worker of one lane reads that lane's ready index; a worker of several
// reads the namespace's, testing each lane with one probe of worker_lanes,
// so the cost does not grow with the number of lanes. It only reads.
func (x queries) pick(ctx context.Context, p engine.ClaimParams, want int) (sqlitedb.WorkerGetClaimerRow, []candidate, error) {
	w, err := x.q.WorkerGetClaimer(ctx, sqlitedb.WorkerGetClaimerParams{Namespace: p.Namespace, InstanceID: p.InstanceID, Now: p.NowMs})
	if err != nil {
		return w, nil, translate(err)
	}
	var ids []candidate
	switch {
	case w.FirstLane == "":
		return w, nil, nil // no lanes: nothing is claimable
	case w.FirstLane == w.LastLane:
		rows, err := x.q.ExecutionPickOneLane(ctx, sqlitedb.ExecutionPickOneLaneParams{
			Namespace: p.Namespace, Lane: w.FirstLane, Capabilities: w.Capabilities, Limit: int64(want),
		})
		if err != nil {
			return w, nil, translate(err)
		}
		for _, r := range rows {
			ids = append(ids, candidate{id: r.ID, bytes: r.PayloadBytes})
		}
	default:
		rows, err := x.q.ExecutionPickManyLanes(ctx, sqlitedb.ExecutionPickManyLanesParams{
			Namespace: p.Namespace, InstanceID: p.InstanceID, Capabilities: w.Capabilities, Limit: int64(want),
		})
		if err != nil {
			return w, nil, translate(err)
		}
		for _, r := range rows {
			ids = append(ids, candidate{id: r.ID, bytes: r.PayloadBytes})
		}
	}
	return w, ids, nil
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

func (x queries) WorkerNextRunAt(ctx context.Context, k engine.WorkerKey, nowMs int64) (int64, error) {
	w, err := x.q.WorkerGetClaimer(ctx, sqlitedb.WorkerGetClaimerParams{Namespace: k.Namespace, InstanceID: k.InstanceID, Now: nowMs})
	if err != nil {
		return 0, translate(err)
	}
	return x.nextRunAt(ctx, k.Namespace, k.InstanceID, w, nowMs)
}

func (x queries) LeaseRenew(ctx context.Context, l engine.LeaseRef, nowMs, expiresAtMs int64) error {
	_, err := x.q.LeaseRenew(ctx, sqlitedb.LeaseRenewParams{LeaseID: l.LeaseID.String(), ExpiresAtMs: expiresAtMs, ID: l.ExecutionID, Epoch: l.Epoch, Now: nowMs})
	return translate(err)
}

// ended is the lease of an attempt that just ended, to record.
type ended struct {
	id                       uuid.UUID
	attempts, epoch          int64
	leaseID                  uuid.NullUUID
	namespace                string
	holder                   sql.NullString
	claimedAtMs, expiresAtMs sql.NullInt64
	revokedAtMs              sql.NullInt64
}

// record writes the history row of an attempt that ended at nowMs.
func (x queries) record(ctx context.Context, a ended, state string, nowMs int64) error {
	return translate(x.q.AttemptInsert(ctx, sqlitedb.AttemptInsertParams{
		ExecutionID: a.id, Epoch: a.epoch, AttemptIndex: a.attempts, LeaseID: a.leaseID.UUID,
		Namespace: a.namespace, InstanceID: a.holder.String, State: state,
		ClaimedAtMs: a.claimedAtMs.Int64, ExpiresAtMs: a.expiresAtMs.Int64, EndedAtMs: nowMs, RevokedAtMs: a.revokedAtMs,
	}))
}

// LeaseComplete ends the lease and its execution, fenced in its UPDATE (the
// lease stays on the row as its last).
func (x queries) LeaseComplete(ctx context.Context, l engine.LeaseRef, nowMs int64, result []byte) error {
	_, err := x.q.LeaseComplete(ctx, sqlitedb.LeaseCompleteParams{LeaseID: l.LeaseID.String(), Result: result, Now: nowMs, ID: l.ExecutionID, Epoch: l.Epoch})
	return translate(err)
}

// LeaseCompleteMany completes each lease in turn, in the writer's
// transaction (the single writer makes one statement per lease cheap).
func (x queries) LeaseCompleteMany(ctx context.Context, leases []engine.LeaseRef, results [][]byte, nowMs int64) ([]engine.LeaseRef, error) {
	var done []engine.LeaseRef
	for i, l := range leases {
		err := x.LeaseComplete(ctx, l, nowMs, results[i])
		if err == engine.ErrNoRows {
			continue
		}
		if err != nil {
			return nil, err
		}
		done = append(done, l)
	}
	return done, nil
}

func (x queries) LeaseGetOutcome(ctx context.Context, l engine.LeaseRef) (string, error) {
	outcome, err := x.q.LeaseGetOutcome(ctx, sqlitedb.LeaseGetOutcomeParams{ID: l.ExecutionID, LeaseID: l.LeaseID.String(), Epoch: l.Epoch})
	return outcome, translate(err)
}

func (x queries) LeaseFindHeld(ctx context.Context, k engine.WorkerKey, leaseIDs []uuid.UUID) ([]engine.LeaseRef, error) {
	rows, err := x.q.LeaseFindHeld(ctx, sqlitedb.LeaseFindHeldParams{Namespace: k.Namespace, Holder: k.InstanceID, LeaseIds: mustJSON(leaseIDs)})
	if err != nil {
		return nil, translate(err)
	}
	out := make([]engine.LeaseRef, len(rows))
	for i, r := range rows {
		out[i] = engine.LeaseRef{ExecutionID: r.ID, LeaseID: r.LeaseID.UUID, Epoch: r.Epoch}
	}
	return out, nil
}

// LeaseRelease returns the execution to waiting, fenced in its UPDATE; a
// released attempt never ran and is not recorded.
func (x queries) LeaseRelease(ctx context.Context, l engine.LeaseRef, nowMs int64) error {
	_, err := x.q.LeaseRelease(ctx, sqlitedb.LeaseReleaseParams{LeaseID: l.LeaseID.String(), Now: nowMs, ID: l.ExecutionID, Epoch: l.Epoch})
	return translate(err)
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
		holder: r.Holder, claimedAtMs: r.ClaimedAtMs, expiresAtMs: r.ExpiresAtMs,
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
	if err != nil {
		return nil, translate(err)
	}
	out := make([]engine.ExpiredLease, len(rows))
	for i, r := range rows {
		out[i] = engine.ExpiredLease{
			ExecutionID: r.ID, LeaseID: r.LeaseID.UUID, AttemptIndex: r.Attempts, Epoch: r.Epoch,
			Namespace: r.Namespace, InstanceID: r.Holder.String, ExpiresAtMs: r.ExpiresAtMs.Int64,
		}
	}
	return out, nil
}

// LeaseReclaimBatch ends the expired leases in one UPDATE, then records
// each attempt as reclaimed, in the writer's transaction.
func (x queries) LeaseReclaimBatch(ctx context.Context, nowMs int64, batch int) ([]uuid.UUID, error) {
	rows, err := x.q.LeaseReclaimBatch(ctx, sqlitedb.LeaseReclaimBatchParams{Now: nowMs, BatchSize: int64(batch)})
	if err != nil {
		return nil, translate(err)
	}
	ids := make([]uuid.UUID, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
		if err := x.record(ctx, ended{
			id: r.ID, attempts: r.Attempts, epoch: r.Epoch, leaseID: r.LeaseID, namespace: r.Namespace,
			holder: r.Holder, claimedAtMs: r.ClaimedAtMs, expiresAtMs: r.ExpiresAtMs, revokedAtMs: r.RevokedAtMs,
		}, "reclaimed", nowMs); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// Agents.

func (x queries) AgentInsert(ctx context.Context, a engine.Agent) error {
	return translate(x.q.AgentInsert(ctx, sqlitedb.AgentInsertParams(agentParams(a))))
}

func (x queries) AgentSpawn(ctx context.Context, a engine.Agent) (bool, error) {
	n, err := x.q.AgentSpawn(ctx, agentParams(a))
	return n > 0, translate(err)
}

func agentParams(a engine.Agent) sqlitedb.AgentSpawnParams {
	return sqlitedb.AgentSpawnParams{
		ID:                     a.ID,
		State:                  a.State,
		TerminalReason:         nullString(a.TerminalReason),
		Provider:               a.Provider,
		ProviderSessionID:      nullString(a.ProviderSessionID),
		CheckpointSessionID:    nullString(a.CheckpointSessionID),
		CheckpointCursor:       a.CheckpointCursor,
		OwnerActor:             a.OwnerActor,
		OwnerPeerClass:         a.OwnerPeerClass,
		OwnerWriteNamespace:    a.OwnerWriteNamespace,
		OwnerVisibleNamespaces: jsonArray(a.OwnerVisibleNamespaces),
		SpawnFingerprint:       a.SpawnFingerprint,
		SpawnedAtMs:            a.SpawnedAtMs,
		StateChangedAtMs:       a.StateChangedAtMs,
		IdempotencyKey:         nullString(a.IdempotencyKey),
		Host:                   nullString(a.Host),
	}
}

func (x queries) AgentGet(ctx context.Context, id string) (engine.Agent, error) {
	return agentFromRow(x.q.AgentGet(ctx, id))
}

func (x queries) AgentSetState(ctx context.Context, id, fromState, state, reason string, atMs int64) (bool, error) {
	n, err := x.q.AgentSetState(ctx, sqlitedb.AgentSetStateParams{
		State: state, TerminalReason: nullString(reason), StateChangedAtMs: atMs, ID: id, FromState: fromState,
	})
	return n > 0, translate(err)
}

func (x queries) AgentSetCheckpoint(ctx context.Context, id, sessionID string, cursor int64) (bool, error) {
	n, err := x.q.AgentSetCheckpoint(ctx, sqlitedb.AgentSetCheckpointParams{
		ID: id, CheckpointSessionID: nullString(sessionID), CheckpointCursor: cursor,
	})
	return n > 0, translate(err)
}

func (x queries) AgentFindByIdempotencyKey(ctx context.Context, ownerActor, key string) (engine.Agent, error) {
	return agentFromRow(x.q.AgentFindByIdempotencyKey(ctx, sqlitedb.AgentFindByIdempotencyKeyParams{
		OwnerActor: ownerActor, IdempotencyKey: nullString(key),
	}))
}

func (x queries) AgentFindLiveByProviderSession(ctx context.Context, provider, sessionID string) (engine.Agent, error) {
	return agentFromRow(x.q.AgentFindLiveByProviderSession(ctx, sqlitedb.AgentFindLiveByProviderSessionParams{
		Provider: provider, ProviderSessionID: nullString(sessionID),
	}))
}

func (x queries) AgentTerminateLive(ctx context.Context, atMs int64) (int, error) {
	n, err := x.q.AgentTerminateLive(ctx, atMs)
	return int(n), translate(err)
}

func (x queries) AgentTerminateLiveOnHost(ctx context.Context, host string, atMs int64) (int, error) {
	n, err := x.q.AgentTerminateLiveOnHost(ctx, sqlitedb.AgentTerminateLiveOnHostParams{AtMs: atMs, Host: nullString(host)})
	return int(n), translate(err)
}

func (x queries) AgentList(ctx context.Context, p engine.AgentListParams) ([]engine.Agent, error) {
	var rows []sqlitedb.Agent
	var err error
	n := int64(p.Limit)
	switch {
	case p.VisibleIn != "":
		rows, err = x.q.AgentListVisibleIn(ctx, sqlitedb.AgentListVisibleInParams{
			Namespace: p.VisibleIn, AfterID: p.AfterID, State: p.State, OwnerActor: p.OwnerActor, Limit: n,
		})
	case p.OwnerActor != "":
		rows, err = x.q.AgentListByOwner(ctx, sqlitedb.AgentListByOwnerParams{
			OwnerActor: p.OwnerActor, AfterID: p.AfterID, State: p.State, Limit: n,
		})
	case p.State != "":
		rows, err = x.q.AgentListByState(ctx, sqlitedb.AgentListByStateParams{State: p.State, AfterID: p.AfterID, Limit: n})
	default:
		rows, err = x.q.AgentList(ctx, sqlitedb.AgentListParams{AfterID: p.AfterID, Limit: n})
	}
	if err != nil {
		return nil, translate(err)
	}
	out := make([]engine.Agent, len(rows))
	for i, r := range rows {
		if out[i], err = agentFromRow(r, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Stats reads the four aggregates of Stats.
func (x queries) Stats(ctx context.Context, atMs int64) (engine.StatsRows, error) {
	var out engine.StatsRows
	workers, err := x.q.StatsWorkers(ctx, atMs)
	if err != nil {
		return out, translate(err)
	}
	for _, r := range workers {
		out.Workers = append(out.Workers, engine.NamespaceWorkers{Namespace: r.Namespace, Alive: r.Alive, Lapsed: r.Lapsed})
	}
	expired, err := x.q.StatsExpiredLeases(ctx, atMs)
	if err != nil {
		return out, translate(err)
	}
	for _, r := range expired {
		out.ExpiredLeases = append(out.ExpiredLeases, engine.NamespaceCount{Namespace: r.Namespace, N: r.Expired})
	}
	lanes, err := x.q.StatsLanes(ctx, atMs)
	if err != nil {
		return out, translate(err)
	}
	for _, r := range lanes {
		out.Lanes = append(out.Lanes, engine.LaneCounts{
			Namespace: r.Namespace, Lane: r.Lane, Ready: r.Ready, Scheduled: r.Scheduled, Running: r.Running, OldestReadyMs: r.OldestReadyMs,
		})
	}
	agents, err := x.q.StatsAgents(ctx)
	if err != nil {
		return out, translate(err)
	}
	out.Agents = make(map[string]int64, len(agents))
	for _, r := range agents {
		out.Agents[r.State] = r.N
	}
	return out, nil
}

// Row mapping.

func workerFromRow(r sqlitedb.Worker) (engine.Worker, error) {
	lanes, err := parseJSONArray(r.Lanes)
	if err != nil {
		return engine.Worker{}, err
	}
	caps, err := parseJSONArray(r.Capabilities)
	if err != nil {
		return engine.Worker{}, err
	}
	return engine.Worker{
		Namespace: r.Namespace, InstanceID: r.InstanceID, WorkerID: r.WorkerID,
		Lanes: lanes, Capabilities: caps,
		LastHeartbeatMs: r.LastHeartbeatMs, TTLMs: r.TtlMs, RegisteredAtMs: r.RegisteredAtMs,
	}, nil
}

// agentFromRow maps a row (and the error of reading it) to an engine.Agent.
func agentFromRow(r sqlitedb.Agent, err error) (engine.Agent, error) {
	if err != nil {
		return engine.Agent{}, translate(err)
	}
	visible, err := parseJSONArray(r.OwnerVisibleNamespaces)
	if err != nil {
		return engine.Agent{}, err
	}
	return engine.Agent{
		ID:                     r.ID,
		State:                  r.State,
		TerminalReason:         r.TerminalReason.String,
		Provider:               r.Provider,
		ProviderSessionID:      r.ProviderSessionID.String,
		CheckpointSessionID:    r.CheckpointSessionID.String,
		CheckpointCursor:       r.CheckpointCursor,
		OwnerActor:             r.OwnerActor,
		OwnerPeerClass:         r.OwnerPeerClass,
		OwnerWriteNamespace:    r.OwnerWriteNamespace,
		OwnerVisibleNamespaces: visible,
		SpawnFingerprint:       r.SpawnFingerprint,
		SpawnedAtMs:            r.SpawnedAtMs,
		StateChangedAtMs:       r.StateChangedAtMs,
		IdempotencyKey:         r.IdempotencyKey.String,
		Host:                   r.Host.String,
	}, nil
}

// sqliteBool is b as SQLite stores a boolean: 1 or 0.
func sqliteBool(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// nullString maps "" to NULL: optional identifiers are NULL when absent.
func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// Lanes, capabilities and visible namespaces are stored as JSON arrays of
// strings, so that any identifier (commas included) round-trips.

// jsonArray encodes a string list as a JSON array ("[]" when empty).
func jsonArray(vs []string) string {
	if len(vs) == 0 {
		return "[]"
	}
	return mustJSON(vs)
}

// keyPairs encodes worker keys as a JSON array of [namespace, instance_id] pairs.
func keyPairs(keys []engine.WorkerKey) string {
	pairs := make([][2]string, len(keys))
	for i, k := range keys {
		pairs[i] = [2]string{k.Namespace, k.InstanceID}
	}
	return mustJSON(pairs)
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic("roster: encoding JSON: " + err.Error()) // only strings and uuids are encoded
	}
	return string(b)
}

// parseJSONArray decodes a stored JSON array of strings (nil when empty).
func parseJSONArray(s string) ([]string, error) {
	var vs []string
	if err := json.Unmarshal([]byte(s), &vs); err != nil {
		return nil, fmt.Errorf("roster: corrupt JSON array %q: %w", s, err)
	}
	if len(vs) == 0 {
		return nil, nil
	}
	return vs, nil
}
