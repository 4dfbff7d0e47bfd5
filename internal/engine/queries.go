package engine

import (
	"context"

	"github.com/google/uuid"
)

// Queries is every statement roster runs, one method per operation, in terms
// of the row types (rows.go). A method that addresses one row returns ErrNoRows
// when none matched; a write that breaks a schema rule returns a
// *ConstraintError.
type Queries interface {
	WorkerOps
	// WorkerHeartbeat moves an alive worker's heartbeat to now, logs a
	// heartbeat event when logEvent is set, and returns the worker's TTL, or
	// ErrNoRows. One statement where the engine can (WriteOne).
	WorkerHeartbeat(ctx context.Context, k WorkerKey, nowMs int64, logEvent bool) (ttlMs int64, err error)
	// WorkerDelete removes a worker, alive or lapsed, and reports whether one was there.
	WorkerDelete(ctx context.Context, k WorkerKey) (bool, error)
	// WorkerEventAppendSwept logs a ttl_swept event for each key, in order.
	WorkerEventAppendSwept(ctx context.Context, keys []WorkerKey, atMs int64) error
	// WorkerEventLatest reads the newest n events, newest first, of one
	// namespace ("" = every namespace).
	WorkerEventLatest(ctx context.Context, namespace string, n int) ([]WorkerEvent, error)

	// ExecutionInsert adds a waiting execution: ready when its RunAt is not
	// after its creation, else scheduled.
	ExecutionInsert(ctx context.Context, e Execution) error
	// ExecutionInsertMany adds waiting executions as ExecutionInsert does,
	// in one statement where the engine can.
	ExecutionInsertMany(ctx context.Context, es []Execution) error
	// ExecutionGet reads an execution.
	ExecutionGet(ctx context.Context, id uuid.UUID) (Execution, error)
	// LeaseRenew extends the current, unexpired, unrevoked lease of its own
	// (not bound) to expiresAtMs, never past its deadline, and returns the
	// new expiry; or ErrNoRows.
	LeaseRenew(ctx context.Context, l LeaseRef, nowMs, expiresAtMs int64) (int64, error)
	// LeaseHolderExpiry reads when the current, unrevoked bound lease
	// expires (its holder's expiry, never past its deadline) while its holder
	// is alive; ErrNoRows when the lease is lost. It writes nothing.
	LeaseHolderExpiry(ctx context.Context, l LeaseRef, nowMs int64) (int64, error)
	// LeaseComplete ends the current, unexpired, unrevoked lease and its
	// execution as completed with the result (the lease stays on the row as
	// its last; no attempt is recorded), or returns ErrNoRows. One statement
	// (WriteOne).
	LeaseComplete(ctx context.Context, l LeaseRef, nowMs int64, result []byte) error
	// LeaseCompleteMany is LeaseComplete for many leases (results[i] is
	// leases[i]'s), each fenced on its own (execution and epoch), in one
	// statement where the engine can; it returns the leases it completed
	// (the others were lost).
	LeaseCompleteMany(ctx context.Context, leases []LeaseRef, results [][]byte, nowMs int64) ([]LeaseRef, error)
	// LeaseRelease ends the current, unexpired, unrevoked lease without
	// using up its attempt: the execution waits again with its RunAt and one
	// attempt fewer, and its epoch stays (the released lease is fenced); the
	// attempt is recorded as released. ErrNoRows when the lease is lost.
	LeaseRelease(ctx context.Context, l LeaseRef, nowMs int64) error
	// LeaseSnooze ends the current, unexpired, unrevoked lease as
	// LeaseRelease does, the execution waiting until runAtMs (ready when
	// runAtMs <= nowMs, else scheduled); the attempt is recorded as snoozed.
	// ErrNoRows when the lease is lost.
	LeaseSnooze(ctx context.Context, l LeaseRef, nowMs, runAtMs int64) error
	// AttemptList reads the attempts of an execution in epoch order: the
	// recorded ones and the lease on its row when it is running or
	// completed under it (none for an unknown execution).
	AttemptList(ctx context.Context, id uuid.UUID) ([]Attempt, error)
	// LeaseFindHeld reads which of leaseIDs a worker holds now (running
	// executions under those leases).
	LeaseFindHeld(ctx context.Context, k WorkerKey, leaseIDs []uuid.UUID) ([]LeaseRef, error)
	// LeaseGetOutcome reads how a lease ended when its holder's outcome ended
	// it: "completed", "failed" or "snoozed"; ErrNoRows when it did not
	// (lost, or still running).
	LeaseGetOutcome(ctx context.Context, l LeaseRef) (string, error)
	// WorkerNextRunAt reads the earliest RunAt after now among the scheduled
	// executions of an alive worker's lanes (0: none); ErrNoRows when the
	// worker is not alive.
	WorkerNextRunAt(ctx context.Context, k WorkerKey, nowMs int64) (int64, error)
	// LeaseFail ends the current, unexpired, unrevoked lease as failed and
	// records the attempt: its execution waits again while attempts remain,
	// else ends failed, with the reason; or returns ErrNoRows. One statement
	// where the engine can.
	LeaseFail(ctx context.Context, l LeaseRef, nowMs int64, reason string) error
	// LeaseRevokeHeldBy ends for good, at now, every running lease the
	// instances hold: they expire (and can be reclaimed) and are never renewed.
	LeaseRevokeHeldBy(ctx context.Context, holders []WorkerKey, nowMs int64) error
	// LeaseRevokeLapsedBound ends for good, at now, up to batch bound leases
	// whose holder lapsed (not yet swept), each expiring when its holder did
	// (or at its deadline), and returns how many.
	LeaseRevokeLapsedBound(ctx context.Context, nowMs int64, batch int) (int, error)
	// LeaseRevokeBoundOfLapsed ends for good, at now, the bound leases of one
	// holder whose registration lapsed (before a register takes it over).
	LeaseRevokeBoundOfLapsed(ctx context.Context, k WorkerKey, nowMs int64) error
	// LeaseListExpired reads a keyset page of expired running leases.
	LeaseListExpired(ctx context.Context, p ExpiredLeaseListParams) ([]ExpiredLease, error)
	// LeaseReclaimBatch ends up to batch expired leases (soonest first):
	// each execution waits again while attempts remain (claimable from now
	// plus its backoff), else ends failed, counting the reclaim; the attempts
	// are recorded as reclaimed. It returns the executions.
	LeaseReclaimBatch(ctx context.Context, nowMs int64, batch int) ([]uuid.UUID, error)
	// ExecutionCancel ends a waiting or running execution (and records a
	// running one's attempt) as cancelled with the reason, and reports
	// whether it did; false when the execution is absent or already ended.
	ExecutionCancel(ctx context.Context, id uuid.UUID, reason string, nowMs int64) (bool, error)
	// ExecutionGetState reads the state of an execution.
	ExecutionGetState(ctx context.Context, id uuid.UUID) (string, error)
	// ExecutionList reads a keyset page of executions.
	ExecutionList(ctx context.Context, p ExecutionListParams) ([]Execution, error)
	// ExecutionPruneBatch deletes up to batch executions (with their
	// attempts) that finished before beforeMs, oldest first, and returns how
	// many it deleted.
	ExecutionPruneBatch(ctx context.Context, beforeMs int64, batch int) (int, error)
	// ExecutionFinishedPerMinute counts the executions completed or failed
	// at or after sinceMs per namespace, lane, minute and state.
	ExecutionFinishedPerMinute(ctx context.Context, sinceMs int64) ([]FinishedCount, error)

	// ExecutionInsertUnique adds a waiting execution holding e.UniqueKey, as
	// ExecutionInsert does, unless a waiting or running execution of its
	// namespace holds the key: then it writes nothing and returns false. A
	// concurrent insert of the same key waits for the other to end.
	ExecutionInsertUnique(ctx context.Context, e Execution) (bool, error)
	// ExecutionInsertManyUnique adds a batch some of whose items hold unique
	// keys (each key at most once; untilMs[i] > 0: item i's key stays held
	// until then; a key's holds are judged at the item's CreatedAtMs), as
	// ExecutionInsertUnique and ExecutionKeyPut do for each,
	// in one statement where the engine can; the transaction holds the
	// keys' ExecutionKeyLock. It returns, per item, the id of
	// the execution holding its key (its own when inserted; the item's own
	// for an item without a key), or uuid.Nil for a keyed item that met a
	// concurrent redrive of an execution of its key (look again). A hold it
	// could not record (another's had not ended) is a *ConstraintError
	// (UniqueOther): roll back.
	ExecutionInsertManyUnique(ctx context.Context, es []Execution, untilMs []int64) ([]uuid.UUID, error)
	// ExecutionKeyLock makes the creates of each (namespaces[i], keys[i])
	// run one at a time: it waits until no other transaction holds the
	// lock of any of the keys, and holds them until the transaction ends,
	// so that what the transaction reads after it holds every create of the
	// keys that committed before (on SQLite the single writer already
	// does). Keys are locked in one order, so that two batches never wait
	// for each other in a cycle.
	ExecutionKeyLock(ctx context.Context, namespaces, keys []string) error
	// ExecutionFindLiveByKey reads the waiting or running execution holding
	// a unique key, or ErrNoRows.
	ExecutionFindLiveByKey(ctx context.Context, namespace, key string) (uuid.UUID, error)
	// ExecutionKeyGet reads the execution a unique key is held for until
	// after now (its UniqueFor), or ErrNoRows.
	ExecutionKeyGet(ctx context.Context, namespace, key string, nowMs int64) (uuid.UUID, error)
	// ExecutionKeyPut holds a unique key for an execution until untilMs and
	// reports whether it did: never while another execution's hold of the
	// key has not ended at nowMs.
	ExecutionKeyPut(ctx context.Context, namespace, key string, id uuid.UUID, untilMs, nowMs int64) (bool, error)
	// ExecutionKeyPruneBatch deletes up to batch unique keys held until
	// before beforeMs, and returns how many it deleted.
	ExecutionKeyPruneBatch(ctx context.Context, beforeMs int64, batch int) (int, error)
	// ExecutionRetry puts a failed or cancelled execution back to waiting at
	// runAtMs (ready when atOnce, runAtMs being due by the caller's clock;
	// else scheduled until a claim finds it due), with one more attempt when
	// none is left, and reports whether it did (false: absent or in another
	// state).
	ExecutionRetry(ctx context.Context, id uuid.UUID, runAtMs int64, atOnce bool) (bool, error)

	// LeaderTake takes or renews the leadership lease name for holder until
	// expiresAtMs by compare-and-set, and returns its epoch: the holder
	// keeps epoch while its lease holds, anyone takes a lapsed lease under
	// the next epoch. ErrNoRows when another holder's lease holds.
	LeaderTake(ctx context.Context, name, holder string, epoch, nowMs, expiresAtMs int64) (int64, error)
	LeaderOps

	ScheduleOps

	AgentOps
	// AgentAbandonHeldBy ends every live agent held by one of the worker
	// registrations with reason abandoned at atMs, and returns how many.
	AgentAbandonHeldBy(ctx context.Context, holders []WorkerKey, atMs int64) (int, error)

	LaneLimitOps
	// LaneLimitsDelete removes a lane's limits (ErrNoRows: it had none) and
	// wakes the namespace's workers.
	LaneLimitsDelete(ctx context.Context, namespace, lane string) error
	// LaneTurnsTouch records the lanes of the executions that have a group
	// (GroupedLanes), before they are inserted: from then on those lanes'
	// groups take turns.
	LaneTurnsTouch(ctx context.Context, es []Execution) error

	// Stats reads the fleet's aggregates at a time, from live rows only
	// (run it in a Snapshot for one consistent view).
	Stats(ctx context.Context, atMs int64) (StatsRows, error)
}

