package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/rosterdb/roster/internal/engine"
)

// maxClaimBatch bounds ClaimExecutions.
const maxClaimBatch = 1000

// ClaimArgs are the arguments of ClaimExecution.
type ClaimArgs struct {
	Namespace, InstanceID string
	LeaseTTL              time.Duration
	// Bound asks for leases bound to the worker's registration: they have
	// no expiry of their own and hold exactly while the worker is alive
	// (its heartbeats keep them; nothing is written per lease). LeaseTTL
	// must then be 0.
	Bound bool
	Now   time.Time
}

// ClaimExecution gives a live worker the best claimable execution of its
// namespace (waiting and RunAt <= now; highest priority, then earliest RunAt,
// then lowest id) whose lane is one of the worker's lanes and whose required
// capabilities are all among the worker's, under a new lease: a new attempt,
// a new epoch and a new lease id. A worker that is not alive is
// ErrNotRegistered; nothing to claim is ErrNoWork.
func (s *Store) ClaimExecution(ctx context.Context, a ClaimArgs) (Lease, error) {
	leases, err := s.ClaimExecutions(ctx, a, 1)
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
	p, err := s.claimParams(a, max)
	if err != nil {
		return nil, err
	}
	leases, _, err := s.executionClaim(ctx, p)
	if err != nil {
		return nil, err
	}
	if len(leases) == 0 {
		return nil, fmt.Errorf("%w: nothing claimable in namespace %q for the lanes and capabilities of %q",
			ErrNoWork, a.Namespace, a.InstanceID)
	}
	return leases, nil
}

// claimParams checks a claim's arguments (the Store open, the worker's key,
// LeaseTTL, Now, and n as ClaimExecutions' max) and makes the claim of n
// (newClaim).
func (s *Store) claimParams(a ClaimArgs, n int) (engine.ClaimParams, error) {
	if err := s.notClosed(); err != nil {
		return engine.ClaimParams{}, err
	}
	if n < 1 || n > maxClaimBatch {
		return engine.ClaimParams{}, invalid("max", "%d is outside 1..%d", n, maxClaimBatch)
	}
	if err := validWorkerKey(a.Namespace, a.InstanceID); err != nil {
		return engine.ClaimParams{}, err
	}
	switch {
	case a.Bound && a.LeaseTTL != 0:
		return engine.ClaimParams{}, invalid("LeaseTTL", "%v with Bound: a bound lease has no TTL of its own (give 0)", a.LeaseTTL)
	case !a.Bound:
		if err := validTTL("LeaseTTL", a.LeaseTTL); err != nil {
			return engine.ClaimParams{}, err
		}
	}
	if err := validTime("Now", a.Now); err != nil {
		return engine.ClaimParams{}, err
	}
	return s.newClaim(a, n)
}

// newClaim makes the claim of n executions for a, whose arguments are
// valid (RunWorker checks its own once), at a.Now (zero: the Store's
// clock), each lease with a fresh id.
func (s *Store) newClaim(a ClaimArgs, n int) (engine.ClaimParams, error) {
	now := s.now(a.Now).UnixMilli()
	p := engine.ClaimParams{
		Namespace: a.Namespace, InstanceID: a.InstanceID,
		NowMs: now, ExpiresAtMs: now + a.LeaseTTL.Milliseconds(), Bound: a.Bound, LeaseIDs: make([]uuid.UUID, n),
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

// executionClaim runs a claim (the engine's ExecutionClaim): the leases it
// took (none is not an error here) and, when it took fewer than asked, the
// earliest RunAt of the worker's scheduled work (zero: none). A claim that
// finds nothing writes nothing.
func (s *Store) executionClaim(ctx context.Context, p engine.ClaimParams) ([]Lease, time.Time, error) {
	res, err := s.eng.ExecutionClaim(ctx, p)
	return s.claimResult(res, err, p)
}

// claimResult is what a claim (its own, or the one of a settle) means to the
// caller: the leases it took, told to the Observer, and the next RunAt; or
// its error, ErrNoRows meaning the worker is not alive.
func (s *Store) claimResult(res engine.ClaimResult, err error, p engine.ClaimParams) ([]Lease, time.Time, error) {
	if errors.Is(err, engine.ErrNoRows) {
		err = notRegistered(engine.WorkerKey{Namespace: p.Namespace, InstanceID: p.InstanceID})
	}
	if err != nil {
		return nil, time.Time{}, s.fromWrite(err)
	}
	leases := make([]Lease, len(res.Leases))
	for i, c := range res.Leases {
		leases[i] = leaseFromRow(c, p.InstanceID, p.Bound)
	}
	if len(leases) > 0 {
		s.noteClaimed(leases)
		if o, ok := s.cfg.observer.(TimingObserver); ok {
			for _, c := range res.Leases {
				o.Waited(c.Namespace, c.Lane, time.Duration(max(p.NowMs-c.RunAtMs, 0))*time.Millisecond)
			}
		}
	}
	if res.Held > 0 {
		s.held.Store(true)
		if o, ok := s.cfg.observer.(FlowObserver); ok {
			o.ClaimHeld(p.Namespace, res.Held)
		}
	}
	var next time.Time
	if res.NextRunAtMs != 0 {
		next = msTime(res.NextRunAtMs)
	}
	return leases, next, nil
}

func leaseFromRow(r engine.ClaimedLease, instanceID string, bound bool) Lease {
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
		Bound:        bound,
		Deadline:     optionalTime(r.DeadlineMs),
		Metadata:     decodeMetadata(r.Metadata),
	}
}
