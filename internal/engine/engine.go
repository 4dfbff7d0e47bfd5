// Package engine is the seam between roster's public API (package service) and
// the databases it runs on. service states the rules of every operation; an
// engine (internal/engine/sqlite, ...) owns everything that differs between
// databases: connections, transactions, migrations, the SQL (through the code
// sqlc generates) and the translation of driver errors.
//
// The flow is one way: schema/ENGINE + queries/ENGINE → sqlc → db/ENGINE →
// internal/engine/ENGINE (implements Engine) → service. service imports this
// package and internal/engines (which picks an engine for a path), never an
// engine or a driver directly.
package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"time"

	"github.com/google/uuid"
)

// Engine is one open database.
type Engine interface {
	// Read runs fn with queries that read the database. Reads never wait for
	// writes.
	Read(ctx context.Context, fn func(ctx context.Context, q Queries) error) error
	// Snapshot is Read in one read-only transaction: every query of fn sees
	// the same consistent state of the database.
	Snapshot(ctx context.Context, fn func(ctx context.Context, q Queries) error) error
	// Write runs fn in a transaction of its own (or a savepoint of a shared
	// one) and returns once that transaction committed (nil) or fn's work was
	// rolled back (fn's error). Write fails with ErrOverloaded, having changed
	// nothing, when it cannot start within the configured admission time.
	Write(ctx context.Context, fn func(ctx context.Context, q Queries) error) error
	// WriteOne is Write for an fn whose writes are exactly one statement,
	// which is atomic by itself (it may read before or after): an engine may
	// run it without a transaction of its own (PostgreSQL saves the BEGIN
	// and COMMIT round trips).
	WriteOne(ctx context.Context, fn func(ctx context.Context, q Queries) error) error
	// Close releases the database. Writes queued or started after Close
	// began return ErrClosed.
	Close() error
	// Check looks for damage: the engine's own integrity check where it has
	// one, and the consistency rules the operations keep. It returns one
	// line per problem (none: sound).
	Check(ctx context.Context) ([]string, error)
	// Claim moves up to len(p.LeaseIDs) of the best claimable executions for
	// an alive worker to running under new attempts, best first, as
	// Queries.ExecutionClaim does, and returns them only once their claim
	// committed. A claim that finds nothing claimable writes nothing: it is
	// a read (on PostgreSQL it takes no transaction id). A worker that is
	// not alive is ErrNoRows.
	Claim(ctx context.Context, p ClaimParams) (ClaimResult, error)
	// Settle writes finished handlers' outcomes at now, each fenced on its
	// own lease, then (claim not nil) claims as Claim does, each engine in its
	// cheapest way. One outcome's lost lease or error never drops, fails or
	// delays another, nor the claim.
	Settle(ctx context.Context, nowMs int64, outcomes []Outcome, claim *ClaimParams) SettleResult
	// Subscribe asks to hear when work may have become claimable in a
	// namespace through another connection or process (PostgreSQL:
	// LISTEN/NOTIFY; SQLite: a change check that writes nothing). It is a
	// hint: a subscriber still polls now and then.
	Subscribe(namespace string) Subscription
}

// Subscription hears about changes: C receives (coalesced, one pending at
// most) after a change that may have made work claimable, or after the
// engine lost track of changes (a listening connection re-established).
// Arm says its holder is waiting for a change now and Disarm that it no
// longer is: an engine whose watching costs (SQLite) watches only while some
// subscription is armed, and on arming looks at once for any change it did
// not see since it last looked. Close ends it.
type Subscription interface {
	C() <-chan struct{}
	Arm()
	Disarm()
	Close()
}

// ClaimResult is what a claim took.
type ClaimResult struct {
	Leases []ClaimedLease
	// NextRunAtMs is set when the claim took fewer executions than asked:
	// the earliest RunAt after now among the waiting executions of the
	// worker's lanes (0: none), when a worker should look again at the
	// latest; now itself when the claim stopped at its bound on payload
	// bytes with work left.
	NextRunAtMs int64
}