// WorkerOps are the operations on workers and their events that both
// engines run alike, written once (NewWorkerOps) over either engine's
// generated queries.
type WorkerOps interface {
	// WorkerGet reads a worker, alive or lapsed.
	WorkerGet(ctx context.Context, k WorkerKey) (Worker, error)
	// WorkerGetAlive reads a worker only while now < heartbeat + TTL.
	WorkerGetAlive(ctx context.Context, k WorkerKey, nowMs int64) (Worker, error)
	// WorkerRefresh replaces the fields of a worker alive under w.WorkerID
	// (heartbeat = w.LastHeartbeatMs) and returns its RegisteredAtMs, or
	// ErrNoRows.
	WorkerRefresh(ctx context.Context, w Worker) (registeredAtMs int64, err error)
	// WorkerRegister inserts w, or replaces a lapsed row of its key, with
	// RegisteredAtMs = LastHeartbeatMs; ErrNoRows when an alive row holds the key.
	WorkerRegister(ctx context.Context, w Worker) error
	// WorkerSweepBatch deletes up to batch lapsed workers and returns their keys.
	WorkerSweepBatch(ctx context.Context, nowMs int64, batch int) ([]WorkerKey, error)
	// WorkerEventAppend logs one event.
	WorkerEventAppend(ctx context.Context, e WorkerEvent) error
	// WorkerEventPruneBatch deletes up to batch events with At < before.
	WorkerEventPruneBatch(ctx context.Context, beforeMs int64, batch int) (int, error)
	// WorkerList reads a keyset page of workers.
	WorkerList(ctx context.Context, p WorkerListParams) ([]Worker, error)
	// WorkerEventList reads events in Seq order.
	WorkerEventList(ctx context.Context, p WorkerEventListParams) ([]WorkerEvent, error)
}

