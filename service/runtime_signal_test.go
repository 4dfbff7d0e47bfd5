package service

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rosterdb/roster/internal/engine"
)

// TestClaimerSignalBetweenRounds: a Store work signal that lands after
// one round of the claimer looked at its signal and before the next round
// begins is a wake-up all the same. A claim riding on a settler's write,
// prepared before the work was created (so it comes up short), then does
// not clear want, and the claimer claims again at once rather than wait for
// its poll (an hour here).
//
// The window is reached after a kick ends idle. (After a failed claim's
// retryWait it cannot be: while claims fail no claim rides on the settler's
// writes, TestClaimerWhileClaimsFail.)
func TestClaimerSignalBetweenRounds(t *testing.T) {
	clk := newClock()
	sl := newSlots(1)
	var n notifier
	var hook atomic.Pointer[func()] // runs inside c.signal() call number hookAt, before it takes the channel
	var hookAt atomic.Int32
	var signals atomic.Int32
	store := &fakeClaimStore{}
	store.claim = func(ctx context.Context, p engine.ClaimParams) ([]Lease, time.Time, error) {
		if store.calls.Load() == 1 {
			l := partsLease(clk.Now().Add(time.Minute)) // fills the one slot
			l.LeaseID = p.LeaseIDs[0]
			return []Lease{l}, time.Time{}, nil
		}
		return nil, time.Time{}, nil // nothing claimable
	}
	c := newClaimer(store, sl, ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Minute}, clk.Now, partsLog())
	c.poll, c.sub = time.Hour, quietSub{}
	c.launch = func(Lease) bool { return true }
	c.lapsed, c.regEpoch = func(uint64) {}, func() uint64 { return 0 }
	var bcMu sync.Mutex
	var bc *batchClaim
	c.signal = func() <-chan struct{} {
		if signals.Add(1) != hookAt.Load() {
			return n.wait()
		}
		if h := hook.Swap(nil); h != nil {
			(*h)()
		}
		return n.wait()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.done = ctx.Done()
	// The settler prepares its claim (a slot free, want set, gen g), its
	// statement reads no work; then this Store creates work and signals.
	settlerThenCreate := func() {
		bcMu.Lock()
		bc = c.prepare()
		bcMu.Unlock()
		n.signal()
	}
	ran := make(chan error, 1)
	go func() { ran <- c.run(ctx) }()
	defer func() { cancel(); c.kick(); <-ran }()

	// Round 1 filled the slot; round 2 idles (busy, deaf to changes).
	within(t, "the claimer idle with its slot held", func() bool { return signals.Load() == 2 && store.calls.Load() == 1 })
	time.Sleep(20 * time.Millisecond)
	sl.unreserve(1) // a handler's outcome being written frees its slot
	h := settlerThenCreate
	hookAt.Store(3)
	hook.Store(&h)
	c.kick() // any kick: a lost lease's handler, a renewal answering a failing claimer...
	within(t, "the next round's signal taken", func() bool { return hook.Load() == nil && signals.Load() >= 2 })
	time.Sleep(20 * time.Millisecond) // the claimer idles: its slot is reserved by the settler
	bcMu.Lock()
	b := bc
	bcMu.Unlock()
	if b == nil {
		t.Fatal("setup: the settler could not prepare a claim")
	}
	before := store.calls.Load()
	// The settler's claim comes up short (it read before the create).
	c.claimed(b, nil, time.Time{}, nil)
	if sl.hasFree() {
		c.kick() // as settler.write does
	}
	if !waitTrue(func() bool { return store.calls.Load() > before }) {
		_, gen := sl.reserve()
		t.Fatalf("the work signalled while the settler's claim was in flight was never claimed (want cleared, gen %d): the claimer waits for its poll", gen)
	}
}
