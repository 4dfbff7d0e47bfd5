package service

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/rosterdb/roster/internal/engine"
)

// maxPayloadBytes bounds payloads and results.
const maxPayloadBytes = 16 << 20

// maxRetryBackoff bounds RetryBackoff and every retry's wait.
const maxRetryBackoff = 24 * time.Hour

// maxClaimBatch bounds ClaimExecutions.
const maxClaimBatch = 1000

// ExecutionState is the state of an execution.
type ExecutionState string

// The execution states: waiting → running → completed | failed, and back to
// waiting when an attempt fails or is reclaimed while attempts remain; a
// waiting or running execution can be cancelled.
const (
	ExecutionWaiting   ExecutionState = "waiting"
	ExecutionRunning   ExecutionState = "running"
	ExecutionCompleted ExecutionState = "completed"
	ExecutionFailed    ExecutionState = "failed"
	ExecutionCancelled ExecutionState = "cancelled"
)

func (s ExecutionState) known() bool {
	switch s {
	case ExecutionWaiting, ExecutionRunning, ExecutionCompleted, ExecutionFailed, ExecutionCancelled:
		return true
	}
	return false
}

// CreateExecutionArgs are the arguments of CreateExecution.
type CreateExecutionArgs struct {
	Namespace, Lane      string
	Payload              []byte
	Priority             int // higher is claimed first; ties: earliest RunAt, then lowest id
	RequiredCapabilities []string
	MaxAttempts          int // 0 means 1
	// RunAt: zero means claimable at once (RunAt = the creation time); else
	// not claimable before RunAt.
	RunAt time.Time
	// RetryBackoff: 0 means a failed or reclaimed attempt is claimable again
	// at once; else (1 ms to 24 h) it waits min(RetryBackoff × 2^(Attempts−1), 24 h).
	RetryBackoff time.Duration
	// UniqueKey (optional, an identifier) makes the create idempotent: while
	// an execution of the namespace holding the key is waiting or running, or
	// was created less than its UniqueFor ago (whatever its state), creating
	// another writes nothing and returns that execution's id with a nil
	// error. Held by the schema, so concurrent creates on many hosts yield one.
	UniqueKey string
	// UniqueFor (0 to 30 days) keeps the key held for that long after the
	// creation, even once the execution ended; 0: only while it is live.
	UniqueFor time.Duration
	Now       time.Time
}

// Execution is one unit of work.
type Execution struct {
	ID                                  uuid.UUID // UUIDv7
	Namespace, Lane                     string
	State                               ExecutionState
	Priority                            int
	Payload, Result                     []byte
	RequiredCapabilities                []string
	Attempts, MaxAttempts, ReclaimCount int
	LastError                           string // the last fail reason, "lease expired", or the cancel reason
	CreatedAt                           time.Time
	RunAt                               time.Time // when it is (or was last) claimable from
	RetryBackoff                        time.Duration
	FinishedAt                          time.Time // when it became completed, failed or cancelled; zero while live
	UniqueKey                           string    // "" when created without one
	// The current lease while running, else the last one (zero: never
	// claimed): its holder, when it was claimed and when it expires (or
	// expired).
	Holder                    string
	ClaimedAt, LeaseExpiresAt time.Time
}

// CancelExecutionArgs are the arguments of CancelExecution.
type CancelExecutionArgs struct {
	ID     uuid.UUID
	Reason string // free text, at most 4 KiB
	Now    time.Time
}

// ListExecutionsArgs select a page of executions in id (creation) order.
// Each filter is optional: Namespace "" is every namespace.
type ListExecutionsArgs struct {
	Namespace, Lane string
	State           ExecutionState
	After           string
	Limit           int
	// NewestFirst lists in descending id order (newest first), as
	// index-backed as the ascending order. A cursor belongs to one order.
	NewestFirst bool
}

// ExecutionPage is one page of executions; Next is empty exactly on the last
// page.
type ExecutionPage struct {
	Executions []Execution
	Next       string
}

// ClaimArgs are the arguments of ClaimExecution.
type ClaimArgs struct {
	Namespace, InstanceID string
	LeaseTTL              time.Duration
	Now                   time.Time
}

// Lease is a worker's claim on a running execution. Renew, complete, fail
// and release need the current lease: a stale one is fenced out by its
// LeaseID and Epoch (a lease id is never issued twice, so even a lease from
// a history the database lost, after a failover, never passes another's
// fence).
type Lease struct {
	ExecutionID, LeaseID        uuid.UUID
	AttemptIndex                int   // 1 for the first attempt
	Epoch                       int64 // strictly increases with every claim of the execution
	Namespace, InstanceID, Lane string
	Payload                     []byte
	ExpiresAt                   time.Time
}