// AgentOps are the operations on agents that both engines run alike,
// written once (NewAgentOps) over either engine's generated queries.
type AgentOps interface {
	// AgentInsert stores an agent record.
	AgentInsert(ctx context.Context, a Agent) error
	// AgentSpawn stores an agent record unless its owner already used its
	// idempotency key; it reports whether it inserted.
	AgentSpawn(ctx context.Context, a Agent) (bool, error)
	// AgentGet reads an agent.
	AgentGet(ctx context.Context, id string) (Agent, error)
	// AgentSetState moves an agent still in fromState to state (and reason)
	// at a time, and reports whether it did.
	AgentSetState(ctx context.Context, id, fromState, state, reason string, atMs int64) (bool, error)
	// AgentSetCheckpoint records an agent's checkpoint and reports whether
	// the agent exists.
	AgentSetCheckpoint(ctx context.Context, id, sessionID string, cursor int64) (bool, error)
	// AgentFindByIdempotencyKey reads the agent an owner spawned under a key.
	AgentFindByIdempotencyKey(ctx context.Context, ownerActor, key string) (Agent, error)
	// AgentFindLiveByProviderSession reads the live agent holding a session.
	AgentFindLiveByProviderSession(ctx context.Context, provider, sessionID string) (Agent, error)
	// AgentTerminateLive ends every live agent with reason host_restart.
	AgentTerminateLive(ctx context.Context, atMs int64) (int, error)
	// AgentTerminateLiveOnHost ends the live agents of one host with reason
	// host_restart.
	AgentTerminateLiveOnHost(ctx context.Context, host string, atMs int64) (int, error)
	// AgentSetHolder moves a live agent to another holder (both "": none)
	// and reports whether it did (false: the agent is terminal or absent).
	AgentSetHolder(ctx context.Context, id, holderNamespace, holderInstanceID string) (bool, error)
	// AgentList reads a keyset page of agents.
	AgentList(ctx context.Context, p AgentListParams) ([]Agent, error)
}