// MaxClaimBytes bounds the payloads one claim returns: a claim takes fewer
// executions than asked when their payloads would exceed it (always at
// least one). PostgreSQL's arrays and protocol messages stop at 1 GiB.
const MaxClaimBytes = 64 << 20

// Outcome is a finished handler's result, for Settle.
type Outcome struct {
	Lease  LeaseRef
	Fail   bool   // fail the attempt with Reason; else complete it with Result
	Result []byte // nil is stored as no result
	Reason string
}

// Size is the bytes an outcome carries, to bound a batch.
func (o Outcome) Size() int { return len(o.Result) + len(o.Reason) }

// SettleResult reports what Settle did.
type SettleResult struct {
	// Errs[i] is outcome i's: nil when it was written, ErrNoRows when its
	// lease was lost (nothing written), else an error of its own (nothing
	// written for it; a transient one may pass).
	Errs []error
	// Claim is what the claim took (only what committed); ClaimErr is the
	// claim's own error (ErrNoRows: the worker is not alive).
	Claim    ClaimResult
	ClaimErr error
}

// Config is what service asks of an engine when it opens one.
type Config struct {
	Logger        *slog.Logger
	SyncFull      bool          // durable against a power cut (else against a process crash)
	ReadConns     int           // size of the read pool, where the engine has one
	QueueCapacity int           // writes waiting for the writer, where the engine has one
	Admission     time.Duration // how long a write may wait to be admitted
	BusyTimeout   time.Duration // how long to wait for another process's lock
	Migrate       bool          // apply pending migrations (else require a current schema)
	ReadOnly      bool          // never write, never migrate, never create
	Migrations    fs.FS         // nil: the engine's embedded migrations (tests substitute)
	// LocalClock is the local time an engine compares with the server's to
	// measure its offset (nil: time.Now; tests inject skew).
	LocalClock func() time.Time
	// Observer, when set, hears how long writes wait and commit.
	Observer Observer
}

// Observer hears an engine's write path: how long a write waited for the
// writer (SQLite) or a pooled connection (PostgreSQL) before it began, and
// how long each commit took and for how many writes. It must be fast and
// safe for concurrent use.
type Observer interface {
	WriteWaited(d time.Duration)
	Committed(d time.Duration, writes int)
}

// Clocked is an Engine that offers a clock of its own, used when the caller
// sets none: on a database that many hosts share, liveness must be judged by
// one clock (PostgreSQL: the server's).
type Clocked interface {
	Clock() func() time.Time
}

// Admin runs the migration commands of the command-line tool on a database.
type Admin interface {
	// Version reports the recorded schema version (-1 when none) and the
	// latest version this build knows.
	Version(ctx context.Context) (version, latest int, err error)
	// Down rolls back steps migrations (0 = all) in one transaction.
	Down(ctx context.Context, steps int) error
	// Force records version (-1 = none) as the clean schema version without
	// running any migration.
	Force(ctx context.Context, version int) error
	// Close releases the database.
	Close() error
}

// Sentinel errors that engines return and service exports under the same
// names. Every other driver error is wrapped with the step that failed.
var (
	ErrInvalidInput   = errors.New("roster: invalid input")
	ErrNotFound       = errors.New("roster: not found")
	ErrOverloaded     = errors.New("roster: overloaded")
	ErrClosed         = errors.New("roster: store closed")
	ErrReadOnly       = errors.New("roster: store is read-only")
	ErrSchemaTooNew   = errors.New("roster: database schema is newer than this build")
	ErrSchemaOutdated = errors.New("roster: database schema is outdated")
	// ErrUnavailable: the database could not be reached, or the connection
	// broke before the outcome was known (a write may or may not have been
	// applied).
	ErrUnavailable = errors.New("roster: database unavailable")
	// ErrStorage: the storage refused the write (disk full, read-only file
	// system, I/O error); nothing was written.
	ErrStorage = errors.New("roster: storage refused the write")
)

