package service

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/rosterdb/roster/internal/engine"
)

// The claimer: it claims while handler slots are free and work may be
// claimable (want), and otherwise waits for a reason to look again. A claim
// that comes up short clears want, so an idle worker never claims in a loop:
// only a wake-up sets it again (new work signalled by this Store, a change
// heard from the engine, the earliest RunAt of scheduled work, the poll, or
// a registration restored).

func (w *runner) claimArgs() ClaimArgs {
	return ClaimArgs{Namespace: w.a.Namespace, InstanceID: w.a.InstanceID, LeaseTTL: w.leaseTTL}
}

// claimLoop runs until ctx ends (nil) or the Store closes (ErrClosed).
func (w *runner) claimLoop(ctx context.Context) error {
	var b backoff
	for ctx.Err() == nil {
		w.releaseOrphans()
		signal := w.s.work.wait() // taken before the claim: no signal is missed
		if n, gen := w.slots.reserve(); n > 0 {
			p, err := w.s.claimParams(w.claimArgs(), n)
			if err != nil {
				w.slots.unreserve(n)
				return err // only ErrClosed: the arguments were validated
			}
			leases, next, err := w.s.claimWith(context.WithoutCancel(ctx), p)
			w.startAll(leases)
			w.slots.unreserve(n - len(leases))
			switch {
			case err == nil && len(leases) == n:
				b.reset()
				w.setClaimFailing(false)
				continue // there may be more
			case err == nil:
				b.reset()
				w.setClaimFailing(false)
				if !w.slots.noMoreWork(gen, next) {
					continue
				}
			case errors.Is(err, ErrClosed):
				return err
			case errors.Is(err, ErrNotRegistered):
				w.lapsed()
			default:
				w.failedClaim(p, err)
				w.retryWait(ctx, b.next())
				continue
			}
		}
		w.idle(ctx, signal)
	}
	return nil
}

// idle waits for a reason to claim: a signal of this Store, a change heard
// from the engine, a kick (a registration restored, a slot freed, a claim to
// retry), the earliest RunAt it knows of, or the poll. Its subscription is
// armed only while no work is known and a slot is free: while busy, changes
// could not be claimed anyway, and watching every commit would cost the
// worker its speed (a PostgreSQL notification that comes meanwhile stays
// pending; SQLite's check looks at once, when armed, for changes it missed).
func (w *runner) idle(ctx context.Context, signal <-chan struct{}) {
	wait := jitter(w.s.cfg.workerPoll)
	listen, next := w.slots.whenIdle()
	if listen {
		w.sub.Arm()
		defer w.sub.Disarm()
		// The RunAt the last short claim saw matters only while the worker
		// waits for work: busy, it would wake the worker for nothing.
		if !next.IsZero() {
			if d := next.Sub(w.s.now(time.Time{})); d < wait {
				wait = max(d, time.Millisecond)
			}
		}
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-signal:
		w.slots.wakeUp()
	case <-w.sub.C():
		w.slots.wakeUp()
	case <-w.kick:
	case <-t.C:
		w.slots.wakeUp()
	}
}

// retryWait waits d after a failed claim, cut short as soon as the database
// is heard to answer again: its listening connection re-established or a
// change heard from it (the subscription, armed meanwhile), or a kick (a
// heartbeat, a renewal or a settle that succeeded, a registration
// restored). It waits at least retryFloor(d) whatever it hears: a database
// that answers writes yet fails claims (overloaded, say) while work keeps
// coming must not be asked to claim at every change. This Store's signal
// (work created here) does not cut it short: it tells of work, which the
// failed claim knew, not of a database answering. A claim that fails again
// waits longer.
func (w *runner) retryWait(ctx context.Context, d time.Duration) {
	w.setClaimFailing(true)
	floor := retryFloor(d)
	if !sleep(ctx, floor) {
		return
	}
	w.sub.Arm()
	defer w.sub.Disarm()
	t := time.NewTimer(d - floor)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-w.sub.C():
	case <-w.kick:
	case <-t.C:
	}
}

// retryFloor is the least wait after a failed claim whose backoff is d:
// half of it, at most a quarter of a second.
func retryFloor(d time.Duration) time.Duration { return min(d/2, 250*time.Millisecond) }