// RenewLeaseArgs are the arguments of RenewLease: the new expiry is Now + TTL.
type RenewLeaseArgs struct {
	Lease Lease
	TTL   time.Duration
	Now   time.Time
}

// CompleteArgs are the arguments of CompleteExecution.
type CompleteArgs struct {
	Lease  Lease
	Result []byte
	Now    time.Time
}

// FailArgs are the arguments of FailExecution.
type FailArgs struct {
	Lease  Lease
	Reason string
	Now    time.Time
}

// ListExpiredLeasesArgs select running leases with ExpiresAt <= AsOf,
// optionally of one namespace.
type ListExpiredLeasesArgs struct {
	AsOf             time.Time
	Namespace, After string
	Limit            int
}

// ExpiredLease is a running lease past its expiry.
type ExpiredLease struct {
	ExecutionID, LeaseID  uuid.UUID
	AttemptIndex          int
	Epoch                 int64
	Namespace, InstanceID string
	ExpiresAt             time.Time
}

// ExpiredLeasePage is one page of expired leases, ordered by (ExpiresAt,
// ExecutionID); Next is empty exactly on the last page.
type ExpiredLeasePage struct {
	Leases []ExpiredLease
	Next   string
}

// maxCreateBatch bounds CreateExecutions.
const maxCreateBatch = 10000

// maxUniqueFor bounds CreateExecutionArgs.UniqueFor.
const maxUniqueFor = 30 * 24 * time.Hour

// CreateExecution adds a waiting execution and returns its id (a UUIDv7).
// With a UniqueKey that a live (or, within its UniqueFor, any) execution of
// the namespace holds, it writes nothing and returns that execution's id.
func (s *Store) CreateExecution(ctx context.Context, a CreateExecutionArgs) (uuid.UUID, error) {
	if err := s.check(); err != nil {
		return uuid.Nil, err
	}
	row, err := s.executionRow(a, "")
	if err != nil {
		return uuid.Nil, err
	}
	if row.UniqueKey != "" {
		ids, err := s.createUnique(ctx, []engine.Execution{row}, []int64{uniqueUntil(row, a.UniqueFor)})
		if err != nil {
			return uuid.Nil, err
		}
		return ids[0], nil
	}
	err = s.writeOne(ctx, func(ctx context.Context, q engine.Queries) error {
		return q.ExecutionInsert(ctx, row)
	})
	if err != nil {
		return uuid.Nil, err
	}
	s.work.signal()
	return row.ID, nil
}

