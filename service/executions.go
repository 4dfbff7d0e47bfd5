package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/rosterdb/roster/internal/engine"
)

// maxPayloadBytes bounds payloads and results.
const maxPayloadBytes = 16 << 20

// maxRetryBackoff bounds RetryBackoff and every retry's wait.
const maxRetryBackoff = 24 * time.Hour

// ExecutionState is the state of an execution.
type ExecutionState string

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
	// Timeout bounds each run (0: none; else 1 ms to 30 days, whole
	// milliseconds): a lease of the execution is lost at its claim + Timeout
	// (Lease.Deadline) whatever its renewals or its holder's heartbeats, and
	// the execution is reclaimed with LastError "timed out".
	Timeout time.Duration
	// Group (optional, an identifier) puts the execution in a group of its
	// lane: at equal priority the lane's groups take turns (executions
	// without a group form one group of their own), and the lane's
	// MaxRunningPerGroup caps each group (see LaneLimits).
	Group string
	// Metadata (optional) is stored with the execution and handed to every
	// Lease of it (a trace context, say): at most 64 entries, keys
	// identifiers, values valid UTF-8 of at most 4 KiB, keys and values 16
	// KiB in all. It survives retries, reclaims and redrives.
	Metadata map[string]string
	Now      time.Time
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
	FinishedAt                          time.Time     // when it became completed, failed or cancelled; zero while live
	UniqueKey                           string        // "" when created without one
	Group                               string        // "" when created without one
	Timeout                             time.Duration // 0: none
	// The current lease while running, else the last one (zero: never
	// claimed): its holder, when it was claimed and when it expires (or
	// expired). A bound lease (LeaseBound) has no expiry of its own: its
	// LeaseExpiresAt is its deadline, zero when it has none, and it lives
	// as long as its holder's registration. LeaseDeadline is the claim +
	// Timeout (zero: none).
	Holder                                   string
	ClaimedAt, LeaseExpiresAt, LeaseDeadline time.Time
	LeaseBound                               bool
	Metadata                                 map[string]string // nil when none
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
	// UniqueKey or Group (one of them), with Namespace, finds the
	// executions created with that key or in that group (finished ones
	// too), through an index of its own; "" is any.
	UniqueKey, Group string
	After            string
	Limit            int
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

// maxCreateBatch bounds CreateExecutions.
const maxCreateBatch = 10000

// CreateExecution adds a waiting execution and returns its id (a UUIDv7).
// With a UniqueKey that a live (or, within its UniqueFor, any) execution of
// the namespace holds, it writes nothing and returns that execution's id.
func (s *Store) CreateExecution(ctx context.Context, a CreateExecutionArgs) (uuid.UUID, error) {
	if err := s.notClosed(); err != nil {
		return uuid.Nil, err
	}
	if len(s.cfg.middleware) == 0 {
		return s.createExecution(ctx, a)
	}
	ids, err := s.createMiddleware(ctx, []CreateExecutionArgs{a}, func(ctx context.Context, items []CreateExecutionArgs) ([]uuid.UUID, error) {
		if len(items) != 1 {
			return s.createExecutions(ctx, items)
		}
		id, err := s.createExecution(ctx, items[0])
		if err != nil {
			return nil, err
		}
		return []uuid.UUID{id}, nil
	})
	if err != nil {
		return uuid.Nil, err
	}
	if len(ids) != 1 {
		return uuid.Nil, fmt.Errorf("roster: a Create middleware returned %d ids for one execution", len(ids))
	}
	return ids[0], nil
}