// Transient reports whether err is a failure that may pass by itself: the
// database unavailable, the storage refusing writes, or the write queue
// full. A caller that can repeat its operation safely retries these.
func Transient(err error) bool {
	return errors.Is(err, ErrUnavailable) || errors.Is(err, ErrStorage) || errors.Is(err, ErrOverloaded)
}

// ErrNoRows is what every engine returns when a query that reads or writes
// one row found none. service says what that means for its operation
// (ErrNotFound, ErrNotRegistered, ErrLeaseLost, ...).
var ErrNoRows = errors.New("roster: no rows")

// Constraint names a uniqueness rule or CHECK of the schema. The names are the
// schema's own (index or constraint names), identical on every engine.
type Constraint string

// The constraints service translates into its sentinel errors.
const (
	UniqueAgentID                  Constraint = "agents_pkey"
	UniqueAgentLiveProviderSession Constraint = "agents_live_provider_session"
	UniqueAgentIdempotency         Constraint = "agents_idempotency"
	UniqueExecutionID              Constraint = "executions_pkey"
	// CheckViolation is any CHECK of the schema (SQLite does not name them
	// reliably; the detail says which rule failed), or any other rule of the
	// database that refused a row (a trigger's RAISE, a foreign key).
	CheckViolation Constraint = "check"
	// UniqueOther is a uniqueness rule without a constant of its own.
	UniqueOther Constraint = "unique"
)

// ConstraintError is a write that broke a schema rule.
type ConstraintError struct {
	Constraint Constraint
	Err        error // the driver's error, for the log
}

// Error names the rule and the driver's words.
func (e *ConstraintError) Error() string {
	return fmt.Sprintf("constraint %s violated: %v", e.Constraint, e.Err)
}

// Unwrap returns the driver's error.
func (e *ConstraintError) Unwrap() error { return e.Err }

// IsConstraint reports whether err is a violation of c.
func IsConstraint(err error, c Constraint) bool {
	var ce *ConstraintError
	return errors.As(err, &ce) && ce.Constraint == c
}

// IsUnique reports whether err is a violation of any uniqueness rule.
func IsUnique(err error) bool {
	var ce *ConstraintError
	return errors.As(err, &ce) && ce.Constraint != CheckViolation
}

// ConsistencyCheck is one of roster's consistency rules: a query that counts
// the rows breaking it (queries/ENGINE/check.sql).
type ConsistencyCheck struct {
	Problem string
	Count   func(ctx context.Context) (int64, error)
}

// ConsistencyProblems runs the checks in order and returns one line per rule
// broken ("N <problem>"); translate turns a driver error into the engine's.
func ConsistencyProblems(ctx context.Context, checks []ConsistencyCheck, translate func(error) error) ([]string, error) {
	var problems []string
	for _, c := range checks {
		n, err := c.Count(ctx)
		if err != nil {
			return nil, fmt.Errorf("roster: check: %w", translate(err))
		}
		if n > 0 {
			problems = append(problems, fmt.Sprintf("%d %s", n, c.Problem))
		}
	}
	return problems, nil
}

// WorkerKey identifies a worker instance.
type WorkerKey struct{ Namespace, InstanceID string }

// Worker is a row of the worker registry. Times are Unix milliseconds.
type Worker struct {
	Namespace, InstanceID, WorkerID string
	Lanes, Capabilities             []string // sorted, duplicate-free; nil when empty
	LastHeartbeatMs, TTLMs          int64
	RegisteredAtMs                  int64
}

// WorkerEvent is a row of the audit log.
type WorkerEvent struct {
	Seq                         int64
	Namespace, InstanceID, Kind string
	AtMs                        int64
	Reason                      string
}