// CreateExecutions adds 1 to 10,000 waiting executions in one transaction
// and returns their ids in input order. Every item is validated first: the
// first bad one is ErrInvalidInput naming its index, and nothing is written.
// On PostgreSQL a batch without unique keys is one statement, one round
// trip, per 64 MiB of payloads (a larger batch is several statements in the
// one transaction). Items whose UniqueKey is held (by a stored execution or
// an earlier item of the batch) get the holder's id and write nothing.
func (s *Store) CreateExecutions(ctx context.Context, as []CreateExecutionArgs) ([]uuid.UUID, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if len(as) == 0 || len(as) > maxCreateBatch {
		return nil, invalid("executions", "%d items is outside 1..%d", len(as), maxCreateBatch)
	}
	rows := make([]engine.Execution, len(as))
	ids := make([]uuid.UUID, len(as))
	keyed := false
	for i, a := range as {
		row, err := s.executionRow(a, fmt.Sprintf("[%d].", i))
		if err != nil {
			return nil, err
		}
		rows[i], ids[i] = row, row.ID
		keyed = keyed || row.UniqueKey != ""
	}
	if keyed {
		until := make([]int64, len(as))
		for i := range as {
			until[i] = uniqueUntil(rows[i], as[i].UniqueFor)
		}
		return s.createUnique(ctx, rows, until)
	}
	chunks := byPayloadBytes(rows)
	insert := func(ctx context.Context, q engine.Queries) error {
		for _, chunk := range chunks {
			if err := q.ExecutionInsertMany(ctx, chunk); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	if len(chunks) == 1 {
		err = s.writeOne(ctx, insert)
	} else {
		err = s.write(ctx, insert) // one transaction, whatever the statements
	}
	if err != nil {
		return nil, err
	}
	s.work.signal()
	return ids, nil
}

// maxStatementPayload bounds the payload bytes one statement of a batch
// create carries: PostgreSQL's protocol messages and arrays stop at 1 GiB,
// and a batch may hold 10,000 payloads of 16 MiB.
const maxStatementPayload = 64 << 20

// byPayloadBytes cuts a batch into consecutive chunks whose payloads add up
// to at most maxStatementPayload each (a chunk holds at least one row).
func byPayloadBytes(rows []engine.Execution) [][]engine.Execution {
	var chunks [][]engine.Execution
	start, size := 0, 0
	for i, row := range rows {
		if i > start && size+len(row.Payload) > maxStatementPayload {
			chunks = append(chunks, rows[start:i])
			start, size = i, 0
		}
		size += len(row.Payload)
	}
	return append(chunks, rows[start:])
}

// uniqueUntil is until when a new execution's key stays held whatever its
// state (0: only while it is live).
func uniqueUntil(row engine.Execution, uniqueFor time.Duration) int64 {
	if row.UniqueKey == "" || uniqueFor <= 0 {
		return 0
	}
	// Rounded up to the millisecond, so that a hold of 1.5 ms lasts 2.
	return row.CreatedAtMs + (uniqueFor + time.Millisecond - 1).Milliseconds()
}

// createUnique writes a batch some of whose items hold unique keys, in one
// transaction (on PostgreSQL the keys' locks, then a statement per 64 MiB
// of payloads): an item whose key is held (by a live execution, by a key
// whose UniqueFor has not ended, or by an earlier item) gets the holder's
// id; the others are inserted, and a keyed insert that meets a concurrent
// redrive of an execution of its key (the schema's unique index) gets that
// execution's id. Keys with a UniqueFor are then held until it ends.
func (s *Store) createUnique(ctx context.Context, rows []engine.Execution, until []int64) ([]uuid.UUID, error) {
	// Each key goes to the engine once, with its first item.
	firstOf := map[[2]string]int{}
	var batch []engine.Execution
	var batchUntil []int64
	slot := make([]int, len(rows)) // rows[i]'s place in batch
	for i, row := range rows {
		if row.UniqueKey != "" {
			k := [2]string{row.Namespace, row.UniqueKey}
			if j, ok := firstOf[k]; ok {
				slot[i] = j
				continue
			}
			firstOf[k] = len(batch)
		}
		slot[i] = len(batch)
		batch, batchUntil = append(batch, row), append(batchUntil, until[i])
	}
	var namespaces, keys []string
	for _, row := range batch {
		if row.UniqueKey != "" {
			namespaces, keys = append(namespaces, row.Namespace), append(keys, row.UniqueKey)
		}
	}
	ids := make([]uuid.UUID, len(rows))
	err := s.write(ctx, func(ctx context.Context, q engine.Queries) error {
		// The keys' creates run one at a time from here, so that the insert
		// sees every create of them that committed before it.
		if err := q.ExecutionKeyLock(ctx, namespaces, keys); err != nil {
			return err
		}
		got := make([]uuid.UUID, 0, len(batch))
		for _, chunk := range byPayloadBytes(batch) {
			from := len(got)
			part, err := q.ExecutionInsertManyUnique(ctx, chunk, batchUntil[from:from+len(chunk)])
			if err != nil {
				return err
			}
			got = append(got, part...)
		}
		var err error
		for j, id := range got {
			if id == uuid.Nil { // met a concurrent redrive of the key's execution
				if got[j], err = s.createKeyed(ctx, q, batch[j], batchUntil[j]); err != nil {
					return err
				}
			}
		}
		for i := range rows {
			ids[i] = got[slot[i]]
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.work.signal()
	return ids, nil
}

// createKeyed inserts row unless its key is held, and returns the id of
// the execution holding the key. It takes the key's lock first, so that it
// reads every create of the key that committed; an insert that meets a
// concurrent redrive of the key's execution (which it waited for) reads
// again.
func (s *Store) createKeyed(ctx context.Context, q engine.Queries, row engine.Execution, until int64) (uuid.UUID, error) {
	if err := q.ExecutionKeyLock(ctx, []string{row.Namespace}, []string{row.UniqueKey}); err != nil {
		return uuid.Nil, err
	}
	for range 3 {
		id, err := s.holderOf(ctx, q, row.Namespace, row.UniqueKey, row.CreatedAtMs)
		if !errors.Is(err, engine.ErrNoRows) {
			return id, err
		}
		inserted, err := q.ExecutionInsertUnique(ctx, row)
		if err != nil {
			return uuid.Nil, err
		}
		if inserted {
			if until > 0 {
				kept, err := q.ExecutionKeyPut(ctx, row.Namespace, row.UniqueKey, row.ID, until, row.CreatedAtMs)
				if err != nil {
					return uuid.Nil, err
				}
				if !kept { // another's hold, which the lock should have shown
					break
				}
			}
			return row.ID, nil
		}
	}
	return uuid.Nil, fmt.Errorf("%w: unique key %q of namespace %q changed hands repeatedly during the create; retry",
		ErrConflict, row.UniqueKey, row.Namespace)
}

// holderOf reads the execution holding a unique key at now: the live one,
// else the one whose UniqueFor has not ended; ErrNoRows when none.
func (s *Store) holderOf(ctx context.Context, q engine.Queries, namespace, key string, nowMs int64) (uuid.UUID, error) {
	id, err := q.ExecutionFindLiveByKey(ctx, namespace, key)
	if !errors.Is(err, engine.ErrNoRows) {
		return id, err
	}
	return q.ExecutionKeyGet(ctx, namespace, key, nowMs)
}

// executionRow validates a and makes the row of a new execution; prefix
// goes before the field names of errors (an item of a batch).
func (s *Store) executionRow(a CreateExecutionArgs, prefix string) (engine.Execution, error) {
	if err := validIdentifier(prefix+"Namespace", a.Namespace); err != nil {
		return engine.Execution{}, err
	}
	if err := validIdentifier(prefix+"Lane", a.Lane); err != nil {
		return engine.Execution{}, err
	}
	caps, err := identifierSet(prefix+"RequiredCapabilities", a.RequiredCapabilities)
	if err != nil {
		return engine.Execution{}, err
	}
	if a.MaxAttempts < 0 {
		return engine.Execution{}, invalid(prefix+"MaxAttempts", "%d is negative", a.MaxAttempts)
	}
	if a.UniqueKey != "" {
		if err := validIdentifier(prefix+"UniqueKey", a.UniqueKey); err != nil {
			return engine.Execution{}, err
		}
	}
	if a.UniqueFor < 0 || a.UniqueFor > maxUniqueFor {
		return engine.Execution{}, invalid(prefix+"UniqueFor", "%v is outside 0..30 days", a.UniqueFor)
	}
	if a.UniqueFor > 0 && a.UniqueKey == "" {
		return engine.Execution{}, invalid(prefix+"UniqueFor", "needs a UniqueKey")
	}
	if err := validPayload(prefix+"Payload", a.Payload); err != nil {
		return engine.Execution{}, err
	}
	if a.RetryBackoff < 0 || (a.RetryBackoff > 0 && a.RetryBackoff < time.Millisecond) || a.RetryBackoff > maxRetryBackoff {
		return engine.Execution{}, invalid(prefix+"RetryBackoff", "%v is neither 0 nor between 1ms and 24h", a.RetryBackoff)
	}
	now, err := s.at(prefix+"Now", a.Now)
	if err != nil {
		return engine.Execution{}, err
	}
	if err := validTime(prefix+"RunAt", a.RunAt); err != nil {
		return engine.Execution{}, err
	}
	runAt := now
	if !a.RunAt.IsZero() {
		runAt = a.RunAt.UnixMilli()
	}
	maxAttempts, backoff := a.MaxAttempts, a.RetryBackoff
	if maxAttempts == 0 {
		maxAttempts = s.cfg.defaultMaxAttempts
	}
	if backoff == 0 {
		backoff = s.cfg.defaultRetryBackoff
	}
	id, err := uuid.NewV7()
	if err != nil {
		return engine.Execution{}, fmt.Errorf("roster: new execution id: %w", err)
	}
	return engine.Execution{
		ID:                   id,
		Namespace:            a.Namespace,
		Lane:                 a.Lane,
		Priority:             int64(a.Priority),
		Payload:              a.Payload,
		RequiredCapabilities: caps,
		MaxAttempts:          int64(maxAttempts),
		CreatedAtMs:          now,
		RunAtMs:              runAt,
		RetryBackoffMs:       backoff.Milliseconds(),
		UniqueKey:            a.UniqueKey,
		Scheduled:            !a.RunAt.IsZero(),
	}, nil
}

// GetExecution returns one execution, or ErrNotFound.
func (s *Store) GetExecution(ctx context.Context, id uuid.UUID) (Execution, error) {
	if err := s.check(); err != nil {
		return Execution{}, err
	}
	var e Execution
	err := s.read(ctx, func(ctx context.Context, q engine.Queries) error {
		row, err := q.ExecutionGet(ctx, id)
		if errors.Is(err, engine.ErrNoRows) {
			return fmt.Errorf("%w: execution %s", ErrNotFound, id)
		}
		e = executionFromRow(row)
		return err
	})
	return e, err
}

// ClaimExecution gives a live worker the best claimable execution of its
// namespace (waiting and RunAt <= now; highest priority, then earliest RunAt,
// then lowest id) whose lane is one of the worker's lanes and whose required
// capabilities are all among the worker's, under a new lease: a new attempt,
// a new epoch and a new lease id. A worker that is not alive is
// ErrNotRegistered; nothing to claim is ErrNoWork.
func (s *Store) ClaimExecution(ctx context.Context, a ClaimArgs) (Lease, error) {
	leases, err := s.claim(ctx, a, 1)
	if err != nil {
		return Lease{}, err
	}
	return leases[0], nil
}

// ClaimExecutions is ClaimExecution for up to max executions (1 to 1000) in
// one transaction, returned best first; fewer when fewer are claimable, or
// when their payloads would add up to more than 64 MiB (a claim always
// takes the best one), and ErrNoWork when none is.
func (s *Store) ClaimExecutions(ctx context.Context, a ClaimArgs, max int) ([]Lease, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if max < 1 || max > maxClaimBatch {
		return nil, invalid("max", "%d is outside 1..%d", max, maxClaimBatch)
	}
	return s.claim(ctx, a, max)
}

func (s *Store) claim(ctx context.Context, a ClaimArgs, n int) ([]Lease, error) {
	p, err := s.claimParams(a, n)
	if err != nil {
		return nil, err
	}
	leases, _, err := s.claimWith(ctx, p)
	if err != nil {
		return nil, err
	}
	if len(leases) == 0 {
		return nil, fmt.Errorf("%w: nothing claimable in namespace %q for the lanes and capabilities of %q",
			ErrNoWork, a.Namespace, a.InstanceID)
	}
	return leases, nil
}

// claimParams validates a claim for n executions and gives each a fresh
// lease id.
func (s *Store) claimParams(a ClaimArgs, n int) (engine.ClaimParams, error) {
	if err := s.check(); err != nil {
		return engine.ClaimParams{}, err
	}
	if err := validWorkerKey(a.Namespace, a.InstanceID); err != nil {
		return engine.ClaimParams{}, err
	}
	if err := validTTL("LeaseTTL", a.LeaseTTL); err != nil {
		return engine.ClaimParams{}, err
	}
	now, err := s.at("Now", a.Now)
	if err != nil {
		return engine.ClaimParams{}, err
	}
	p := engine.ClaimParams{
		Namespace: a.Namespace, InstanceID: a.InstanceID,
		NowMs: now, ExpiresAtMs: now + a.LeaseTTL.Milliseconds(), LeaseIDs: make([]uuid.UUID, n),
		MaxBytes: s.cfg.claimBytes,
	}
	for i := range p.LeaseIDs {
		id, err := uuid.NewV7()
		if err != nil {
			return engine.ClaimParams{}, fmt.Errorf("roster: new lease id: %w", err)
		}
		p.LeaseIDs[i] = id
	}
	return p, nil
}

// claimWith runs a claim: the leases it took (none is not an error here)
// and, when it took fewer than asked, the earliest RunAt of the worker's
// scheduled work (zero: none). A claim that finds nothing writes nothing.
func (s *Store) claimWith(ctx context.Context, p engine.ClaimParams) ([]Lease, time.Time, error) {
	if err := s.check(); err != nil {
		return nil, time.Time{}, err
	}
	res, err := s.eng.Claim(ctx, p)
	if err != nil {
		return nil, time.Time{}, s.observe(claimError(err, p))
	}
	return s.claimed(res, p.InstanceID)
}

// claimed maps what a claim took to leases and tells the Observer.
func (s *Store) claimed(res engine.ClaimResult, instanceID string) ([]Lease, time.Time, error) {
	leases := make([]Lease, len(res.Leases))
	for i, c := range res.Leases {
		leases[i] = leaseFromRow(c, instanceID)
	}
	if len(leases) > 0 {
		s.noteClaimed(leases)
	}
	var next time.Time
	if res.NextRunAtMs != 0 {
		next = msTime(res.NextRunAtMs)
	}
	return leases, next, nil
}

// claimError says what a claim's ErrNoRows means: the worker is not alive.
func claimError(err error, p engine.ClaimParams) error {
	if errors.Is(err, engine.ErrNoRows) {
		return notRegistered(engine.WorkerKey{Namespace: p.Namespace, InstanceID: p.InstanceID})
	}
	return err
}

// CancelExecution cancels a waiting or running execution: it ends
// cancelled with LastError = Reason, and a running one's lease ends at once
// (the holder's calls get ErrLeaseLost). Cancelling a cancelled execution is
// a no-op; a completed or failed one is ErrConflict; an unknown id
// ErrNotFound.
func (s *Store) CancelExecution(ctx context.Context, a CancelExecutionArgs) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := validFreeText("Reason", a.Reason, maxFailReasonBytes); err != nil {
		return err
	}
	now, err := s.at("Now", a.Now)
	if err != nil {
		return err
	}
	return s.write(ctx, func(ctx context.Context, q engine.Queries) error {
		done, err := q.ExecutionCancel(ctx, a.ID, a.Reason, now)
		if err != nil || done {
			return err
		}
		state, err := q.ExecutionGetState(ctx, a.ID)
		switch {
		case errors.Is(err, engine.ErrNoRows):
			return fmt.Errorf("%w: execution %s", ErrNotFound, a.ID)
		case err != nil:
			return err
		case ExecutionState(state) == ExecutionCancelled:
			return nil
		}
		return fmt.Errorf("%w: execution %s is %s and cannot be cancelled", ErrConflict, a.ID, state)
	})
}

const (
	executionsCursor       = "executions"
	newestExecutionsCursor = "executions-newest"
)

// ListExecutions pages executions in id (creation) order, filtered by
// namespace ("" = all), lane and state, each optional.
func (s *Store) ListExecutions(ctx context.Context, a ListExecutionsArgs) (ExecutionPage, error) {
	if err := s.check(); err != nil {
		return ExecutionPage{}, err
	}
	if err := validOptionalIdentifier("Namespace", a.Namespace); err != nil {
		return ExecutionPage{}, err
	}
	if err := validOptionalIdentifier("Lane", a.Lane); err != nil {
		return ExecutionPage{}, err
	}
	if a.State != "" && !a.State.known() {
		return ExecutionPage{}, invalid("State", "unknown execution state %q", a.State)
	}
	limit, err := pageLimit(a.Limit)
	if err != nil {
		return ExecutionPage{}, err
	}
	p := engine.ExecutionListParams{Namespace: a.Namespace, Lane: a.Lane, State: string(a.State), Limit: limit + 1, Newest: a.NewestFirst}
	kind := executionsCursor
	if a.NewestFirst {
		kind, p.AfterID = newestExecutionsCursor, uuid.Max
	}
	var after string
	ok, err := decodeCursor(a.After, kind, &after)
	if err != nil {
		return ExecutionPage{}, err
	}
	if ok {
		if p.AfterID, err = uuid.Parse(after); err != nil {
			return ExecutionPage{}, invalid("After", "not a cursor returned by this list")
		}
	}
	var rows []engine.Execution
	err = s.read(ctx, func(ctx context.Context, q engine.Queries) error {
		var err error
		rows, err = q.ExecutionList(ctx, p)
		return err
	})
	if err != nil {
		return ExecutionPage{}, err
	}
	var page ExecutionPage
	if len(rows) > limit {
		rows = rows[:limit]
		page.Next = encodeCursor(kind, rows[limit-1].ID.String())
	}
	page.Executions = make([]Execution, len(rows))
	for i, r := range rows {
		page.Executions[i] = executionFromRow(r)
	}
	return page, nil
}

// RenewLease extends the current lease to Now + TTL and returns the new
// expiry. A stale, expired or ended lease is ErrLeaseLost.
func (s *Store) RenewLease(ctx context.Context, a RenewLeaseArgs) (time.Time, error) {
	if err := s.check(); err != nil {
		return time.Time{}, err
	}
	if err := validTTL("TTL", a.TTL); err != nil {
		return time.Time{}, err
	}
	now, err := s.at("Now", a.Now)
	if err != nil {
		return time.Time{}, err
	}
	expires := now + a.TTL.Milliseconds()
	err = s.writeOne(ctx, func(ctx context.Context, q engine.Queries) error {
		return leaseError(q.LeaseRenew(ctx, leaseRef(a.Lease), now, expires), a.Lease)
	})
	if err != nil {
		return time.Time{}, s.observeLease(err)
	}
	return msTime(expires), nil
}

// CompleteExecution ends the execution of the current lease as completed with
// its result. A stale, expired or ended lease is ErrLeaseLost.
func (s *Store) CompleteExecution(ctx context.Context, a CompleteArgs) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := validPayload("Result", a.Result); err != nil {
		return err
	}
	now, err := s.at("Now", a.Now)
	if err != nil {
		return err
	}
	err = s.writeOne(ctx, func(ctx context.Context, q engine.Queries) error {
		return leaseError(q.LeaseComplete(ctx, leaseRef(a.Lease), now, a.Result), a.Lease)
	})
	if err == nil {
		s.noteEnded(a.Lease.Namespace, a.Lease.Lane, false)
	}
	return s.observeLease(err)
}

// FailExecution ends the current attempt as failed with a reason (free text,
// at most 4 KiB): the execution returns to waiting while attempts remain, else
// ends failed. A stale, expired or ended lease is ErrLeaseLost.
func (s *Store) FailExecution(ctx context.Context, a FailArgs) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := validFreeText("Reason", a.Reason, maxFailReasonBytes); err != nil {
		return err
	}
	now, err := s.at("Now", a.Now)
	if err != nil {
		return err
	}
	err = s.writeOne(ctx, func(ctx context.Context, q engine.Queries) error {
		return leaseError(q.LeaseFail(ctx, leaseRef(a.Lease), now, a.Reason), a.Lease)
	})
	if err == nil {
		s.noteEnded(a.Lease.Namespace, a.Lease.Lane, true)
		s.work.signal() // a retry may be claimable
	}
	return s.observeLease(err)
}

// ReleaseArgs are the arguments of ReleaseLease.
type ReleaseArgs struct {
	Lease Lease
	Now   time.Time
}

// ReleaseLease ends a lease without using up an attempt, for work its holder
// claimed but never started: the execution waits again at once with its
// RunAt, Attempts back to what it was before the claim, and its epoch still
// increased (the released lease is fenced). A stale, expired or ended lease
// is ErrLeaseLost.
func (s *Store) ReleaseLease(ctx context.Context, a ReleaseArgs) error {
	if err := s.check(); err != nil {
		return err
	}
	now, err := s.at("Now", a.Now)
	if err != nil {
		return err
	}
	err = s.writeOne(ctx, func(ctx context.Context, q engine.Queries) error {
		return leaseError(q.LeaseRelease(ctx, leaseRef(a.Lease), now), a.Lease)
	})
	if err != nil {
		return s.observeLease(err)
	}
	s.work.signal()
	return nil
}

func leaseRef(l Lease) engine.LeaseRef {
	return engine.LeaseRef{ExecutionID: l.ExecutionID, LeaseID: l.LeaseID, Epoch: l.Epoch}
}

// observeLease tells the Observer of a lost lease.
func (s *Store) observeLease(err error) error {
	if errors.Is(err, ErrLeaseLost) {
		s.cfg.observer.LeaseLost()
	}
	return err
}

// leaseError turns "no current lease matched" into ErrLeaseLost.
func leaseError(err error, l Lease) error {
	if errors.Is(err, engine.ErrNoRows) {
		return fmt.Errorf("%w: lease %s (execution %s, epoch %d) is not the current, unexpired lease",
			ErrLeaseLost, l.LeaseID, l.ExecutionID, l.Epoch)
	}
	return err
}

const leasesCursor = "leases"

// ListExpiredLeases pages the running leases with ExpiresAt <= AsOf, ordered
// by (ExpiresAt, ExecutionID), of one namespace or of all.
func (s *Store) ListExpiredLeases(ctx context.Context, a ListExpiredLeasesArgs) (ExpiredLeasePage, error) {
	if err := s.check(); err != nil {
		return ExpiredLeasePage{}, err
	}
	if err := validOptionalIdentifier("Namespace", a.Namespace); err != nil {
		return ExpiredLeasePage{}, err
	}
	limit, err := pageLimit(a.Limit)
	if err != nil {
		return ExpiredLeasePage{}, err
	}
	asOf, err := s.at("AsOf", a.AsOf)
	if err != nil {
		return ExpiredLeasePage{}, err
	}
	p := engine.ExpiredLeaseListParams{
		Namespace: a.Namespace, AsOfMs: asOf, AfterExpiresAtMs: math.MinInt64, Limit: limit + 1,
	}
	var afterID string
	ok, err := decodeCursor(a.After, leasesCursor, &p.AfterExpiresAtMs, &afterID)
	if err != nil {
		return ExpiredLeasePage{}, err
	}
	if ok {
		if p.AfterExecutionID, err = uuid.Parse(afterID); err != nil {
			return ExpiredLeasePage{}, invalid("After", "not a cursor returned by this list")
		}
	}
	var rows []engine.ExpiredLease
	err = s.read(ctx, func(ctx context.Context, q engine.Queries) error {
		var err error
		rows, err = q.LeaseListExpired(ctx, p)
		return err
	})
	if err != nil {
		return ExpiredLeasePage{}, err
	}
	var page ExpiredLeasePage
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[limit-1]
		page.Next = encodeCursor(leasesCursor, last.ExpiresAtMs, last.ExecutionID.String())
	}
	page.Leases = make([]ExpiredLease, len(rows))
	for i, r := range rows {
		page.Leases[i] = ExpiredLease{
			ExecutionID:  r.ExecutionID,
			LeaseID:      r.LeaseID,
			AttemptIndex: int(r.AttemptIndex),
			Epoch:        r.Epoch,
			Namespace:    r.Namespace,
			InstanceID:   r.InstanceID,
			ExpiresAt:    msTime(r.ExpiresAtMs),
		}
	}
	return page, nil
}

// ReclaimExpiredLeases ends up to limit (0 = all) leases expired at now,
// soonest first: each execution returns to waiting with ReclaimCount + 1 while
// attempts remain, else ends failed with LastError "lease expired". The old
// holders are fenced: their lease calls get ErrLeaseLost. It works in bounded
// batches, one transaction each.
func (s *Store) ReclaimExpiredLeases(ctx context.Context, now time.Time, limit int) (int, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	if limit < 0 {
		return 0, invalid("limit", "%d is negative", limit)
	}
	nowMs, err := s.at("now", now)
	if err != nil {
		return 0, err
	}
	total := 0
	for limit == 0 || total < limit {
		batch := sweepBatchSize
		if limit > 0 {
			batch = min(batch, limit-total)
		}
		var n int
		err := s.write(ctx, func(ctx context.Context, q engine.Queries) error {
			ids, err := q.LeaseReclaimBatch(ctx, nowMs, batch)
			n = len(ids)
			return err
		})
		total += n
		if err != nil {
			return total, err
		}
		if n < batch {
			break
		}
	}
	if total > 0 {
		s.work.signal() // executions with attempts left wait again
		s.cfg.observer.Reclaimed(total)
		s.log.Info("roster: reclaimed expired leases", "count", total)
	}
	return total, nil
}

// PruneExecutions deletes the executions that finished (FinishedAt) before
// before, with their attempts, in bounded batches (one transaction each,
// oldest first), and returns how many it deleted. Live executions are never
// touched; the cost does not grow with them.
func (s *Store) PruneExecutions(ctx context.Context, before time.Time) (int, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	beforeMs, err := s.at("before", before)
	if err != nil {
		return 0, err
	}
	total := 0
	for {
		var n int
		err := s.write(ctx, func(ctx context.Context, q engine.Queries) error {
			var err error
			n, err = q.ExecutionPruneBatch(ctx, beforeMs, sweepBatchSize)
			return err
		})
		total += n
		if err != nil {
			return total, err
		}
		if n < sweepBatchSize {
			// A key is held until its UniqueFor ends, whatever the prune's
			// horizon: only keys whose hold ended by now may go.
			return total, s.pruneKeys(ctx, min(beforeMs, s.now(time.Time{}).UnixMilli()))
		}
	}
}

// pruneKeys deletes, in bounded batches, the unique keys whose UniqueFor
// ended before beforeMs.
func (s *Store) pruneKeys(ctx context.Context, beforeMs int64) error {
	for {
		var n int
		err := s.write(ctx, func(ctx context.Context, q engine.Queries) error {
			var err error
			n, err = q.ExecutionKeyPruneBatch(ctx, beforeMs, sweepBatchSize)
			return err
		})
		if err != nil || n < sweepBatchSize {
			return err
		}
	}
}

// validPayload checks the size rule of payloads and results.
func validPayload(field string, b []byte) error {
	if len(b) > maxPayloadBytes {
		return invalid(field, "%d bytes exceeds the limit of 16 MiB", len(b))
	}
	return nil
}

func leaseFromRow(r engine.ClaimedLease, instanceID string) Lease {
	return Lease{
		ExecutionID:  r.ExecutionID,
		LeaseID:      r.LeaseID,
		AttemptIndex: int(r.AttemptIndex),
		Epoch:        r.Epoch,
		Namespace:    r.Namespace,
		InstanceID:   instanceID,
		Lane:         r.Lane,
		Payload:      r.Payload,
		ExpiresAt:    msTime(r.ExpiresAtMs),
	}
}

func executionFromRow(r engine.Execution) Execution {
	return Execution{
		ID:                   r.ID,
		Namespace:            r.Namespace,
		Lane:                 r.Lane,
		State:                ExecutionState(r.State),
		Priority:             int(r.Priority),
		Payload:              r.Payload,
		Result:               r.Result,
		RequiredCapabilities: r.RequiredCapabilities,
		Attempts:             int(r.Attempts),
		MaxAttempts:          int(r.MaxAttempts),
		ReclaimCount:         int(r.ReclaimCount),
		LastError:            r.LastError,
		CreatedAt:            msTime(r.CreatedAtMs),
		RunAt:                msTime(r.RunAtMs),
		RetryBackoff:         time.Duration(r.RetryBackoffMs) * time.Millisecond,
		FinishedAt:           optionalTime(r.FinishedAtMs),
		UniqueKey:            r.UniqueKey,
		Holder:               r.Holder,
		ClaimedAt:            optionalTime(r.ClaimedAtMs),
		LeaseExpiresAt:       optionalTime(r.ExpiresAtMs),
	}
}

// optionalTime is msTime with 0 as the zero time (absent).
func optionalTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return msTime(ms)
}

// validFreeText checks free text (a fail or cancel reason): valid UTF-8, no
// NUL byte, at most maxBytes bytes.
func validFreeText(field, v string, maxBytes int) error {
	if len(v) > maxBytes {
		return invalid(field, "%d bytes exceeds the limit of %d", len(v), maxBytes)
	}
	if !utf8.ValidString(v) {
		return invalid(field, "not valid UTF-8")
	}
	if strings.IndexByte(v, 0) >= 0 {
		return invalid(field, "contains a NUL byte")
	}
	return nil
}