// createExecution is CreateExecution once its middleware ran.
func (s *Store) createExecution(ctx context.Context, a CreateExecutionArgs) (uuid.UUID, error) {
	row, err := s.executionRow(a, "")
	if err != nil {
		return uuid.Nil, err
	}
	if err := s.touchGroups(ctx, []engine.Execution{row}); err != nil {
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
	if err := s.notClosed(); err != nil {
		return nil, err
	}
	if len(s.cfg.middleware) == 0 {
		return s.createExecutions(ctx, as)
	}
	return s.createMiddleware(ctx, as, s.createExecutions)
}

// batchRows validates a batch create's items and makes their rows: the
// first bad item is ErrInvalidInput naming its index. It reports whether
// any item holds a unique key, and until when each key is held.
func (s *Store) batchRows(as []CreateExecutionArgs) (rows []engine.Execution, until []int64, keyed bool, err error) {
	if len(as) == 0 || len(as) > maxCreateBatch {
		return nil, nil, false, invalid("executions", "%d items is outside 1..%d", len(as), maxCreateBatch)
	}
	rows = make([]engine.Execution, len(as))
	for i, a := range as {
		row, err := s.executionRow(a, fmt.Sprintf("[%d].", i))
		if err != nil {
			return nil, nil, false, err
		}
		rows[i] = row
		keyed = keyed || row.UniqueKey != ""
	}
	if keyed {
		until = make([]int64, len(as))
		for i := range as {
			until[i] = uniqueUntil(rows[i], as[i].UniqueFor)
		}
	}
	return rows, until, keyed, nil
}

// insertBatch returns the write of a batch without unique keys: a
// statement per 64 MiB of payloads.
func (s *Store) insertBatch(rows []engine.Execution) (write func(ctx context.Context, q engine.Queries) error, statements int) {
	chunks := s.byPayloadBytes(rows)
	return func(ctx context.Context, q engine.Queries) error {
		for _, chunk := range chunks {
			if err := q.ExecutionInsertMany(ctx, chunk); err != nil {
				return err
			}
		}
		return nil
	}, len(chunks)
}

// createExecutions is CreateExecutions once its middleware ran.
func (s *Store) createExecutions(ctx context.Context, as []CreateExecutionArgs) ([]uuid.UUID, error) {
	rows, until, keyed, err := s.batchRows(as)
	if err != nil {
		return nil, err
	}
	if err := s.touchGroups(ctx, rows); err != nil {
		return nil, err
	}
	if keyed {
		return s.createUnique(ctx, rows, until)
	}
	ids := make([]uuid.UUID, len(rows))
	for i, row := range rows {
		ids[i] = row.ID
	}
	insert, statements := s.insertBatch(rows)
	if statements == 1 {
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
// to at most maxStatementPayload each (a chunk holds at least one row;
// tests lower the bound).
func (s *Store) byPayloadBytes(rows []engine.Execution) [][]engine.Execution {
	bound := maxStatementPayload
	if s.cfg.statementBytes > 0 {
		bound = s.cfg.statementBytes
	}
	var chunks [][]engine.Execution
	start, size := 0, 0
	for i, row := range rows {
		if i > start && size+len(row.Payload) > bound {
			chunks = append(chunks, rows[start:i])
			start, size = i, 0
		}
		size += len(row.Payload)
	}
	return append(chunks, rows[start:])
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
	if err := validOptionalIdentifier(prefix+"Group", a.Group); err != nil {
		return engine.Execution{}, err
	}
	switch {
	case a.Timeout < 0 || a.Timeout > maxUniqueFor || (a.Timeout > 0 && a.Timeout < time.Millisecond):
		return engine.Execution{}, invalid(prefix+"Timeout", "%v is neither 0 nor between 1ms and 30 days", a.Timeout)
	case a.Timeout%time.Millisecond != 0:
		return engine.Execution{}, invalid(prefix+"Timeout", "%v is not a whole number of milliseconds", a.Timeout)
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
	metadata, err := encodeMetadata(prefix+"Metadata", a.Metadata)
	if err != nil {
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
		Group:                a.Group,
		Metadata:             metadata,
		TimeoutMs:            a.Timeout.Milliseconds(),
	}, nil
}

// GetExecution returns one execution, or ErrNotFound.
func (s *Store) GetExecution(ctx context.Context, id uuid.UUID) (Execution, error) {
	if err := s.notClosed(); err != nil {
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

// CancelExecution cancels a waiting or running execution: it ends
// cancelled with LastError = Reason, and a running one's lease ends at once
// (the holder's calls get ErrLeaseLost). Cancelling a cancelled execution is
// a no-op; a completed or failed one is ErrConflict; an unknown id
// ErrNotFound.
func (s *Store) CancelExecution(ctx context.Context, a CancelExecutionArgs) error {
	if err := s.notClosed(); err != nil {
		return err
	}
	if err := validFreeText("Reason", a.Reason, maxFailReasonBytes); err != nil {
		return err
	}
	now, err := s.at("Now", a.Now)
	if err != nil {
		return err
	}
	cancelled := false
	defer func() {
		if cancelled {
			s.lost.signal() // a running one's holder, if it runs here, stops at once
		}
	}()
	return s.write(ctx, func(ctx context.Context, q engine.Queries) error {
		done, err := q.ExecutionCancel(ctx, a.ID, a.Reason, now)
		if err != nil || done {
			if done {
				s.roomFreed()
				cancelled = err == nil
			}
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
	if err := s.notClosed(); err != nil {
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
	for _, f := range []struct{ field, v string }{{"UniqueKey", a.UniqueKey}, {"Group", a.Group}} {
		if err := validOptionalIdentifier(f.field, f.v); err != nil {
			return ExecutionPage{}, err
		}
		if f.v != "" && a.Namespace == "" {
			return ExecutionPage{}, invalid(f.field, "a search by %s needs its Namespace", f.field)
		}
	}
	if a.UniqueKey != "" && a.Group != "" {
		return ExecutionPage{}, invalid("Group", "search by UniqueKey or by Group, not both")
	}
	limit, err := pageLimit(a.Limit)
	if err != nil {
		return ExecutionPage{}, err
	}
	p := engine.ExecutionListParams{Namespace: a.Namespace, Lane: a.Lane, State: string(a.State), UniqueKey: a.UniqueKey, Group: a.Group,
		Limit: limit + 1, Newest: a.NewestFirst}
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

// validPayload checks the size rule of payloads and results.
func validPayload(field string, b []byte) error {
	if len(b) > maxPayloadBytes {
		return invalid(field, "%d bytes exceeds the limit of 16 MiB", len(b))
	}
	return nil
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
		Group:                r.Group,
		Holder:               r.Holder,
		ClaimedAt:            optionalTime(r.ClaimedAtMs),
		LeaseExpiresAt:       leaseExpiry(r.ExpiresAtMs),
		LeaseDeadline:        optionalTime(r.DeadlineMs),
		LeaseBound:           r.Bound,
		Timeout:              time.Duration(r.TimeoutMs) * time.Millisecond,
		Metadata:             decodeMetadata(r.Metadata),
	}
}

// leaseExpiry is a stored lease expiry as a time: zero when absent, or when
// the lease is bound without a deadline (it has no expiry of its own).
func leaseExpiry(ms int64) time.Time {
	if ms == engine.NeverMs {
		return time.Time{}
	}
	return optionalTime(ms)
}

// optionalTime is msTime with 0 as the zero time (absent).
func optionalTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return msTime(ms)
}

// RetryExecutionArgs redrive a failed or cancelled execution.
type RetryExecutionArgs struct {
	ID    uuid.UUID
	RunAt time.Time // zero: now
	Now   time.Time
}

// RetryExecution (redrive) puts a failed or cancelled execution back to
// waiting at RunAt (zero: now), granting one more attempt when none is left
// (MaxAttempts = Attempts + 1); LastError is kept until the next attempt
// ends. A waiting execution is a no-op (nil); a running or completed one is
// ErrConflict, and so is one whose UniqueKey another live execution holds
// now; an unknown id is ErrNotFound.
func (s *Store) RetryExecution(ctx context.Context, a RetryExecutionArgs) error {
	if err := s.notClosed(); err != nil {
		return err
	}
	now, err := s.at("Now", a.Now)
	if err != nil {
		return err
	}
	if err := validTime("RunAt", a.RunAt); err != nil {
		return err
	}
	runAt := now
	if !a.RunAt.IsZero() {
		runAt = a.RunAt.UnixMilli()
	}
	err = s.write(ctx, func(ctx context.Context, q engine.Queries) error {
		done, err := q.ExecutionRetry(ctx, a.ID, runAt, runAt <= now)
		if err != nil || done {
			return err
		}
		state, err := q.ExecutionGetState(ctx, a.ID)
		switch {
		case errors.Is(err, engine.ErrNoRows):
			return fmt.Errorf("%w: execution %s", ErrNotFound, a.ID)
		case err != nil:
			return err
		case state == string(ExecutionWaiting):
			return nil
		}
		return fmt.Errorf("%w: execution %s is %s; only a failed or cancelled one can be retried", ErrConflict, a.ID, state)
	})
	if err != nil {
		return err
	}
	s.work.signal()
	return nil
}
