package service

import (
	"context"
	"errors"
	"sync"
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

// claimStore is what the claimer needs from the Store: claims, and the
// release of leases nobody will run.
type claimStore interface {
	newClaim(a ClaimArgs, n int) (engine.ClaimParams, error)
	executionClaim(ctx context.Context, p engine.ClaimParams) ([]Lease, time.Time, error)
	ReleaseLease(ctx context.Context, a ReleaseArgs) error
	releaseUnknownClaim(k engine.WorkerKey, leaseIDs []uuid.UUID) error
}

var _ claimStore = (*Store)(nil)

// claimer is RunWorker's claimer. It shares only the slots with the other
// parts; they reach it through kick and answered (and the settler through
// prepare and claimed, for the claims that ride on its writes).
type claimer struct {
	store claimStore
	slots *slots
	args  ClaimArgs        // the worker's key and its leases' TTL
	now   func() time.Time // the Store's clock
	log   runLog

	// Set before run.
	poll     time.Duration          // the longest an idle claimer waits without looking
	signal   func() <-chan struct{} // a channel closed at this Store's next work signal
	sub      engine.Subscription    // changes heard from the engine, armed while idle
	launch   func(Lease) bool       // starts a lease's handler; false: shutdown began, not started
	lapsed   func(epoch uint64)     // a claim begun under that registration found it lapsed
	regEpoch func() uint64          // the current registration's epoch, taken as a claim begins
	done     <-chan struct{}        // RunWorker's ctx: once done, leases claimed are released
	heard    func()                 // a claim got through: the database answers (may be nil)

	kickCh chan struct{} // wakes the claimer (buffered 1)

	mu      sync.Mutex
	failing bool          // the last claim failed: the claimer waits to retry
	orphans []orphanClaim // claims whose outcome was unknown, to look up and release
}

// newClaimer returns a claimer of the worker and lease TTL args name, over
// sl; the caller sets the fields marked "set before run".
func newClaimer(store claimStore, sl *slots, args ClaimArgs, now func() time.Time, log runLog) *claimer {
	return &claimer{store: store, slots: sl, args: args, now: now, log: log, kickCh: make(chan struct{}, 1)}
}

// run claims until ctx ends (nil) or the Store closes (ErrClosed). A claim
// in flight when ctx ends is answered all the same (it is not cancelled: its
// outcome would be unknown), and its leases are released; no claim begins
// after that.
func (c *claimer) run(ctx context.Context) error {
	var b backoff
	var prev <-chan struct{} // the signal of the round before
	for ctx.Err() == nil {
		if !c.isFailing() {
			// Claims of unknown outcome left to look up (a look-up that
			// failed): each round tries again, a busy worker's too. While
			// claims fail it would only hold the next try back.
			c.releaseOrphans()
		}
		signal := c.signal() // taken before the claim: no signal is missed
		// A signal of the round before is a wake-up whether or not a wait
		// took it: it may have come while idle took a kick instead, during
		// retryWait (which does not listen for it), after a claim that
		// filled every slot, or between rounds. The channel stays the same
		// until a signal closes it, so none falls between two rounds.
		if prev != nil && isDone(prev) {
			c.slots.wakeUp()
		}
		prev = signal
		if n, gen := c.slots.reserve(); n > 0 {
			epoch := c.regEpoch()
			p, err := c.store.newClaim(c.args, n)
			if err != nil {
				c.slots.unreserve(n)
				return err // only a lease id that could not be made: RunWorker checked the arguments
			}
			leases, next, err := c.store.executionClaim(context.WithoutCancel(ctx), p)
			if claimFailed(err) {
				c.setFailing(true) // before its slots are free: no settler's write takes them for a claim
			}
			c.handOff(leases)
			c.slots.unreserve(n - len(leases))
			switch {
			case err == nil:
				b.reset()
				c.setFailing(false)
				if c.heard != nil {
					c.heard()
				}
				if len(leases) == n || !c.slots.noMoreWork(gen, next) {
					continue // there may be more
				}
				c.releaseOrphans() // before idling: the database answers claims again
			case errors.Is(err, ErrClosed):
				return err
			case errors.Is(err, ErrNotRegistered):
				c.lapsed(epoch)
			default:
				c.failedClaim(p, err)
				c.retryWait(ctx, b.next())
				continue
			}
		}
		c.idle(ctx, signal)
	}
	return nil
}

// handOff starts a handler for each lease a claim took, unless RunWorker's
// ctx ended (even while the claim was in flight) or shutdown began: then the
// lease is released and its slot freed, so that its execution waits again at
// once without using up an attempt.
func (c *claimer) handOff(leases []Lease) {
	for _, l := range leases {
		if isDone(c.done) || !c.launch(l) {
			c.slots.unreserve(1)
			c.release(l)
		}
	}
}

// release gives back a lease claimed but never started, retrying transient
// failures until the lease would have expired or shutdownGrace passed.
func (c *claimer) release(l Lease) {
	deadline := time.Now().Add(shutdownGrace)
	var b backoff
	for {
		err := c.store.ReleaseLease(context.Background(), ReleaseArgs{Lease: l})
		switch {
		case err == nil, errors.Is(err, ErrLeaseLost), errors.Is(err, ErrClosed):
			return
		case !transient(err) || time.Now().After(deadline) || !c.now().Before(l.ExpiresAt):
			c.log.warn("roster: worker: releasing an unstarted lease failed; it will expire and be reclaimed", "execution", l.ExecutionID, "err", err)
			return
		}
		time.Sleep(b.next())
	}
}

// isDone reports whether a done channel is closed (a nil one never is).
func isDone(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// batchClaim is a claim made with a batch of outcomes (see settler.write):
// for n reserved slots, answering the wake-up generation gen.
type batchClaim struct {
	params engine.ClaimParams
	n      int
	gen    uint64
	epoch  uint64 // the registration it began under
}

// prepare reserves the free slots for a claim to make with a batch of
// outcomes, when claiming is allowed; nil when no claim is to be made. None
// rides on a batch while claims fail: a batch written then may well be a
// retry that waits for a connection, and the slots it took would hold back
// the claimer, which tries again as soon as the database is heard to answer.
func (c *claimer) prepare() *batchClaim {
	if c.isFailing() {
		return nil
	}
	n, gen := c.slots.reserve()
	if n == 0 {
		return nil
	}
	p, err := c.store.newClaim(c.args, n)
	if err != nil {
		c.slots.unreserve(n)
		return nil
	}
	return &batchClaim{params: p, n: n, gen: gen, epoch: c.regEpoch()}
}

// claimed takes the answer to a claim made with a batch of outcomes, as run
// takes its own: the leases are handed off, the slots the claim did not fill
// freed, and a short claim, a lapse or a failure recorded. A claim that
// failed there hands claiming to the claimer, which claims at once and
// waits to retry if that fails too.
func (c *claimer) claimed(bc *batchClaim, leases []Lease, next time.Time, err error) {
	if claimFailed(err) {
		c.setFailing(true) // before its slots are free: no other write takes them for a claim
	}
	c.handOff(leases)
	c.slots.unreserve(bc.n - len(leases))
	switch {
	case err == nil && len(leases) < bc.n:
		c.slots.noMoreWork(bc.gen, next)
	case err == nil:
	case errors.Is(err, ErrNotRegistered):
		c.lapsed(bc.epoch)
	default:
		c.failedClaim(bc.params, err)
		c.kick()
	}
}

// claimFailed reports whether a claim's error is a failure to retry: not a
// closed Store, not a lapsed registration (the database answered).
func claimFailed(err error) bool {
	return err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrNotRegistered)
}

// idle waits for a reason to claim: a signal of this Store, a change heard
// from the engine, a kick (a registration restored, a slot freed, a claim to
// retry), the earliest RunAt it knows of, or the poll. Its subscription is
// armed only while no work is known and a slot is free: while busy, changes
// could not be claimed anyway, and watching every commit would cost the
// worker its speed (a PostgreSQL notification that comes meanwhile stays
// pending; SQLite's check looks at once, when armed, for changes it missed).
func (c *claimer) idle(ctx context.Context, signal <-chan struct{}) {
	wait := jitter(c.poll)
	listen, next := c.slots.whenIdle()
	if listen {
		c.sub.Arm()
		defer c.sub.Disarm()
		// The RunAt the last short claim saw matters only while the worker
		// waits for work: busy, it would wake the worker for nothing.
		if !next.IsZero() {
			if d := next.Sub(c.now()); d < wait {
				wait = max(d, time.Millisecond)
			}
		}
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-signal:
		c.slots.wakeUp()
	case <-c.sub.C():
		c.slots.wakeUp()
	case <-c.kickCh:
	case <-t.C:
		c.slots.wakeUp()
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
func (c *claimer) retryWait(ctx context.Context, d time.Duration) {
	c.setFailing(true)
	floor := retryFloor(d)
	if !sleep(ctx, floor) {
		return
	}
	c.sub.Arm()
	defer c.sub.Disarm()
	t := time.NewTimer(d - floor)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-c.sub.C():
	case <-c.kickCh:
	case <-t.C:
	}
}

// retryFloor is the least wait after a failed claim whose backoff is d:
// half of it, at most a quarter of a second.
func retryFloor(d time.Duration) time.Duration { return min(d/2, 250*time.Millisecond) }

// setFailing records whether the last claim failed (the claimer waits to
// try again).
func (c *claimer) setFailing(v bool) {
	c.mu.Lock()
	c.failing = v
	c.mu.Unlock()
}

// isFailing reports whether the last claim failed.
func (c *claimer) isFailing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failing
}

// answered records that the database answered a write of this worker (a
// heartbeat, a renewal, a settle): a claimer waiting to retry a failed claim
// tries again at once.
func (c *claimer) answered() {
	c.mu.Lock()
	failing := c.failing
	c.mu.Unlock()
	if failing {
		c.kick()
	}
}

// kick wakes the claimer.
func (c *claimer) kick() {
	select {
	case c.kickCh <- struct{}{}:
	default:
	}
}

// failedClaim logs a claim that failed (rate-limited) and, when its outcome
// is unknown (the connection broke), remembers its lease ids: the claim may
// have committed, and a lease nobody runs would use up an attempt when it
// expires. releaseOrphans releases them once the database answers.
func (c *claimer) failedClaim(p engine.ClaimParams, err error) {
	c.log.warn("roster: worker: claiming failed; will retry", "err", err)
	if !errors.Is(err, ErrUnavailable) {
		return
	}
	o := orphanClaim{ids: p.LeaseIDs, expiresAt: msTime(p.ExpiresAtMs)}
	limit := maxOrphanClaims
	if p.Bound {
		// A bound lease has no expiry of its own: one that committed
		// would stay held, by this live worker, until it is looked up
		// (or the registration lapses and takes it along). Keep it until
		// then, and many more of them.
		o.expiresAt, limit = time.Time{}, maxBoundOrphanClaims
	}
	c.mu.Lock()
	c.orphans = append(c.orphans, o)
	if len(c.orphans) > limit {
		// A long outage: most of these never reached the database. The
		// oldest go unchecked; if they did commit, they expire (a bound
		// lease when the registration lapses, as it does in an outage
		// that long).
		c.orphans = c.orphans[len(c.orphans)-limit:]
	}
	c.mu.Unlock()
}

// maxOrphanClaims bounds the claims of unknown outcome kept to look up;
// maxBoundOrphanClaims those of bound leases: one claim per retry, at most
// about 2 s apart, through an outage of some 8 minutes.
const (
	maxOrphanClaims      = 16
	maxBoundOrphanClaims = 256
)

// orphanClaim is a claim whose outcome was unknown.
type orphanClaim struct {
	ids       []uuid.UUID
	expiresAt time.Time // no lease of it outlives this (zero: a bound claim, kept until looked up)
}

// releaseOrphans looks up the leases of claims whose outcome was unknown and
// releases those that committed; it runs at each round while claims
// succeed, and after a claim that succeeded before the claimer idles. What
// the database cannot answer yet is kept for the next time, until the
// leases would have expired anyway.
func (c *claimer) releaseOrphans() {
	c.mu.Lock()
	orphans := c.orphans
	c.orphans = nil
	c.mu.Unlock()
	var keep []orphanClaim
	for i, o := range orphans {
		if !o.expiresAt.IsZero() && !c.now().Before(o.expiresAt) {
			continue
		}
		err := c.store.releaseUnknownClaim(engine.WorkerKey{Namespace: c.args.Namespace, InstanceID: c.args.InstanceID}, o.ids)
		if transient(err) {
			// The database does not answer yet: look again next time.
			keep = append(keep, orphans[i:]...)
			break
		}
		if err != nil {
			c.log.warn("roster: worker: releasing the leases of a claim whose outcome was unknown failed", "err", err)
		}
	}
	if len(keep) > 0 {
		c.mu.Lock()
		c.orphans = append(c.orphans, keep...)
		c.mu.Unlock()
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