// WorkerListParams select a keyset page of workers; Namespace "" is every
// namespace (then AfterNamespace is part of the keyset).
type WorkerListParams struct {
	Namespace, AfterNamespace, AfterInstanceID string
	Limit                                      int
}

// WorkerEventListParams select events with Seq > AfterSeq; Namespace and
// InstanceID "" are any.
type WorkerEventListParams struct {
	Namespace, InstanceID string
	AfterSeq              int64
	Limit                 int
}

// Execution is a row of executions. Holder, ClaimedAtMs and ExpiresAtMs
// describe the current lease while running, else the last one ("" and 0:
// never claimed); FinishedAtMs is 0 while the execution is live.
type Execution struct {
	ID                                  uuid.UUID
	Namespace, Lane, State              string
	Priority                            int64
	Payload, Result                     []byte
	RequiredCapabilities                []string
	Attempts, MaxAttempts, ReclaimCount int64
	LastError                           string
	CreatedAtMs, RunAtMs                int64
	RetryBackoffMs                      int64
	Holder                              string
	ClaimedAtMs, ExpiresAtMs            int64
	FinishedAtMs                        int64
	UniqueKey                           string // "": none
	// Scheduled, at create: the caller gave a RunAt, so the execution is not
	// claimable before RunAt by the claimer's clock, even a RunAt already
	// past by the creator's; it waits scheduled until a claim finds it due.
	Scheduled bool
}

// ReadyAtCreate tells whether a new execution is claimable at once, by
// every claimer whatever its clock: created without a RunAt.
func (e Execution) ReadyAtCreate() bool { return !e.Scheduled && e.RunAtMs <= e.CreatedAtMs }

// ExecutionListParams select a keyset page of executions in id order; each
// filter "" is any.
type ExecutionListParams struct {
	Namespace, Lane, State string
	AfterID                uuid.UUID // uuid.Nil: from the start; with Newest, the page is of ids below it (uuid.Max: from the newest)
	Limit                  int
	Newest                 bool // descending id order: newest first
}

// ClaimParams ask for up to len(LeaseIDs) of the best claimable executions
// for a worker, matched against the lanes and capabilities it registered.
type ClaimParams struct {
	Namespace, InstanceID string
	NowMs, ExpiresAtMs    int64
	LeaseIDs              []uuid.UUID // one fresh lease id per execution claimed
	// MaxBytes bounds the payloads the claim returns (always at least one
	// execution); 0 means MaxClaimBytes.
	MaxBytes int64
}

// Bytes is the bound on the claim's payloads: MaxBytes, or MaxClaimBytes.
func (p ClaimParams) Bytes() int64 {
	if p.MaxBytes > 0 {
		return p.MaxBytes
	}
	return MaxClaimBytes
}

// ClaimedLease is an execution a claim moved to running, under a new attempt.
type ClaimedLease struct {
	ExecutionID, LeaseID uuid.UUID
	AttemptIndex, Epoch  int64
	Namespace, Lane      string
	Payload              []byte
	ExpiresAtMs          int64
}

// LeaseRef names the lease a renew, complete or fail presents: every fence
// compares all three (an epoch may be issued twice by a database that lost
// its last commits, a lease id never is).
type LeaseRef struct {
	ExecutionID, LeaseID uuid.UUID
	Epoch                int64
}

// ExpiredLease is a running attempt past its expiry.
type ExpiredLease struct {
	ExecutionID, LeaseID  uuid.UUID
	AttemptIndex, Epoch   int64
	Namespace, InstanceID string
	ExpiresAtMs           int64
}

// ExpiredLeaseListParams select a keyset page of expired leases, ordered by
// (ExpiresAtMs, ExecutionID); Namespace "" is every namespace.
type ExpiredLeaseListParams struct {
	Namespace        string
	AsOfMs           int64
	AfterExpiresAtMs int64
	AfterExecutionID uuid.UUID // uuid.Nil with AfterExpiresAtMs = MinInt64: from the start
	Limit            int
}

