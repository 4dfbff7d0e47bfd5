package service

import (
	"context"
	"errors"
	"sync"
	"time"
)

// heartStore is what the heart needs from the Store.
type heartStore interface {
	HeartbeatWorker(ctx context.Context, a HeartbeatWorkerArgs) (time.Time, error)
	RegisterWorker(ctx context.Context, a RegisterWorkerArgs) (RegisterOutcome, error)
}

var _ heartStore = (*Store)(nil)

// claimWaker is what the heart needs from the other parts: the claimer's
// kick when the registration is restored, and word that the database
// answered for every part waiting to retry.
type claimWaker interface {
	kick()
	answered()
}

var _ claimWaker = heartWaker{}

// heart is RunWorker's heart: it keeps the registration alive. It shares
// only the slots with the other parts: a lapse holds claims back there until
// it has registered again.
type heart struct {
	store  heartStore
	reg    RegisterWorkerArgs // the worker's registration
	every  time.Duration      // between heartbeats (about TTL/3)
	slots  *slots
	claims claimWaker
	log    runLog
	// alive hears the registration's expiry by the Store's clock each time
	// a heartbeat or a register proves it, and the zero time when a
	// heartbeat found it lapsed (may be nil).
	alive func(expires time.Time)

	relapse chan struct{} // asks the heart to register again at once (buffered 1)

	// mu orders a claim's report of a lapse against a registration: a
	// claim that began under an earlier registration than the current one
	// found the lapse that registration ended, so it asks for nothing (one
	// stall past the TTL registers once, whichever part found it first).
	mu      sync.Mutex
	epoch   uint64 // successful registrations so far
	relapsE uint64 // the epoch the pending relapse was found under
}

// newHeart returns the heart of the worker reg registers, heartbeating at
// about TTL/3.
func newHeart(store heartStore, reg RegisterWorkerArgs, sl *slots, claims claimWaker, log runLog) *heart {
	return &heart{store: store, reg: reg, every: max(reg.TTL/3, time.Millisecond), slots: sl, claims: claims, log: log,
		relapse: make(chan struct{}, 1)}
}

// register registers the worker (again).
func (h *heart) register(ctx context.Context) error {
	at := h.now()
	_, err := h.store.RegisterWorker(context.WithoutCancel(ctx), h.reg)
	if err != nil {
		return err
	}
	if h.alive != nil {
		h.alive(at.Add(h.reg.TTL)) // at the latest: registered after at
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.epoch++
	h.setRegistered(true)
	return nil
}

// registration is the epoch of the current registration: a claim takes it
// as it begins, and reports a lapse it finds with it (lapsed).
func (h *heart) registration() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.epoch
}

// now is the Store's clock, where the heart's store has one.
func (h *heart) now() time.Time {
	if c, ok := h.store.(interface{ now(time.Time) time.Time }); ok {
		return c.now(time.Time{})
	}
	return time.Now()
}

// run heartbeats at about every until stop. A heartbeat (or a claim) that
// finds the registration lapsed stops claims while it registers again;
// running handlers go on, since their leases may well hold. Transient
// failures are retried sooner, with backoff.
func (h *heart) run(stop <-chan struct{}) {
	wait := jitter(h.every)
	var b backoff
	for {
		relapsed := false
		t := time.NewTimer(wait)
		select {
		case <-stop:
			t.Stop()
			return
		case <-h.relapse:
			h.mu.Lock()
			relapsed = h.relapsE == h.epoch // else registered again since
			h.mu.Unlock()
			if !relapsed {
				t.Stop()
				continue
			}
		case <-t.C:
		}
		t.Stop()
		var err error
		if !relapsed {
			var expires time.Time
			expires, err = h.store.HeartbeatWorker(context.Background(), HeartbeatWorkerArgs{Namespace: h.reg.Namespace, InstanceID: h.reg.InstanceID})
			if err == nil && h.alive != nil {
				h.alive(expires)
			}
			if err == nil {
				// A heartbeat proves the registration, even one whose
				// register reported a failure it had not (the connection
				// broke after the commit).
				h.setRegistered(true)
				h.claims.answered()
			}
		}
		if relapsed || errors.Is(err, ErrNotRegistered) {
			if h.alive != nil {
				// The registration ended (a heartbeat or a claim found it
				// lapsed), and its bound leases with it: registering again
				// revokes them, so their handlers stop first.
				h.alive(time.Time{})
			}
			h.setRegistered(false)
			if err = h.register(context.Background()); err == nil {
				h.log.Info("roster: worker: the registration had lapsed; registered again")
			}
		}
		switch {
		case err == nil:
			b.reset()
			wait = jitter(h.every)
		case errors.Is(err, ErrClosed):
			return
		default:
			h.log.warn("roster: worker: heartbeat failed; will retry", "err", err)
			wait = min(h.every, b.next())
		}
	}
}

// lapsed stops claims until the heart has registered again: a claim that
// began under registration epoch found it lapsed. A claim of an earlier
// registration than the current one changes nothing: the heart registered
// again since it began.
func (h *heart) lapsed(epoch uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if epoch != h.epoch {
		return
	}
	h.slots.setRegistered(false)
	h.relapsE = epoch
	select {
	case h.relapse <- struct{}{}:
	default:
	}
}

// setRegistered records the registration; a restored one wakes the claimer.
func (h *heart) setRegistered(v bool) {
	if h.slots.setRegistered(v) {
		h.claims.kick()
	}
}
