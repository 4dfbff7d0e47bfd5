package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rosterdb/roster/internal/engine"
)

// maxSnooze bounds how far ahead a snooze may put an execution.
const maxSnooze = 30 * 24 * time.Hour

// SnoozeArgs are the arguments of SnoozeLease.
type SnoozeArgs struct {
	Lease Lease
	Until time.Time // when the execution is claimable again; zero: now; at most 30 days ahead
	Now   time.Time
}

// SnoozeLease ends a lease without using up an attempt, as ReleaseLease
// does (Attempts back to what it was before the claim, the epoch still
// increased, the snoozed lease fenced), and the execution waits until Until
// (its RunAt; zero: now; more than 30 days after Now is ErrInvalidInput).
// The attempt is kept in the history as snoozed. A stale, expired or ended
// lease is ErrLeaseLost.
func (s *Store) SnoozeLease(ctx context.Context, a SnoozeArgs) error {
	if err := s.notClosed(); err != nil {
		return err
	}
	now, err := s.at("Now", a.Now)
	if err != nil {
		return err
	}
	if err := validTime("Until", a.Until); err != nil {
		return err
	}
	until := now
	if !a.Until.IsZero() {
		until = a.Until.UnixMilli()
	}
	if until-now > maxSnooze.Milliseconds() {
		return invalid("Until", "%v is more than 30 days after now", a.Until)
	}
	err = s.writeOne(ctx, func(ctx context.Context, q engine.Queries) error {
		return leaseError(q.LeaseSnooze(ctx, leaseRef(a.Lease), now, until), a.Lease)
	})
	if err != nil {
		return s.observeLease(err)
	}
	s.work.signal() // claimable now, or a new earliest RunAt to wait for
	return nil
}

// snoozeError is what Snooze returns: a handler returning it (or an error
// wrapping it) snoozes its execution for d.
type snoozeError struct {
	d     time.Duration
	until time.Time // set by the runtime when the handler returned
}

func (e *snoozeError) Error() string { return fmt.Sprintf("roster: snooze for %v", e.d) }

// SnoozeFor says how long the run asked to be snoozed for: a Run middleware
// tells a snooze from a failure with errors.As on an interface of this
// method.
func (e *snoozeError) SnoozeFor() time.Duration { return e.d }

// Snooze returns the error a Handler run by RunWorker returns to snooze its
// execution for d (0 < d <= 30 days): the lease ends as SnoozeLease ends it,
// no attempt used up, and the execution waits until d after the handler
// returned. Snooze of any other d returns an error that, returned by a
// handler, fails the run with its text.
func Snooze(d time.Duration) error {
	if d <= 0 || d > maxSnooze {
		return fmt.Errorf("roster: Snooze(%v): the duration must be above 0 and at most 30 days", d)
	}
	return &snoozeError{d: d}
}

// asSnooze returns the snooze a handler's error asks for, if any.
func asSnooze(err error) (*snoozeError, bool) {
	var sn *snoozeError
	if err == nil || !errors.As(err, &sn) {
		return nil, false
	}
	return sn, true
}
