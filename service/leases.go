package service

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"
	"github.com/rosterdb/roster/internal/engine"
)

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
	Metadata                    map[string]string // the execution's (nil when none)
	// Bound: the lease is bound to its holder's registration (no expiry of
	// its own; ExpiresAt is the holder's expiry at the claim, and it moves
	// with every heartbeat). Deadline is the claim + the execution's
	// Timeout (zero: none): the lease is lost then, whatever else.
	Bound    bool
	Deadline time.Time
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

// RenewLease extends the current lease to Now + TTL and returns the new
// expiry. A stale, expired or ended lease is ErrLeaseLost.
func (s *Store) RenewLease(ctx context.Context, a RenewLeaseArgs) (time.Time, error) {
	if err := s.notClosed(); err != nil {
		return time.Time{}, err
	}
	if !a.Lease.Bound {
		if err := validTTL("TTL", a.TTL); err != nil {
			return time.Time{}, err
		}
	}
	if err := validTime("Now", a.Now); err != nil {
		return time.Time{}, err
	}
	return s.renewLease(ctx, a)
}

// renewLease is RenewLease for arguments known valid (the keeper's, whose
// LeaseTTL RunWorker checked once).
func (s *Store) renewLease(ctx context.Context, a RenewLeaseArgs) (time.Time, error) {
	now := s.now(a.Now).UnixMilli()
	if a.Lease.Bound {
		return s.boundExpiry(ctx, a.Lease, now)
	}
	expires := now + a.TTL.Milliseconds()
	err := s.writeOne(ctx, func(ctx context.Context, q engine.Queries) error {
		var err error
		expires, err = q.LeaseRenew(ctx, leaseRef(a.Lease), now, expires)
		return leaseError(err, a.Lease)
	})
	if err != nil {
		return time.Time{}, s.observeLease(err)
	}
	return msTime(expires), nil
}

// boundExpiry is RenewLease of a bound lease: it writes nothing and returns
// the holder's current expiry (never past the lease's deadline), or
// ErrLeaseLost when the holder is not alive or the lease ended.
func (s *Store) boundExpiry(ctx context.Context, l Lease, now int64) (time.Time, error) {
	var expires int64
	err := s.read(ctx, func(ctx context.Context, q engine.Queries) error {
		var err error
		expires, err = q.LeaseHolderExpiry(ctx, leaseRef(l), now)
		return leaseError(err, l)
	})
	if err != nil {
		return time.Time{}, s.observeLease(err)
	}
	return msTime(expires), nil
}

// CompleteExecution ends the execution of the current lease as completed with
// its result. A stale, expired or ended lease is ErrLeaseLost.
func (s *Store) CompleteExecution(ctx context.Context, a CompleteArgs) error {
	if err := s.notClosed(); err != nil {
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
// increased (the released lease is fenced). The attempt is kept in the
// history (ListAttempts) as released. A stale, expired or ended lease is
// ErrLeaseLost.
func (s *Store) ReleaseLease(ctx context.Context, a ReleaseArgs) error {
	if err := s.notClosed(); err != nil {
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
	if err := s.notClosed(); err != nil {
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