// Agent is a row of the agent ledger; optional fields are "" when absent.
type Agent struct {
	ID, State, TerminalReason                       string
	Provider, ProviderSessionID                     string
	CheckpointSessionID                             string
	CheckpointCursor                                int64
	OwnerActor, OwnerPeerClass, OwnerWriteNamespace string
	OwnerVisibleNamespaces                          []string
	SpawnFingerprint                                string
	SpawnedAtMs, StateChangedAtMs                   int64
	IdempotencyKey                                  string
	Host                                            string
}

// AgentListParams select a keyset page of agents in id order; each filter ""
// is any.
type AgentListParams struct {
	State, OwnerActor, VisibleIn, AfterID string
	Limit                                 int
}

// Schedule is a row of schedules: a template that creates one execution
// per period, every EveryMs (aligned to the Unix epoch) or at each time of
// Cron (then EveryMs is 0).
type Schedule struct {
	Namespace, Name             string
	EveryMs                     int64
	Cron                        string
	Lane                        string
	Priority                    int64
	RequiredCapabilities        []string
	MaxAttempts, RetryBackoffMs int64
	Payload                     []byte
	Paused                      bool
	NextRunAtMs                 int64
	LastExecutionID             uuid.UUID // uuid.Nil: none yet
	LastState                   string    // the last run's state ("": none, or pruned); ScheduleList only
	UpdatedAtMs                 int64
}

// StatsRows are the aggregates Stats reads, each ordered by namespace (then
// lane).
type StatsRows struct {
	Workers       []NamespaceWorkers
	ExpiredLeases []NamespaceCount
	Lanes         []LaneCounts
	Agents        map[string]int64 // agents per state
}

// NamespaceWorkers counts one namespace's workers.
type NamespaceWorkers struct {
	Namespace     string
	Alive, Lapsed int64
}

// NamespaceCount is a count in one namespace.
type NamespaceCount struct {
	Namespace string
	N         int64
}

// LaneCounts counts one lane's live executions.
type LaneCounts struct {
	Namespace, Lane           string
	Ready, Scheduled, Running int64
	OldestReadyMs             int64 // 0 when Ready is 0
}