// LaneLimitOps are the operations on lane limits that both engines run
// alike, written once (NewLaneLimitOps) over either engine's generated
// queries.
type LaneLimitOps interface {
	// LaneLimitsPut creates or replaces a lane's limits (its rate window's
	// count is kept) and wakes the namespace's workers.
	LaneLimitsPut(ctx context.Context, l LaneLimits) error
	// LaneLimitsList reads the limits of a namespace's lanes ("": every
	// namespace), by namespace and lane.
	LaneLimitsList(ctx context.Context, namespace string) ([]LaneLimits, error)
}

// LeaderOps are the operations on leadership leases that both engines run
// alike, written once (NewLeaderOps) over either engine's generated
// queries.
type LeaderOps interface {
	// LeaderResign ends holder's lease of epoch at now, if it still holds.
	LeaderResign(ctx context.Context, name, holder string, epoch, nowMs int64) error
	// LeaderHolds reports whether holder still holds the leadership lease
	// name under epoch (no other instance took it since; a lapse alone does
	// not end it); on PostgreSQL it share-locks the lease row until the
	// transaction ends, so that no takeover commits before it does.
	LeaderHolds(ctx context.Context, name, holder string, epoch int64) (bool, error)
	// LeaderGet reads the leadership lease name, or ErrNoRows.
	LeaderGet(ctx context.Context, name string) (holder string, epoch, expiresAtMs int64, err error)
}

// ScheduleOps are the operations on schedules that both engines run alike,
// written once (NewScheduleOps) over either engine's generated queries.
type ScheduleOps interface {
	// SchedulePut creates or replaces a schedule (LastExecutionID is kept).
	SchedulePut(ctx context.Context, s Schedule) error
	// ScheduleDelete removes a schedule and reports whether it was there.
	ScheduleDelete(ctx context.Context, namespace, name string) (bool, error)
	// ScheduleList reads the schedules of a namespace ("" = every one) by
	// (namespace, name), with their last run's state.
	ScheduleList(ctx context.Context, namespace string) ([]Schedule, error)
	// ScheduleListDue reads up to max schedules not paused whose next period
	// began at or before now, in (NextRunAtMs, Namespace, Name) order after
	// after's (a page of a walk that visits each due schedule once; start
	// from math.MinInt64, "", "").
	ScheduleListDue(ctx context.Context, nowMs int64, after Schedule, max int) ([]Schedule, error)
	// ScheduleAdvance moves a schedule still at period fromMs to nextMs and
	// records its run, and reports whether it did (compare-and-set).
	ScheduleAdvance(ctx context.Context, namespace, name string, fromMs, nextMs int64, runID uuid.UUID) (bool, error)
}
