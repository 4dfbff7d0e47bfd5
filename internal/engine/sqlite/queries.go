package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

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
		RunAtMs: e.RunAtMs, RetryBackoffMs: e.RetryBackoffMs,
	}))
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
	}, nil
}

// ExecutionList runs the query of its filter combination: each has an
// index that serves it in id order.
func (x queries) ExecutionList(ctx context.Context, p engine.ExecutionListParams) ([]engine.Execution, error) {
	n := int64(p.Limit)
	var rows []sqlitedb.Execution
	var err error
	switch {
	case p.Namespace != "" && p.Lane != "" && p.State != "":
		rows, err = x.q.ExecutionListByNamespaceLaneState(ctx, sqlitedb.ExecutionListByNamespaceLaneStateParams{Namespace: p.Namespace, Lane: p.Lane, State: p.State, AfterID: p.AfterID, Limit: n})
	case p.Namespace != "" && p.Lane != "":
		rows, err = x.q.ExecutionListByNamespaceLane(ctx, sqlitedb.ExecutionListByNamespaceLaneParams{Namespace: p.Namespace, Lane: p.Lane, AfterID: p.AfterID, Limit: n})
	case p.Namespace != "" && p.State != "":
		rows, err = x.q.ExecutionListByNamespaceState(ctx, sqlitedb.ExecutionListByNamespaceStateParams{Namespace: p.Namespace, State: p.State, AfterID: p.AfterID, Limit: n})
	case p.Lane != "" && p.State != "":
		rows, err = x.q.ExecutionListByLaneState(ctx, sqlitedb.ExecutionListByLaneStateParams{Lane: p.Lane, State: p.State, AfterID: p.AfterID, Limit: n})
	case p.Namespace != "":
		rows, err = x.q.ExecutionListByNamespace(ctx, sqlitedb.ExecutionListByNamespaceParams{Namespace: p.Namespace, AfterID: p.AfterID, Limit: n})
	case p.Lane != "":
		rows, err = x.q.ExecutionListByLane(ctx, sqlitedb.ExecutionListByLaneParams{Lane: p.Lane, AfterID: p.AfterID, Limit: n})
	case p.State != "":
		rows, err = x.q.ExecutionListByState(ctx, sqlitedb.ExecutionListByStateParams{State: p.State, AfterID: p.AfterID, Limit: n})
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

// ExecutionCancel ends the running attempt, if any, then the execution,
// in the writer's transaction.
func (x queries) ExecutionCancel(ctx context.Context, id uuid.UUID, reason string, nowMs int64) (bool, error) {
	if err := x.q.AttemptCancelRunning(ctx, sqlitedb.AttemptCancelRunningParams{Now: nowMs, ExecutionID: id}); err != nil {
		return false, translate(err)
	}
	_, err := x.q.ExecutionCancel(ctx, sqlitedb.ExecutionCancelParams{Reason: reason, ID: id})
	if err = translate(err); err == engine.ErrNoRows {
		return false, nil
	}
	return err == nil, err
}

func (x queries) ExecutionGetState(ctx context.Context, id uuid.UUID) (string, error) {
	st, err := x.q.ExecutionGetState(ctx, id)
	return st, translate(err)
}

// ExecutionClaim picks the best candidates (pick), starts each with a
// conditional UPDATE (state = 'waiting' in the statement that writes) and
// records its attempt. The single writer runs the whole claim in one
// transaction, so no other claim can take a candidate between the pick and
// the start.
func (x queries) ExecutionClaim(ctx context.Context, p engine.ClaimParams) (engine.ClaimResult, error) {
	want := len(p.LeaseIDs)
	cands, lanes, err := x.pick(ctx, p, want)
	if err != nil {
		return engine.ClaimResult{}, err
	}
	var res engine.ClaimResult
	for _, c := range cands {
		if len(res.Leases) == want {
			break
		}
		started, err := x.q.ExecutionStart(ctx, c.ID)
		if err != nil {
			return engine.ClaimResult{}, translate(err)
		}
		leaseID := p.LeaseIDs[len(res.Leases)]
		if err := x.q.AttemptInsert(ctx, sqlitedb.AttemptInsertParams{
			ExecutionID: c.ID, AttemptIndex: started.Attempts, Epoch: started.Epoch, LeaseID: leaseID,
			Namespace: p.Namespace, InstanceID: p.InstanceID, ClaimedAtMs: p.NowMs, ExpiresAtMs: p.ExpiresAtMs,
		}); err != nil {
			return engine.ClaimResult{}, translate(err)
		}
		res.Leases = append(res.Leases, engine.ClaimedLease{
			ExecutionID: c.ID, LeaseID: leaseID, AttemptIndex: started.Attempts, Epoch: started.Epoch,
			Namespace: started.Namespace, Lane: started.Lane, Payload: started.Payload, ExpiresAtMs: p.ExpiresAtMs,
		})
	}
	if len(res.Leases) < want {
		if res.NextRunAtMs, err = x.nextRunAt(ctx, p.Namespace, lanes, p.NowMs); err != nil {
			return engine.ClaimResult{}, err
		}
	}
	return res, nil
}

// pick finds up to want of the best claimable executions for an alive
// worker (ErrNoRows when it is not alive), best first, and returns the
// worker's lanes. It seeks the claim index once per lane (a worker serves
// few lanes) and merges the candidates. It only reads.
func (x queries) pick(ctx context.Context, p engine.ClaimParams, want int) ([]sqlitedb.ExecutionPickInLaneRow, []string, error) {
	w, err := x.q.WorkerGetAlive(ctx, sqlitedb.WorkerGetAliveParams{Namespace: p.Namespace, InstanceID: p.InstanceID, Now: p.NowMs})
	if err != nil {
		return nil, nil, translate(err)
	}
	lanes, err := parseJSONArray(w.Lanes)
	if err != nil {
		return nil, nil, err
	}
	var cands []sqlitedb.ExecutionPickInLaneRow
	for _, lane := range lanes {
		// A loose index scan of the lane: its waiting priorities highest
		// first, one seek each, then the claimable executions at that
		// priority, until the lane has given as many as a claim could take.
		// Executions scheduled for later at a higher priority are stepped
		// over, never read one by one.
		atMost, got := int64(math.MaxInt64), 0
		for got < want {
			prio, err := x.q.ExecutionTopPriority(ctx, sqlitedb.ExecutionTopPriorityParams{Namespace: p.Namespace, Lane: lane, AtMost: atMost})
			if errors.Is(err, sql.ErrNoRows) {
				break
			}
			if err != nil {
				return nil, nil, translate(err)
			}
			rows, err := x.q.ExecutionPickInLane(ctx, sqlitedb.ExecutionPickInLaneParams{
				Namespace: p.Namespace, Lane: lane, Priority: prio, Now: p.NowMs, Capabilities: w.Capabilities, Limit: int64(want - got),
			})
			if err != nil {
				return nil, nil, translate(err)
			}
			cands = append(cands, rows...)
			got += len(rows)
			if prio == math.MinInt64 {
				break
			}
			atMost = prio - 1
		}
	}
	slices.SortFunc(cands, func(a, b sqlitedb.ExecutionPickInLaneRow) int {
		if c := cmp.Compare(b.Priority, a.Priority); c != 0 {
			return c
		}
		if c := cmp.Compare(a.RunAtMs, b.RunAtMs); c != 0 {
			return c
		}
		return slices.Compare(a.ID[:], b.ID[:])
	})
	return cands, lanes, nil
}

// nextRunAt is the earliest RunAt after now among the waiting executions of
// the lanes (0: none), one seek per lane.
func (x queries) nextRunAt(ctx context.Context, namespace string, lanes []string, nowMs int64) (int64, error) {
	var next int64
	for _, lane := range lanes {
		at, err := x.q.ExecutionNextRunAt(ctx, sqlitedb.ExecutionNextRunAtParams{Namespace: namespace, Lane: lane, Now: nowMs})
		if err != nil {
			return 0, translate(err)
		}
		if at > 0 && (next == 0 || at < next) {
			next = at
		}
	}
	return next, nil
}

func (x queries) WorkerNextRunAt(ctx context.Context, k engine.WorkerKey, nowMs int64) (int64, error) {
	w, err := x.q.WorkerGetAlive(ctx, sqlitedb.WorkerGetAliveParams{Namespace: k.Namespace, InstanceID: k.InstanceID, Now: nowMs})
	if err != nil {
		return 0, translate(err)
	}
	lanes, err := parseJSONArray(w.Lanes)
	if err != nil {
		return 0, err
	}
	return x.nextRunAt(ctx, k.Namespace, lanes, nowMs)
}

func (x queries) AttemptRenew(ctx context.Context, l engine.LeaseRef, nowMs, expiresAtMs int64) error {
	_, err := x.q.AttemptRenew(ctx, sqlitedb.AttemptRenewParams{ExpiresAtMs: expiresAtMs, ExecutionID: l.ExecutionID, Epoch: l.Epoch, Now: nowMs})
	return translate(err)
}

// LeaseComplete ends the attempt, fenced in its UPDATE, then the execution,
// in the writer's transaction.
func (x queries) LeaseComplete(ctx context.Context, l engine.LeaseRef, nowMs int64, result []byte) error {
	if _, err := x.q.AttemptEnd(ctx, sqlitedb.AttemptEndParams{State: "completed", Now: nowMs, ExecutionID: l.ExecutionID, Epoch: l.Epoch}); err != nil {
		return translate(err)
	}
	return translate(x.q.ExecutionComplete(ctx, sqlitedb.ExecutionCompleteParams{Result: result, ID: l.ExecutionID}))
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

func (x queries) AttemptGetByLease(ctx context.Context, leaseID uuid.UUID) (engine.LeaseRef, bool, error) {
	r, err := x.q.AttemptGetByLease(ctx, leaseID)
	return engine.LeaseRef{ExecutionID: r.ExecutionID, Epoch: r.Epoch}, r.State == "running", translate(err)
}

// LeaseRelease deletes the attempt, fenced in its DELETE, then returns the
// execution to waiting, in the writer's transaction.
func (x queries) LeaseRelease(ctx context.Context, l engine.LeaseRef, nowMs int64) error {
	if _, err := x.q.AttemptDeleteCurrent(ctx, sqlitedb.AttemptDeleteCurrentParams{ExecutionID: l.ExecutionID, Epoch: l.Epoch, Now: nowMs}); err != nil {
		return translate(err)
	}
	return translate(x.q.ExecutionRelease(ctx, l.ExecutionID))
}

// LeaseFail ends the attempt, fenced in its UPDATE, then returns the
// execution to waiting or ends it, in the writer's transaction.
func (x queries) LeaseFail(ctx context.Context, l engine.LeaseRef, nowMs int64, reason string) error {
	if _, err := x.q.AttemptEnd(ctx, sqlitedb.AttemptEndParams{State: "failed", Now: nowMs, ExecutionID: l.ExecutionID, Epoch: l.Epoch}); err != nil {
		return translate(err)
	}
	return translate(x.q.ExecutionFail(ctx, sqlitedb.ExecutionFailParams{Now: nowMs, LastError: reason, ID: l.ExecutionID}))
}

func (x queries) AttemptRevokeHeldBy(ctx context.Context, holders []engine.WorkerKey, nowMs int64) error {
	return translate(x.q.AttemptRevokeHeldBy(ctx, sqlitedb.AttemptRevokeHeldByParams{Now: nowMs, Instances: keyPairs(holders)}))
}

func (x queries) AttemptListExpired(ctx context.Context, p engine.ExpiredLeaseListParams) ([]engine.ExpiredLease, error) {
	var rows []sqlitedb.AttemptListExpiredRow
	var err error
	if p.Namespace == "" {
		rows, err = x.q.AttemptListExpired(ctx, sqlitedb.AttemptListExpiredParams{
			AsOf: p.AsOfMs, AfterExpiresAtMs: p.AfterExpiresAtMs, AfterExecutionID: p.AfterExecutionID.String(), Limit: int64(p.Limit),
		})
	} else {
		var nsRows []sqlitedb.AttemptListExpiredByNamespaceRow
		nsRows, err = x.q.AttemptListExpiredByNamespace(ctx, sqlitedb.AttemptListExpiredByNamespaceParams{
			Namespace: p.Namespace, AsOf: p.AsOfMs, AfterExpiresAtMs: p.AfterExpiresAtMs,
			AfterExecutionID: p.AfterExecutionID.String(), Limit: int64(p.Limit),
		})
		rows = make([]sqlitedb.AttemptListExpiredRow, len(nsRows))
		for i, r := range nsRows {
			rows[i] = sqlitedb.AttemptListExpiredRow(r)
		}
	}
	if err != nil {
		return nil, translate(err)
	}
	out := make([]engine.ExpiredLease, len(rows))
	for i, r := range rows {
		out[i] = engine.ExpiredLease{
			ExecutionID: r.ExecutionID, LeaseID: r.LeaseID, AttemptIndex: r.AttemptIndex, Epoch: r.Epoch,
			Namespace: r.Namespace, InstanceID: r.InstanceID, ExpiresAtMs: r.ExpiresAtMs,
		}
	}
	return out, nil
}

func (x queries) AttemptReclaimBatch(ctx context.Context, nowMs int64, batch int) ([]uuid.UUID, error) {
	ids, err := x.q.AttemptReclaimBatch(ctx, sqlitedb.AttemptReclaimBatchParams{Now: nowMs, BatchSize: int64(batch)})
	return ids, translate(err)
}

func (x queries) ExecutionRequeueReclaimed(ctx context.Context, ids []uuid.UUID, nowMs int64) error {
	return translate(x.q.ExecutionRequeueReclaimed(ctx, sqlitedb.ExecutionRequeueReclaimedParams{Now: nowMs, Ids: mustJSON(ids)}))
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
