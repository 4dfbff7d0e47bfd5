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
	w      *runner
	lease  Lease
	ctx    context.Context
	cancel context.CancelCauseFunc

	settled    chan struct{} // closed once the outcome was written or dropped
	settleOnce sync.Once

	mu      sync.Mutex
	expires time.Time // by the Store's clock: the last renewal that succeeded
	lost    bool      // the database said the lease is lost, or it expired: the outcome is dropped
}

// keeperTick bounds the keeper's sleep, so that a jump of the Store's clock
// past the lease's expiry is noticed within it.
const keeperTick = time.Second

// errLeaseExpired ends a handler's context at the lease's expiry.
var errLeaseExpired = errors.New("roster: lease expired before it could be renewed")

// startAll starts a handler for each lease.
func (w *runner) startAll(leases []Lease) {
	for _, l := range leases {
		w.start(l)
	}
}

// start runs the handler of a lease whose claim committed, unless shutdown
// began (ctx ended, even while the claim was in flight): then the lease is
// released, so that its execution waits again at once without using up an
// attempt.
func (w *runner) start(l Lease) {
	ctx, cancel := context.WithCancelCause(context.Background())
	j := &job{w: w, lease: l, ctx: ctx, cancel: cancel, settled: make(chan struct{}), expires: l.ExpiresAt}
	started := !isDone(w.ctxDone) && w.slots.admit(func() {
		// Under the slots' lock: shutdown's stop comes wholly before this
		// (and the lease is released) or after it (and waits for it).
		w.stateMu.Lock()
		w.jobs[j] = struct{}{}
		w.stateMu.Unlock()
		w.handlers.Add(1)
	})
	if !started {
		cancel(nil)
		w.slots.unreserve(1)
		w.release(l)
		return
	}
	go j.keep()
	go j.run()
}

// isDone reports whether a done channel is closed.
func isDone(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// release gives back a lease claimed but never started, retrying transient
// failures until the lease would have expired or shutdownGrace passed.
func (w *runner) release(l Lease) {
	deadline := time.Now().Add(shutdownGrace)
	var b backoff
	for {
		err := w.s.ReleaseLease(context.Background(), ReleaseArgs{Lease: l})
		switch {
		case err == nil, errors.Is(err, ErrLeaseLost), errors.Is(err, ErrClosed):
			return
		case !transient(err) || time.Now().After(deadline) || !w.s.now(time.Time{}).Before(l.ExpiresAt):
			w.warn("roster: worker: releasing an unstarted lease failed; it will expire and be reclaimed", "execution", l.ExecutionID, "err", err)
			return
		}
		time.Sleep(b.next())
	}
}

// run calls the handler and hands the outcome to the settler, which frees
// the handler's slot as it writes the outcome (claiming for it in the same
// write); an outcome dropped because the lease is known lost frees it here.
func (j *job) run() {
	w := j.w
	defer w.handlers.Done()
	result, herr := w.call(j.ctx, j.lease)
	lost := j.isLost()
	w.stateMu.Lock()
	delete(w.jobs, j)
	w.stateMu.Unlock()
	if lost {
		w.slots.unreserve(1)
		w.log.Warn("roster: worker: the lease was lost or expired; the handler's outcome is dropped", "execution", j.lease.ExecutionID, "handler_err", herr)
		j.settle()
		w.signalClaimer()
		return
	}
	w.settler.add(j, result, herr)
}

// call runs the handler, turning a panic into an error.
func (w *runner) call(ctx context.Context, l Lease) (result []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			w.log.Warn("roster: worker: handler panicked", "execution", l.ExecutionID, "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return w.a.Handler(ctx, l)
}

// settle records that the outcome was written or dropped: the keeper stops
// and the handler's context is released.
func (j *job) settle() {
	j.settleOnce.Do(func() {
		close(j.settled)
		j.cancel(context.Canceled)
	})
}

func (j *job) isSettled() bool {
	select {
	case <-j.settled:
		return true
	default:
		return false
	}
}

func (j *job) isLost() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.lost
}

// lose records that the database found the lease lost, and ends the
// handler's context.
func (j *job) lose() {
	j.mu.Lock()
	j.lost = true
	j.mu.Unlock()
	j.cancel(ErrLeaseLost)
}

func (j *job) expiry() time.Time {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.expires
}

// keep renews the lease at about LeaseTTL/3 until the outcome is settled.
// Renewals run apart (a renewal the database does not answer must not hold
// the keeper): the lease's expiry by the Store's clock ends the handler's
// context at its time whatever the database says, or cannot say. A renewal
// that fails for a transient reason is tried again sooner.
func (j *job) keep() {
	w := j.w
	s := w.s
	every := max(w.leaseTTL/3, time.Millisecond)
	nextRenew := s.now(time.Time{}).Add(every)
	renewed := make(chan renewal, 1)
	renewing := false
	var b backoff
	for {
		if j.isSettled() {
			return
		}
		now := s.now(time.Time{})
		expires := j.expiry()
		if !now.Before(expires) {
			// By the Store's clock the lease is over: another worker may
			// reclaim the execution. Its outcome is dropped, even if a
			// renewal still on its way extends the lease in the database.
			w.log.Warn("roster: worker: the lease expired before it could be renewed; cancelling its handler",
				"execution", j.lease.ExecutionID, "expired_at", expires)
			j.mu.Lock()
			j.lost = true
			j.mu.Unlock()
			j.cancel(errLeaseExpired)
			return
		}
		if !renewing && !now.Before(nextRenew) {
			renewing = true
			go func() {
				// Bounded by the expiry: past it, the answer no longer matters.
				ctx, cancel := context.WithTimeout(context.Background(), expires.Sub(now))
				defer cancel()
				until, err := s.RenewLease(ctx, RenewLeaseArgs{Lease: j.lease, TTL: w.leaseTTL, Now: now})
				renewed <- renewal{at: now, until: until, err: err}
			}()
		}
		wait := min(expires.Sub(now), keeperTick)
		if !renewing {
			wait = min(wait, nextRenew.Sub(now))
		}
		t := time.NewTimer(wait)
		select {
		case <-j.settled:
		case <-w.quit:
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
				w.answered()
				nextRenew = r.at.Add(every)
			case j.isSettled():
				// The outcome was written meanwhile.
			case errors.Is(r.err, ErrLeaseLost):
				w.log.Info("roster: worker: lease lost; cancelling its handler", "execution", j.lease.ExecutionID)
				j.lose()
				t.Stop()
				return
			case errors.Is(r.err, ErrClosed):
				j.cancel(ErrClosed)
				t.Stop()
				return
			default:
				w.warn("roster: worker: renewing a lease failed; will retry", "execution", j.lease.ExecutionID, "err", r.err)
				nextRenew = s.now(time.Time{}).Add(min(every, b.next()))
			}
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
