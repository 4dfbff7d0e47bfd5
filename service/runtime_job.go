package service

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"
)

// A job is one claimed execution being handled: the handler runs in a
// goroutine of its own, and a keeper renews the lease until the outcome is
// written or dropped. The keeper ends the handler's context when the
// database says the lease is lost, and at the lease's expiry by the Store's
// clock when no renewal succeeded in time (the database away), so that a
// handler never runs while another worker may hold its execution.
type job struct {
	k      *keeper
	lease  Lease
	ctx    context.Context
	cancel context.CancelCauseFunc

	settled    chan struct{} // closed once the outcome was written or dropped
	settleOnce sync.Once

	mu        sync.Mutex
	keepTimer *time.Timer // starts the keeper (see startKeeper)
	expires   time.Time   // by the Store's clock: the last renewal that succeeded
	lost      bool        // the database said the lease is lost, or it expired: the outcome is dropped
	// unproved: a bound lease's holder's expiry, as the worker's last
	// heartbeat proved it, passed: the handler was stopped, but only the
	// database knows whether the lease ended (a heartbeat on its way may
	// have kept the registration), so the outcome is written under the
	// fence, or the lease given back, rather than dropped.
	unproved bool
}

// leaseRenewer is what a job's keeper needs from the Store.
type leaseRenewer interface {
	renewLease(ctx context.Context, a RenewLeaseArgs) (time.Time, error)
}

var _ leaseRenewer = (*Store)(nil)

// keeper is what the keepers of one runner's jobs share: how to renew, by
// which clock, and whom to tell.
type keeper struct {
	renewer  leaseRenewer
	now      func() time.Time // the Store's clock: leases expire by it
	leaseTTL time.Duration    // each renewal extends the lease to now + leaseTTL
	// holder, set for bound leases (nothing to renew), is the worker's
	// registration's expiry as its last heartbeat proved it: every bound
	// lease's expiry before its deadline.
	holder   func() time.Time
	tick     time.Duration // the longest the keeper sleeps between looks at the clock
	answered func()        // a renewal succeeded: the database answers
	log      runLog
	quit     <-chan struct{} // closed at the very end of RunWorker: keepers stop
}

// keeperTick bounds the keeper's sleep, so that a jump of the Store's clock
// past the lease's expiry is noticed within it.
const keeperTick = time.Second

// errLeaseExpired ends a handler's context at the lease's expiry.
var errLeaseExpired = errors.New("roster: lease expired before it could be renewed")

// errRunTimedOut ends a handler's context at its lease's Deadline (the
// execution's Timeout).
var errRunTimedOut = errors.New("roster: the run reached its timeout")

// pastDeadline reports whether now is at or past the lease's Deadline.
func (j *job) pastDeadline(now time.Time) bool {
	return !j.lease.Deadline.IsZero() && !now.Before(j.lease.Deadline)
}

// newJob returns the job of a lease whose claim committed; its handler's
// context is live until the job is settled or its lease lost.
func (k *keeper) newJob(l Lease) *job {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &job{k: k, lease: l, ctx: ctx, cancel: cancel, settled: make(chan struct{}), expires: l.ExpiresAt}
}

// launch starts a lease's handler and its keeper, unless shutdown began: then
// it reports false, and the lease and its slot are the caller's to give back.
func (w *runner) launch(l Lease) bool {
	j := w.keeper.newJob(l)
	started := w.slots.admit(func() {
		// Under the slots' lock: shutdown's stop comes wholly before this
		// (nothing starts) or after it (and waits for this handler).
		w.jobsMu.Lock()
		w.jobs[j] = struct{}{}
		w.jobsMu.Unlock()
		w.handlers.Add(1)
	})
	if !started {
		j.cancel(context.Canceled)
		return false
	}
	j.startKeeper()
	go w.runJob(j)
	return true
}

// start runs the handler of a lease whose claim committed, unless shutdown
// began (ctx ended, even while the claim was in flight): then the lease is
// released, so that its execution waits again at once without using up an
// attempt.
func (w *runner) start(l Lease) { w.claims.handOff([]Lease{l}) }

// runJob calls the handler and hands the outcome to the settler, which frees
// the handler's slot as it writes the outcome (claiming for it in the same
// write); an outcome dropped because the lease is known lost frees it here.
func (w *runner) runJob(j *job) {
	defer w.handlers.Done()
	began := time.Now()
	result, herr := w.call(j.ctx, j.lease)
	if o, ok := w.s.cfg.observer.(TimingObserver); ok {
		o.Ran(j.lease.Namespace, j.lease.Lane, time.Since(began))
	}
	if sn, ok := asSnooze(herr); ok {
		sn.until = w.s.now(time.Time{}).Add(sn.d) // d from now, by the Store's clock
	}
	lost := j.isLost()
	w.jobsMu.Lock()
	delete(w.jobs, j)
	w.jobsMu.Unlock()
	if !lost && herr != nil && j.isUnproved() {
		// Stopped at its holder's expiry as last proved: the error is the
		// stop's, not the handler's verdict. The lease is given back if it
		// still holds (no attempt is used up), and dropped if it ended.
		w.giveBack(j)
		return
	}
	if lost {
		w.slots.unreserve(1)
		w.log.Warn("roster: worker: the lease was lost or expired; the handler's outcome is dropped", "execution", j.lease.ExecutionID, "handler_err", herr)
		j.settle()
		w.claims.kick()
		return
	}
	w.settler.add(j, result, herr)
}

