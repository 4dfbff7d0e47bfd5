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