// setClaimFailing records whether the last claim failed (the claimer waits
// to try again).
func (w *runner) setClaimFailing(v bool) {
	w.stateMu.Lock()
	w.claimFailing = v
	w.stateMu.Unlock()
}

// answered records that the database answered a write of this worker (a
// heartbeat, a renewal, a settle): a claimer waiting to retry a failed claim
// tries again at once.
func (w *runner) answered() {
	w.stateMu.Lock()
	failing := w.claimFailing
	w.stateMu.Unlock()
	if failing {
		w.signalClaimer()
	}
}

// signalClaimer wakes the claimer.
func (w *runner) signalClaimer() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// lapsed stops claims until the heart has registered again.
func (w *runner) lapsed() {
	w.slots.setRegistered(false)
	select {
	case w.relapse <- struct{}{}:
	default:
	}
}

// setRegistered records the registration; a restored one wakes the claimer.
func (w *runner) setRegistered(v bool) {
	if w.slots.setRegistered(v) {
		w.signalClaimer()
	}
}

// failedClaim logs a claim that failed (rate-limited) and, when its outcome
// is unknown (the connection broke), remembers its lease ids: the claim may
// have committed, and a lease nobody runs would use up an attempt when it
// expires. releaseOrphans releases them once the database answers.
func (w *runner) failedClaim(p engine.ClaimParams, err error) {
	w.warn("roster: worker: claiming failed; will retry", "err", err)
	if !errors.Is(err, ErrUnavailable) {
		return
	}
	w.stateMu.Lock()
	w.orphans = append(w.orphans, orphanClaim{ids: p.LeaseIDs, expiresAt: msTime(p.ExpiresAtMs)})
	if len(w.orphans) > maxOrphanClaims {
		// A long outage: most of these never reached the database. The
		// oldest go unchecked; if they did commit, they expire.
		w.orphans = w.orphans[len(w.orphans)-maxOrphanClaims:]
	}
	w.stateMu.Unlock()
}

// maxOrphanClaims bounds the claims of unknown outcome kept to look up.
const maxOrphanClaims = 16

// orphanClaim is a claim whose outcome was unknown.
type orphanClaim struct {
	ids       []uuid.UUID
	expiresAt time.Time // no lease of it outlives this
}

// releaseOrphans looks up the leases of claims whose outcome was unknown and
// releases those that committed. What the database cannot answer yet is kept
// for the next round, until the leases would have expired anyway.
func (w *runner) releaseOrphans() {
	w.stateMu.Lock()
	orphans := w.orphans
	w.orphans = nil
	w.stateMu.Unlock()
	var keep []orphanClaim
	for i, o := range orphans {
		if !w.s.now(time.Time{}).Before(o.expiresAt) {
			continue
		}
		err := w.s.releaseUnknownClaim(engine.WorkerKey{Namespace: w.a.Namespace, InstanceID: w.a.InstanceID}, o.ids)
		if transient(err) {
			// The database does not answer yet: look again next time.
			keep = append(keep, orphans[i:]...)
			break
		}
		if err != nil {
			w.warn("roster: worker: releasing the leases of a claim whose outcome was unknown failed", "err", err)
		}
	}
	if len(keep) > 0 {
		w.stateMu.Lock()
		w.orphans = append(w.orphans, keep...)
		w.stateMu.Unlock()
	}
}

// releaseUnknownClaim releases those of leaseIDs (the leases of a claim
// whose outcome was unknown) that the claim did commit, if they still run.
func (s *Store) releaseUnknownClaim(k engine.WorkerKey, leaseIDs []uuid.UUID) error {
	var held []engine.LeaseRef
	err := s.read(context.Background(), func(ctx context.Context, q engine.Queries) error {
		var err error
		held, err = q.LeaseFindHeld(ctx, k, leaseIDs)
		return err
	})
	if err != nil {
		return err
	}
	for _, ref := range held {
		err := s.ReleaseLease(context.Background(), ReleaseArgs{Lease: Lease{ExecutionID: ref.ExecutionID, LeaseID: ref.LeaseID, Epoch: ref.Epoch}})
		if err != nil && !errors.Is(err, ErrLeaseLost) {
			return err
		}
	}
	return nil
}