// giveBack releases the lease of a handler stopped at its holder's expiry
// as last proved, retrying transient failures until the database answers,
// the lease is found lost, or RunWorker ends; then it frees the slot.
func (w *runner) giveBack(j *job) {
	defer func() {
		j.settle()
		w.slots.unreserve(1)
		w.claims.kick()
	}()
	var b backoff
	for {
		err := w.s.ReleaseLease(context.Background(), ReleaseArgs{Lease: j.lease})
		switch {
		case err == nil:
			w.log.Info("roster: worker: the registration held after all; the stopped handler's lease was given back", "execution", j.lease.ExecutionID)
			return
		case errors.Is(err, ErrLeaseLost), errors.Is(err, ErrClosed):
			return
		case !transient(err):
			w.log.Warn("roster: worker: giving back a stopped handler's lease failed", "execution", j.lease.ExecutionID, "err", err)
			return
		}
		t := time.NewTimer(b.next())
		select {
		case <-w.quit:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// call runs the handler, turning a panic into an error.
func (w *runner) call(ctx context.Context, l Lease) (result []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			w.log.Warn("roster: worker: handler panicked", "execution", l.ExecutionID, "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	if len(w.s.cfg.middleware) == 0 {
		return w.a.Handler(ctx, l)
	}
	return w.s.runMiddleware(ctx, l, w.a.Handler)
}

// settle records that the outcome was written or dropped: the keeper stops
// and the handler's context is released.
func (j *job) settle() {
	j.settleOnce.Do(func() {
		close(j.settled)
		j.cancel(context.Canceled)
		j.mu.Lock()
		if j.keepTimer != nil {
			j.keepTimer.Stop() // the keeper had not started: it need not
		}
		j.mu.Unlock()
	})
}

// isSettled reports whether the outcome was written or dropped.
func (j *job) isSettled() bool {
	select {
	case <-j.settled:
		return true
	default:
		return false
	}
}

// isLost reports whether the lease was found lost or expired: the outcome
// is dropped.
func (j *job) isLost() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.lost
}

// lose records that the lease is lost (cause ErrLeaseLost: the database
// said so) or expired (errLeaseExpired), and ends the handler's context with
// that cause.
func (j *job) lose(cause error) {
	j.mu.Lock()
	j.lost = true
	j.mu.Unlock()
	j.cancel(cause)
}

// stopUnproved records that a bound lease's holder's expiry passed with no
// heartbeat proving it renewed, and ends the handler's context with cause
// (errLeaseExpired): the lease may have ended with the registration.
func (j *job) stopUnproved(cause error) {
	j.mu.Lock()
	j.unproved = true
	j.mu.Unlock()
	j.cancel(cause)
}

// isUnproved reports whether the handler was stopped at its holder's expiry
// as last proved (see stopUnproved), the lease not known lost.
func (j *job) isUnproved() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.unproved && !j.lost
}

// expiry is the lease's expiry by the Store's clock, as the last renewal
// that succeeded set it; a bound lease's is its holder's (the last
// heartbeat's), never past its deadline.
func (j *job) expiry() time.Time {
	if j.k.holder != nil {
		expires := j.k.holder()
		if d := j.lease.Deadline; !d.IsZero() && d.Before(expires) {
			expires = d
		}
		return expires
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.expires
}

// startKeeper starts the job's keeper at its first look: until then (the
// first renewal, the expiry or the keeper's tick, whichever comes first) it
// has nothing to do, so a timer waits in its place, and a job that ends
// sooner costs no goroutine of its own (at 64 handlers of short jobs, a
// keeper's goroutine per job was as many goroutines to schedule as the
// handlers themselves).
func (j *job) startKeeper() {
	k := j.k
	now := k.now()
	nextRenew := now.Add(k.every())
	first := max(min(j.expiry().Sub(now), k.tick), 0)
	if k.holder == nil {
		first = min(first, k.every())
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.keepTimer = time.AfterFunc(first, func() {
		select {
		case <-k.quit:
		default:
			j.keep(nextRenew)
		}
	})
}

// every is how often a keeper renews: about LeaseTTL/3.
func (k *keeper) every() time.Duration { return max(k.leaseTTL/3, time.Millisecond) }

// keep renews the lease every k.every(), the first time at nextRenew, until
// the outcome is settled. Renewals run apart (a renewal the database does
// not answer must not hold the keeper): the lease's expiry by the Store's
// clock ends the handler's context at its time whatever the database says,
// or cannot say. A renewal that fails for a transient reason is tried again
// sooner.
func (j *job) keep(nextRenew time.Time) {
	if j.k.holder != nil {
		j.watch()
		return
	}
	k := j.k
	every := k.every()
	renewed := make(chan renewal, 1)
	renewing := false
	var b backoff
	for {
		if j.isSettled() {
			return
		}
		now := k.now()
		expires := j.expiry()
		if !now.Before(expires) && j.pastDeadline(now) {
			k.log.Info("roster: worker: the run reached its timeout; cancelling its handler", "execution", j.lease.ExecutionID, "deadline", j.lease.Deadline)
			j.lose(errRunTimedOut)
			return
		}
		if !now.Before(expires) {
			// By the Store's clock the lease is over: another worker may
			// reclaim the execution. Its outcome is dropped, even if a
			// renewal still on its way extends the lease in the database.
			k.log.Warn("roster: worker: the lease expired before it could be renewed; cancelling its handler",
				"execution", j.lease.ExecutionID, "expired_at", expires)
			j.lose(errLeaseExpired)
			return
		}
		if !renewing && !now.Before(nextRenew) {
			renewing = true
			go func() {
				// Bounded by the expiry: past it, the answer no longer matters.
				ctx, cancel := context.WithTimeout(context.Background(), expires.Sub(now))
				defer cancel()
				until, err := k.renewer.renewLease(ctx, RenewLeaseArgs{Lease: j.lease, TTL: k.leaseTTL, Now: now})
				renewed <- renewal{at: now, until: until, err: err}
			}()
		}
		wait := min(expires.Sub(now), k.tick)
		if !renewing {
			wait = min(wait, nextRenew.Sub(now))
		}
		t := time.NewTimer(wait)
		select {
		case <-j.settled:
		case <-k.quit:
			t.Stop()
			return
		case r := <-renewed:
			renewing = false
			switch {
			case r.err == nil:
				j.mu.Lock()
				j.expires = r.until
				j.mu.Unlock()
				b.reset()
				k.answered()
				nextRenew = r.at.Add(every)
			case j.isSettled():
				// The outcome was written meanwhile.
			case errors.Is(r.err, ErrLeaseLost):
				k.log.Info("roster: worker: lease lost; cancelling its handler", "execution", j.lease.ExecutionID)
				j.lose(ErrLeaseLost)
				t.Stop()
				return
			case errors.Is(r.err, ErrClosed):
				j.cancel(ErrClosed)
				t.Stop()
				return
			default:
				// A renewal cut by its own bound (the lease's expiry by the
				// wall clock) is no failure of the database's: the expiry
				// says so, at the loop's top, by the Store's clock.
				if !errors.Is(r.err, context.DeadlineExceeded) {
					k.log.warn("roster: worker: renewing a lease failed; will retry", "execution", j.lease.ExecutionID, "err", r.err)
				}
				nextRenew = k.now().Add(min(every, b.next()))
			}
		case <-t.C:
		}
		t.Stop()
	}
}

// watch is keep for a bound lease: there is nothing to renew (the worker's
// heartbeats keep it); it ends the handler's context at the lease's expiry
// by the Store's clock (the registration's, as the last heartbeat that
// succeeded proved it, or the deadline), so that a worker cut off from the
// database stops its handlers before its leases can be reclaimed.
func (j *job) watch() {
	k := j.k
	for {
		if j.isSettled() {
			return
		}
		now := k.now()
		expires := j.expiry()
		if !now.Before(expires) && j.pastDeadline(now) {
			k.log.Info("roster: worker: the run reached its timeout; cancelling its handler", "execution", j.lease.ExecutionID, "deadline", j.lease.Deadline)
			j.lose(errRunTimedOut)
			return
		}
		if !now.Before(expires) {
			// By the Store's clock the registration may have lapsed, and
			// the lease with it: the handler stops. A heartbeat still on
			// its way may have kept it, though, and a bound lease has no
			// expiry of its own to end it later: its outcome is written
			// under the fence (which checks the holder), or the lease
			// given back, not dropped, lest it stay held by a live worker
			// that runs nothing for it.
			k.log.Warn("roster: worker: the registration holding the lease expired; cancelling its handler",
				"execution", j.lease.ExecutionID, "expired_at", expires)
			j.stopUnproved(errLeaseExpired)
			return
		}
		t := time.NewTimer(min(expires.Sub(now), k.tick))
		select {
		case <-j.settled:
		case <-k.quit:
			t.Stop()
			return
		case <-t.C:
		}
		t.Stop()
	}
}

// renewal is the answer to one renewal of a lease.
type renewal struct {
	at, until time.Time
	err       error
}
