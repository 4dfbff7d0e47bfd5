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

// ExecutionState is the state of an execution.
type ExecutionState string

// The execution states: waiting → running → completed | failed, and back to
// waiting when an attempt fails or is reclaimed while attempts remain.
const (
	ExecutionWaiting   ExecutionState = "waiting"
	ExecutionRunning   ExecutionState = "running"
	ExecutionCompleted ExecutionState = "completed"
	ExecutionFailed    ExecutionState = "failed"
)

// CreateExecutionArgs are the arguments of CreateExecution.
type CreateExecutionArgs struct {
	Namespace, Lane      string
	Payload              []byte
	Priority             int // higher is claimed first; ties: oldest first
	RequiredCapabilities []string
	MaxAttempts          int // 0 means 1
	Now                  time.Time
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
	LastError                           string
	CreatedAt                           time.Time
}

// ClaimArgs are the arguments of ClaimExecution.
type ClaimArgs struct {
	Namespace, InstanceID string
	LeaseTTL              time.Duration
	Now                   time.Time
}

// Lease is a worker's claim on a running execution. Renew, complete and fail
// need the current lease: a stale one is fenced out by its Epoch.
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

// CreateExecution adds a waiting execution and returns its id (a UUIDv7).
func (s *Store) CreateExecution(ctx context.Context, a CreateExecutionArgs) (uuid.UUID, error) {
	if err := s.check(); err != nil {
		return uuid.Nil, err
	}
	if err := validIdentifier("Namespace", a.Namespace); err != nil {
		return uuid.Nil, err
	}
	if err := validIdentifier("Lane", a.Lane); err != nil {
		return uuid.Nil, err
	}
	caps, err := identifierSet("RequiredCapabilities", a.RequiredCapabilities)
	if err != nil {
		return uuid.Nil, err
	}
	if a.MaxAttempts < 0 {
		return uuid.Nil, invalid("MaxAttempts", "%d is negative", a.MaxAttempts)
	}
	if err := validPayload("Payload", a.Payload); err != nil {
		return uuid.Nil, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.Nil, fmt.Errorf("roster: new execution id: %w", err)
	}
	row := engine.Execution{
		ID:                   id,
		Namespace:            a.Namespace,
		Lane:                 a.Lane,
		Priority:             int64(a.Priority),
		Payload:              a.Payload,
		RequiredCapabilities: caps,
		MaxAttempts:          int64(max(a.MaxAttempts, 1)),
		CreatedAtMs:          s.now(a.Now).UnixMilli(),
	}
	err = s.write(ctx, func(ctx context.Context, q engine.Queries) error {
		return q.ExecutionInsert(ctx, row)
	})
	if err != nil {
		return uuid.Nil, err
	}
	return id, nil
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

// ClaimExecution gives a live worker the best waiting execution of its
// namespace (highest priority, then oldest) whose lane is one of the worker's
// lanes and whose required capabilities are all among the worker's, under a
// new lease: a new attempt, a new epoch and a new lease id. A worker that is
// not alive is ErrNotRegistered; nothing to claim is ErrNoWork.
func (s *Store) ClaimExecution(ctx context.Context, a ClaimArgs) (Lease, error) {
	if err := s.check(); err != nil {
		return Lease{}, err
	}
	if err := validWorkerKey(a.Namespace, a.InstanceID); err != nil {
		return Lease{}, err
	}
	if err := validTTL("LeaseTTL", a.LeaseTTL); err != nil {
		return Lease{}, err
	}
	leaseID, err := uuid.NewV7()
	if err != nil {
		return Lease{}, fmt.Errorf("roster: new lease id: %w", err)
	}
	now := s.now(a.Now).UnixMilli()
	key := engine.WorkerKey{Namespace: a.Namespace, InstanceID: a.InstanceID}
	var lease Lease
	err = s.writeOne(ctx, func(ctx context.Context, q engine.Queries) error {
		claimed, err := q.ExecutionClaim(ctx, engine.ClaimParams{
			Namespace: a.Namespace, InstanceID: a.InstanceID,
			NowMs: now, ExpiresAtMs: now + a.LeaseTTL.Milliseconds(), LeaseIDs: []uuid.UUID{leaseID},
		})
		if errors.Is(err, engine.ErrNoRows) {
			return notRegistered(key)
		}
		if err != nil {
			return err
		}
		if len(claimed) == 0 {
			return fmt.Errorf("%w: nothing waiting in namespace %q for the lanes and capabilities of %q",
				ErrNoWork, a.Namespace, a.InstanceID)
		}
		lease = leaseFromRow(claimed[0], a.InstanceID)
		return nil
	})
	if err != nil {
		return Lease{}, err
	}
	return lease, nil
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
	now := s.now(a.Now).UnixMilli()
	expires := now + a.TTL.Milliseconds()
	err := s.writeOne(ctx, func(ctx context.Context, q engine.Queries) error {
		return leaseError(q.AttemptRenew(ctx, leaseRef(a.Lease), now, expires), a.Lease)
	})
	if err != nil {
		return time.Time{}, err
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
	now := s.now(a.Now).UnixMilli()
	return s.writeOne(ctx, func(ctx context.Context, q engine.Queries) error {
		return leaseError(q.LeaseComplete(ctx, leaseRef(a.Lease), now, a.Result), a.Lease)
	})
}

// FailExecution ends the current attempt as failed with a reason (free text,
// at most 4 KiB): the execution returns to waiting while attempts remain, else
// ends failed. A stale, expired or ended lease is ErrLeaseLost.
func (s *Store) FailExecution(ctx context.Context, a FailArgs) error {
	if err := s.check(); err != nil {
		return err
	}
	if len(a.Reason) > maxFailReasonBytes {
		return invalid("Reason", "%d bytes exceeds the limit of %d", len(a.Reason), maxFailReasonBytes)
	}
	if !utf8.ValidString(a.Reason) {
		return invalid("Reason", "not valid UTF-8")
	}
	if strings.IndexByte(a.Reason, 0) >= 0 {
		return invalid("Reason", "contains a NUL byte")
	}
	now := s.now(a.Now).UnixMilli()
	return s.writeOne(ctx, func(ctx context.Context, q engine.Queries) error {
		return leaseError(q.LeaseFail(ctx, leaseRef(a.Lease), now, a.Reason), a.Lease)
	})
}

func leaseRef(l Lease) engine.LeaseRef {
	return engine.LeaseRef{ExecutionID: l.ExecutionID, Epoch: l.Epoch}
}

// leaseError turns "no current lease matched" into ErrLeaseLost.
func leaseError(err error, l Lease) error {
	if errors.Is(err, engine.ErrNoRows) {
		return fmt.Errorf("%w: execution %s epoch %d is not the current, unexpired lease",
			ErrLeaseLost, l.ExecutionID, l.Epoch)
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
	p := engine.ExpiredLeaseListParams{
		Namespace: a.Namespace, AsOfMs: s.now(a.AsOf).UnixMilli(), AfterExpiresAtMs: math.MinInt64, Limit: limit + 1,
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
		rows, err = q.AttemptListExpired(ctx, p)
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
	nowMs := s.now(now).UnixMilli()
	total := 0
	for limit == 0 || total < limit {
		batch := sweepBatchSize
		if limit > 0 {
			batch = min(batch, limit-total)
		}
		var n int
		err := s.write(ctx, func(ctx context.Context, q engine.Queries) error {
			ids, err := q.AttemptReclaimBatch(ctx, nowMs, batch)
			if err != nil || len(ids) == 0 {
				return err
			}
			n = len(ids)
			return q.ExecutionRequeueReclaimed(ctx, ids)
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
		s.log.Info("roster: reclaimed expired leases", "count", total)
	}
	return total, nil
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
	}
}
