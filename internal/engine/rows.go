package engine

import (
	"math"

	"github.com/google/uuid"
)

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
	Group                               string // "": none
	Metadata                            string // a JSON object of strings; "": none
	TimeoutMs                           int64  // 0: none
	DeadlineMs                          int64  // the current or last lease's; 0: none
	Bound                               bool   // the current or last lease is bound to its holder
}

// ReadyAtCreate tells whether a new execution is claimable at once, by
// every claimer whatever its clock: its RunAt (none given: the creation
// time) is not after the creation time by the creator's clock. A later
// one waits scheduled until a claimer's clock finds it due.
func (e Execution) ReadyAtCreate() bool { return e.RunAtMs <= e.CreatedAtMs }

// ExecutionListParams select a keyset page of executions in id order; each
// filter "" is any.
type ExecutionListParams struct {
	Namespace, Lane, State string
	UniqueKey, Group       string    // each with Namespace
	AfterID                uuid.UUID // uuid.Nil: from the start; with Newest, the page is of ids below it (uuid.Max: from the newest)
	Limit                  int
	Newest                 bool // descending id order: newest first
}

// ClaimParams ask for up to len(LeaseIDs) of the best claimable executions
// for a worker, matched against the lanes and capabilities it registered.
type ClaimParams struct {
	Namespace, InstanceID string
	NowMs, ExpiresAtMs    int64 // ExpiresAtMs: the expiry of a lease of its own (not Bound)
	// Bound: the leases are bound to the worker's registration (they have
	// no expiry of their own: NeverMs is stored, or their deadline).
	Bound    bool
	LeaseIDs []uuid.UUID // one fresh lease id per execution claimed
	// MaxBytes bounds the payloads the claim returns (always at least one
	// execution); 0 means MaxClaimBytes.
	MaxBytes int64
}

// NeverMs is the expiry stored for a bound lease without a deadline: it has
// no expiry of its own (its holder's registration is its liveness).
const NeverMs = math.MaxInt64

// StoredExpiresAtMs is the expiry a claim stores on each lease before its
// deadline cuts it: NeverMs for a bound lease.
func (p ClaimParams) StoredExpiresAtMs() int64 {
	if p.Bound {
		return NeverMs
	}
	return p.ExpiresAtMs
}

// LeaseExpiresAtMs is a claimed lease's expiry as its holder knows it:
// storedMs (the stored expiry, already cut at the deadline), and for a bound
// lease no later than its holder's expiry at the claim.
func (p ClaimParams) LeaseExpiresAtMs(storedMs, holderMs int64) int64 {
	if p.Bound && holderMs < storedMs {
		return holderMs
	}
	return storedMs
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
	DeadlineMs           int64  // claim + the execution's timeout; 0: none
	Metadata             string // the execution's (a JSON object; "": none)
	RunAtMs              int64  // when it became claimable (its RunAt)
}

// Attempt is one attempt of an execution, ended or current: State is
// "running" or "completed" for the lease on the execution's row, else how
// the recorded attempt ended ("failed", "reclaimed", "cancelled",
// "released", "snoozed"; "completed" in history kept from before the lease
// moved onto the row). EndedAtMs is 0 while running.
type Attempt struct {
	Epoch, AttemptIndex    int64
	InstanceID, State      string
	ClaimedAtMs, EndedAtMs int64
	Error                  string
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
	HolderNamespace, HolderInstanceID               string
}

// AgentListParams select a keyset page of agents in id order; each filter ""
// is any (the holder's two fields are given both or neither).
type AgentListParams struct {
	State, OwnerActor, VisibleIn, AfterID string
	Host                                  string
	HolderNamespace, HolderInstanceID     string
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
	TimeoutMs                   int64 // each run's timeout (0: none)
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
	LaneWorkers   []LaneWorkers    // alive workers per lane they claim from
}

// FinishedCount counts one lane's executions that ended in one state
// (completed or failed) in one minute (Unix ms / 60000).
type FinishedCount struct {
	Namespace, Lane string
	Minute          int64
	State           string
	N               int64
}

// LaneWorkers counts the alive workers of one lane.
type LaneWorkers struct {
	Namespace, Lane string
	Alive           int64
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