// Queries is every statement roster runs, one method per operation, in terms
// of the row types above. A method that addresses one row returns ErrNoRows
// when none matched; a write that breaks a schema rule returns a
// *ConstraintError.
type Queries interface {
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
	// WorkerHeartbeat moves an alive worker's heartbeat to now, logs a
	// heartbeat event when logEvent is set, and returns the worker's TTL, or
	// ErrNoRows. One statement where the engine can (WriteOne).
	WorkerHeartbeat(ctx context.Context, k WorkerKey, nowMs int64, logEvent bool) (ttlMs int64, err error)
	// WorkerDelete removes a worker, alive or lapsed, and reports whether one was there.
	WorkerDelete(ctx context.Context, k WorkerKey) (bool, error)
	// WorkerList reads a keyset page of workers.
	WorkerList(ctx context.Context, p WorkerListParams) ([]Worker, error)
	// WorkerSweepBatch deletes up to batch lapsed workers and returns their keys.
	WorkerSweepBatch(ctx context.Context, nowMs int64, batch int) ([]WorkerKey, error)
	// WorkerEventAppend logs one event.
	WorkerEventAppend(ctx context.Context, e WorkerEvent) error
	// WorkerEventAppendSwept logs a ttl_swept event for each key, in order.
	WorkerEventAppendSwept(ctx context.Context, keys []WorkerKey, atMs int64) error
	// WorkerEventList reads events in Seq order.
	WorkerEventList(ctx context.Context, p WorkerEventListParams) ([]WorkerEvent, error)
	// WorkerEventLatest reads the newest n events, newest first, of one
	// namespace ("" = every namespace).
	WorkerEventLatest(ctx context.Context, namespace string, n int) ([]WorkerEvent, error)
	// WorkerEventPruneBatch deletes up to batch events with At < before.
	WorkerEventPruneBatch(ctx context.Context, beforeMs int64, batch int) (int, error)

	// ExecutionInsert adds a waiting execution: ready when its RunAt is not
	// after its creation, else scheduled.
	ExecutionInsert(ctx context.Context, e Execution) error
	// ExecutionInsertMany adds waiting executions as ExecutionInsert does,
	// in one statement where the engine can.
	ExecutionInsertMany(ctx context.Context, es []Execution) error
	// ExecutionGet reads an execution.
	ExecutionGet(ctx context.Context, id uuid.UUID) (Execution, error)
	// ExecutionClaim moves up to len(p.LeaseIDs) of the best claimable
	// executions for an alive worker to running under new leases, best first
	// (none: no leases; fewer when their payloads would exceed
	// p.Bytes()), and when it took fewer than asked reads the
	// worker's NextRunAtMs. Scheduled executions that are due are made ready
	// first, so that they compete (up to a thousand at a time). A worker that
	// is not alive is ErrNoRows. Two claims never take the same execution,
	// on any engine. Its writes are one statement where the engine can
	// (WriteOne).
	ExecutionClaim(ctx context.Context, p ClaimParams) (ClaimResult, error)
	// LeaseRenew extends the current, unexpired, unrevoked lease, or ErrNoRows.
	LeaseRenew(ctx context.Context, l LeaseRef, nowMs, expiresAtMs int64) error
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
	// attempt fewer, and its epoch stays (the released lease is fenced); no
	// attempt is recorded. ErrNoRows when the lease is lost.
	LeaseRelease(ctx context.Context, l LeaseRef, nowMs int64) error
	// LeaseFindHeld reads which of leaseIDs a worker holds now (running
	// executions under those leases).
	LeaseFindHeld(ctx context.Context, k WorkerKey, leaseIDs []uuid.UUID) ([]LeaseRef, error)
	// LeaseGetOutcome reads how a lease ended when its holder's outcome ended
	// it: "completed" or "failed"; ErrNoRows when it did not (lost, or still
	// running).
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
	// runAtMs (ready when atOnce, else scheduled until a claim finds runAtMs
	// due), with one more attempt when none is left, and reports whether it
	// did (false: absent or in another state).
	ExecutionRetry(ctx context.Context, id uuid.UUID, runAtMs int64, atOnce bool) (bool, error)

	// LeaderTake takes or renews the leadership lease name for holder until
	// expiresAtMs by compare-and-set, and returns its epoch: the holder
	// keeps epoch while its lease holds, anyone takes a lapsed lease under
	// the next epoch. ErrNoRows when another holder's lease holds.
	LeaderTake(ctx context.Context, name, holder string, epoch, nowMs, expiresAtMs int64) (int64, error)
	// LeaderResign ends holder's lease of epoch at now, if it still holds.
	LeaderResign(ctx context.Context, name, holder string, epoch, nowMs int64) error
	// LeaderHolds reports whether holder holds the leadership lease name
	// under epoch at now; on PostgreSQL it share-locks the lease row until
	// the transaction ends, so that no takeover commits before it does.
	LeaderHolds(ctx context.Context, name, holder string, epoch, nowMs int64) (bool, error)
	// LeaderGet reads the leadership lease name, or ErrNoRows.
	LeaderGet(ctx context.Context, name string) (holder string, epoch, expiresAtMs int64, err error)

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
	// AgentList reads a keyset page of agents.
	AgentList(ctx context.Context, p AgentListParams) ([]Agent, error)

	// Stats reads the fleet's aggregates at a time, from live rows only
	// (run it in a Snapshot for one consistent view).
	Stats(ctx context.Context, atMs int64) (StatsRows, error)
}
