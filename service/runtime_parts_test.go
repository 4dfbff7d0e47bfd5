package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/rosterdb/roster/internal/engine"
)

// Each part of RunWorker built alone, over fakes of what it needs and a fake
// clock (fakeClock, helpers_test.go): no database.

// partsLog is a runLog that writes nothing.
func partsLog() runLog {
	return runLog{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), limit: engine.NewLogLimiter(time.Second)}
}

// partsLease is a lease of the fake worker expiring at expires.
func partsLease(expires time.Time) Lease {
	return Lease{ExecutionID: uuid.New(), LeaseID: uuid.New(), AttemptIndex: 1, Epoch: 1,
		Namespace: "ns", InstanceID: "i", Lane: "default", ExpiresAt: expires}
}

// within waits up to 5 s for cond, and fails the test if it never holds.
func within(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !waitTrue(cond) {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// waitTrue waits up to 5 s for cond and reports whether it held (for
// goroutines other than the test's).
func waitTrue(cond func() bool) bool {
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// errUnavailable is a transient failure, as the Store reports a database away.
var errUnavailable = fmt.Errorf("%w: connection refused", ErrUnavailable)

// fakeRenewer is a leaseRenewer answering with renew, counting the calls.
type fakeRenewer struct {
	calls atomic.Int32
	renew func(ctx context.Context, a RenewLeaseArgs) (time.Time, error)
}

// renewLease counts the call and answers with f.renew.
func (f *fakeRenewer) renewLease(ctx context.Context, a RenewLeaseArgs) (time.Time, error) {
	f.calls.Add(1)
	return f.renew(ctx, a)
}

// renewOK renews a lease to Now + TTL.
func renewOK(_ context.Context, a RenewLeaseArgs) (time.Time, error) { return a.Now.Add(a.TTL), nil }

// testKeeper is a keeper over r by clk, renewing a lease of ttl. Its clock
// counts the keeper's looks at it, so that a test can wait for a keeper to
// have started before it moves the clock.
func testKeeper(t *testing.T, r leaseRenewer, clk *fakeClock, ttl time.Duration) (*keeper, *atomic.Int32) {
	quit := make(chan struct{})
	t.Cleanup(func() { close(quit) })
	looks := &atomic.Int32{}
	now := func() time.Time { looks.Add(1); return clk.Now() }
	return &keeper{renewer: r, now: now, leaseTTL: ttl, tick: 2 * time.Millisecond, answered: func() {}, log: partsLog(), quit: quit}, looks
}

// settleCall is one call of fakeSettleStore.settle.
type settleCall struct {
	outcomes []engine.Outcome
	unknown  []bool
}

// fakeSettleStore is a settleStore answering each outcome with answer, and
// each look-up with lookUp (nil: not written before).
type fakeSettleStore struct {
	answer func(call int, o engine.Outcome) error
	lookUp func(o engine.Outcome) error
	lost   atomic.Int32 // leases counted lost
	ended  atomic.Int32 // outcomes found written by an earlier try

	mu      sync.Mutex
	calls   []settleCall
	written map[uuid.UUID]int // lease id: times answered nil
}

// settle records the call and answers each outcome with f.answer.
func (f *fakeSettleStore) settle(outcomes []engine.Outcome, held []Lease, unknown []bool, claim *engine.ClaimParams) ([]error, []Lease, time.Time, error) {
	f.mu.Lock()
	call := len(f.calls)
	f.calls = append(f.calls, settleCall{outcomes: append([]engine.Outcome(nil), outcomes...), unknown: append([]bool(nil), unknown...)})
	f.mu.Unlock()
	errs := make([]error, len(outcomes))
	for i, o := range outcomes {
		errs[i] = f.answer(call, o)
		if errs[i] == nil {
			f.mu.Lock()
			if f.written == nil {
				f.written = map[uuid.UUID]int{}
			}
			f.written[o.Lease.LeaseID]++
			f.mu.Unlock()
		}
	}
	return errs, nil, time.Time{}, nil
}

// writtenBefore answers with f.lookUp; without one, no earlier try wrote
// the outcome.
func (f *fakeSettleStore) writtenBefore(o engine.Outcome) error {
	if f.lookUp == nil {
		return engine.ErrNoRows
	}
	return f.lookUp(o)
}

// endedBefore counts an outcome found written by its earlier try.
func (f *fakeSettleStore) endedBefore(Lease, engine.Outcome) { f.ended.Add(1) }

// leaseLost counts a lease lost.
func (f *fakeSettleStore) leaseLost() { f.lost.Add(1) }

// snapshot returns the calls so far and the times each lease was written.
func (f *fakeSettleStore) snapshot() ([]settleCall, map[uuid.UUID]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := map[uuid.UUID]int{}
	for k, v := range f.written {
		w[k] = v
	}
	return append([]settleCall(nil), f.calls...), w
}

// noClaims is a settleClaims that never claims.
type noClaims struct{ kicks, answers atomic.Int32 }

// prepare makes no claim.
func (*noClaims) prepare() *batchClaim { return nil }

// claimed is never called: no claim is made.
func (*noClaims) claimed(*batchClaim, []Lease, time.Time, error) {}

// kick counts the kicks.
func (c *noClaims) kick() { c.kicks.Add(1) }

// answered counts the answers told.
func (c *noClaims) answered() { c.answers.Add(1) }

// runSettler runs st until the test ends.
func runSettler(t *testing.T, st *settler) {
	done := make(chan struct{})
	go func() { defer close(done); st.run() }()
	t.Cleanup(func() {
		st.finish(time.Now())
		<-done
	})
}

// TestSettlerRetriesWhileKeeperRenews: an outcome that fails for a
// transient reason is tried again, with backoff, while its keeper goes on
// renewing the lease (by the fake clock); it is written once, when the
// store answers, and then the keeper stops.
func TestSettlerRetriesWhileKeeperRenews(t *testing.T) {
	for _, tc := range []struct {
		name     string
		failures int
		err      error
	}{
		{"unavailable once", 1, errUnavailable},
		{"unavailable thrice", 3, errUnavailable},
		{"storage refusing writes", 2, fmt.Errorf("%w: disk full", engine.ErrStorage)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const ttl = 300 * time.Millisecond
			clk := newClock()
			renewer := &fakeRenewer{renew: renewOK}
			k, looks := testKeeper(t, renewer, clk, ttl)
			j := k.newJob(partsLease(clk.Now().Add(ttl)))
			j.startKeeper()
			within(t, "the keeper started", func() bool { return looks.Load() > 0 })
			sl := newSlots(1)
			sl.reserve() // the handler's slot
			store := &fakeSettleStore{}
			store.answer = func(call int, _ engine.Outcome) error {
				if call >= tc.failures {
					return nil
				}
				// While the outcome waits, the keeper renews: a renewal
				// is due at every third of the TTL by the clock.
				before := renewer.calls.Load()
				clk.Advance(ttl / 3)
				if !waitTrue(func() bool { return renewer.calls.Load() > before }) {
					t.Error("no renewal while the outcome was retried")
				}
				return tc.err
			}
			claims := &noClaims{}
			st := newSettler(store, sl, claims, partsLog())
			runSettler(t, st)
			st.add(j, []byte("done"), nil)
			within(t, "the outcome settled", j.isSettled)

			calls, written := store.snapshot()
			if len(calls) != tc.failures+1 {
				t.Fatalf("settle was called %d times, want %d", len(calls), tc.failures+1)
			}
			for i, c := range calls {
				if len(c.outcomes) != 1 || c.outcomes[0].Lease != leaseRef(j.lease) || string(c.outcomes[0].Result) != "done" {
					t.Fatalf("call %d wrote %+v, want the job's result", i, c.outcomes)
				}
				// ErrUnavailable leaves the try's result unknown: the
				// next try says so; a storage error does not.
				wantUnknown := i > 0 && errors.Is(tc.err, ErrUnavailable)
				if c.unknown[0] != wantUnknown {
					t.Fatalf("call %d: unknown = %v, want %v", i, c.unknown[0], wantUnknown)
				}
			}
			if n := written[j.lease.LeaseID]; n != 1 {
				t.Fatalf("the outcome was written %d times, want once", n)
			}
			if got := renewer.calls.Load(); got < int32(tc.failures) {
				t.Fatalf("%d renewals during %d failed tries", got, tc.failures)
			}
			if j.isLost() || context.Cause(j.ctx) != context.Canceled {
				t.Fatalf("the job ended with lost = %v, cause %v; want written (context.Canceled)", j.isLost(), context.Cause(j.ctx))
			}
			if sl.held() != 0 || claims.answers.Load() == 0 {
				t.Fatalf("after the write: %d slots held, %d answers told; want 0 and some", sl.held(), claims.answers.Load())
			}
			// Written: the keeper renews no more, however far the clock goes.
			renewals := renewer.calls.Load()
			clk.Advance(ttl)
			time.Sleep(20 * time.Millisecond)
			if got := renewer.calls.Load(); got != renewals {
				t.Fatalf("the keeper renewed %d times after the outcome was written", got-renewals)
			}
			if calls, _ := store.snapshot(); len(calls) != tc.failures+1 {
				t.Fatalf("settle was called again after the outcome was written (%d calls)", len(calls))
			}
		})
	}
}

// TestSettlerBatchLostLease: in a batch, one outcome whose lease is lost
// (the store says ErrLeaseLost, or its keeper found it lost first) is
// dropped alone: the others are written in the same call, it is not tried
// again, and every slot is freed.
func TestSettlerBatchLostLease(t *testing.T) {
	for _, tc := range []struct {
		name       string
		keeperLost bool // the keeper found the lease lost before the write
	}{
		{"the store finds it lost", false},
		{"its keeper found it lost first", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			k, _ := testKeeper(t, &fakeRenewer{renew: renewOK}, clk, time.Minute)
			jobs := make([]*job, 3)
			for i := range jobs {
				jobs[i] = k.newJob(partsLease(clk.Now().Add(time.Minute)))
			}
			lost := jobs[1]
			if tc.keeperLost {
				lost.lose(ErrLeaseLost)
			}
			sl := newSlots(len(jobs))
			sl.reserve()
			store := &fakeSettleStore{answer: func(_ int, o engine.Outcome) error {
				if o.Lease == leaseRef(lost.lease) {
					return fmt.Errorf("%w: lease %s is not the current, unexpired lease", ErrLeaseLost, o.Lease.LeaseID)
				}
				return nil
			}}
			st := newSettler(store, sl, &noClaims{}, partsLog())
			for i, j := range jobs {
				st.add(j, fmt.Appendf(nil, "result %d", i), nil)
			}
			runSettler(t, st) // all three are queued: one batch
			within(t, "every outcome settled", func() bool {
				return jobs[0].isSettled() && jobs[1].isSettled() && jobs[2].isSettled()
			})
			time.Sleep(30 * time.Millisecond) // a retry would come within this

			calls, written := store.snapshot()
			if len(calls) != 1 {
				t.Fatalf("settle was called %d times, want once", len(calls))
			}
			wantSent := 3
			if tc.keeperLost {
				wantSent = 2 // the lost one is not even sent
			}
			if len(calls[0].outcomes) != wantSent {
				t.Fatalf("the batch carried %d outcomes, want %d", len(calls[0].outcomes), wantSent)
			}
			for _, j := range jobs {
				want := 1
				if j == lost {
					want = 0
				}
				if written[j.lease.LeaseID] != want {
					t.Fatalf("lease %s written %d times, want %d", j.lease.LeaseID, written[j.lease.LeaseID], want)
				}
			}
			if sl.held() != 0 {
				t.Fatalf("%d slots still held after the batch", sl.held())
			}
		})
	}
}

// TestSettlerLooksUpAfterTheBatch: an outcome whose lease ended after a
// try of unknown result (found by its keeper, or by the write's fence) is
// looked up only after the outcomes written with it are settled: a slow
// read against a database just back does not hold them back. A look-up that
// finds it not written drops it, counting the lease lost when the write
// found it so.
func TestSettlerLooksUpAfterTheBatch(t *testing.T) {
	for _, tc := range []struct {
		name       string
		keeperLost bool // the keeper found the lease lost before the write
		wantLost   int32
	}{
		{"its keeper found it lost", true, 0},
		{"the write's fence found it ended", false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			k, _ := testKeeper(t, &fakeRenewer{renew: renewOK}, clk, time.Minute)
			old, fresh := k.newJob(partsLease(clk.Now().Add(time.Minute))), k.newJob(partsLease(clk.Now().Add(time.Minute)))
			if tc.keeperLost {
				old.lose(ErrLeaseLost)
			}
			sl := newSlots(2)
			sl.reserve()
			sl.reserve()
			var settledFirst atomic.Bool
			store := &fakeSettleStore{
				answer: func(_ int, o engine.Outcome) error {
					if o.Lease == leaseRef(old.lease) {
						return errEndedUnknown
					}
					return nil
				},
				lookUp: func(engine.Outcome) error {
					settledFirst.Store(waitTrue(fresh.isSettled))
					return engine.ErrNoRows
				},
			}
			st := newSettler(store, sl, &noClaims{}, partsLog())
			st.queue = append(st.queue, &pendingOutcome{j: old, outcome: outcomeOf(old.lease, []byte("old"), nil), tries: 1, unknown: true})
			st.add(fresh, []byte("fresh"), nil)
			runSettler(t, st)
			within(t, "both outcomes settled", func() bool { return old.isSettled() && fresh.isSettled() })
			if !settledFirst.Load() {
				t.Fatal("the look-up ran before the outcome written with it was settled")
			}
			_, written := store.snapshot()
			if written[fresh.lease.LeaseID] != 1 || written[old.lease.LeaseID] != 0 {
				t.Fatalf("written: fresh %d, old %d; want 1 and 0", written[fresh.lease.LeaseID], written[old.lease.LeaseID])
			}
			if got := store.lost.Load(); got != tc.wantLost {
				t.Fatalf("%d leases counted lost, want %d", got, tc.wantLost)
			}
			if sl.held() != 0 {
				t.Fatalf("%d slots still held", sl.held())
			}
		})
	}
}

// TestSettlerLookUpKeepsTheRoundsBackoff: a look-up finding an outcome
// written by its earlier try does not pull forward an outcome whose own
// write failed in the same round (a result too large for the disk left): it
// waits out its backoff.
func TestSettlerLookUpKeepsTheRoundsBackoff(t *testing.T) {
	for _, tc := range []struct {
		name       string
		keeperLost bool // the keeper found the looked-up lease lost before the write
	}{
		{"its keeper found it lost", true},
		{"the write's fence found it ended", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			k, _ := testKeeper(t, &fakeRenewer{renew: renewOK}, clk, time.Minute)
			bad, old := k.newJob(partsLease(clk.Now().Add(time.Minute))), k.newJob(partsLease(clk.Now().Add(time.Minute)))
			if tc.keeperLost {
				old.lose(ErrLeaseLost)
			}
			sl := newSlots(2)
			sl.reserve()
			sl.reserve()
			var badTries atomic.Int32
			store := &fakeSettleStore{
				answer: func(_ int, o engine.Outcome) error {
					if o.Lease == leaseRef(bad.lease) {
						badTries.Add(1)
						return fmt.Errorf("%w: disk full", engine.ErrStorage)
					}
					return errEndedUnknown
				},
				lookUp: func(engine.Outcome) error { return nil }, // the earlier try wrote it
			}
			st := newSettler(store, sl, &noClaims{}, partsLog())
			st.queue = append(st.queue,
				&pendingOutcome{j: bad, outcome: outcomeOf(bad.lease, []byte("bad"), nil), tries: 8}, // its next backoff: about 2 s
				&pendingOutcome{j: old, outcome: outcomeOf(old.lease, []byte("old"), nil), tries: 1, unknown: true})
			runSettler(t, st)
			within(t, "the looked-up outcome settled", old.isSettled)
			time.Sleep(200 * time.Millisecond) // a pulled retry would come within this
			if n := badTries.Load(); n != 1 {
				t.Fatalf("the outcome whose write failed was tried %d times within 200 ms, want once: the look-up pulled it forward", n)
			}
		})
	}
}

// TestSettlerLookUpRetries: a look-up that fails is made again later:
// without end while the database is away (transient), up to maxUnknownTries
// times for another error, after which the outcome is dropped (its lease
// ended either way). Failed writes before the look-ups do not count
// against that bound.
func TestSettlerLookUpRetries(t *testing.T) {
	odd := errors.New("a read that cannot succeed")
	for _, tc := range []struct {
		name    string
		tries   int                 // failed tries before the look-ups (writes)
		lookUp  func(n int32) error // the n-th look-up's answer, from 1
		settled bool                // the outcome is settled in the end
		lookUps int32               // look-ups made, when settled
		ended   int32               // found written (endedBefore)
	}{
		{"database away", 0, func(int32) error { return errUnavailable }, false, 0, 0},
		{"another error", 0, func(int32) error { return odd }, true, maxUnknownTries, 0},
		{"another error once, after many failed writes", maxUnknownTries, func(n int32) error {
			if n == 1 {
				return odd
			}
			return nil
		}, true, 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			k, _ := testKeeper(t, &fakeRenewer{renew: renewOK}, clk, time.Minute)
			old := k.newJob(partsLease(clk.Now().Add(time.Minute)))
			old.lose(ErrLeaseLost)
			sl := newSlots(1)
			sl.reserve()
			var lookUps atomic.Int32
			store := &fakeSettleStore{
				answer: func(int, engine.Outcome) error { return nil },
				lookUp: func(engine.Outcome) error { return tc.lookUp(lookUps.Add(1)) },
			}
			st := newSettler(store, sl, &noClaims{}, partsLog())
			st.queue = append(st.queue, &pendingOutcome{j: old, outcome: outcomeOf(old.lease, []byte("old"), nil), tries: tc.tries, unknown: true})
			runSettler(t, st)
			if !tc.settled {
				within(t, "three look-ups", func() bool { return lookUps.Load() >= 3 })
				if old.isSettled() {
					t.Fatal("the outcome was dropped while the database was away")
				}
				return
			}
			within(t, "the outcome settled", old.isSettled)
			if n := lookUps.Load(); n != tc.lookUps {
				t.Fatalf("%d look-ups, want %d", n, tc.lookUps)
			}
			if n := store.ended.Load(); n != tc.ended {
				t.Fatalf("found written %d times, want %d", n, tc.ended)
			}
		})
	}
}

// TestSettlerRefusedOutcomeLooksUpAfresh: an outcome the database refused
// is written as the attempt's failure, a new outcome: the look-ups its
// predecessor had refused do not count against its own.
func TestSettlerRefusedOutcomeLooksUpAfresh(t *testing.T) {
	clk := newClock()
	k, _ := testKeeper(t, &fakeRenewer{renew: renewOK}, clk, time.Minute)
	j := k.newJob(partsLease(clk.Now().Add(time.Minute)))
	sl := newSlots(1)
	sl.reserve()
	var failTries, lookUps atomic.Int32
	store := &fakeSettleStore{
		answer: func(_ int, o engine.Outcome) error {
			switch {
			case !o.Fail:
				return fmt.Errorf("%w: a result the database refuses", ErrInvalidInput)
			case failTries.Add(1) == 1:
				return errUnavailable // the failure's first try: unknown
			}
			return errEndedUnknown
		},
		lookUp: func(engine.Outcome) error {
			if lookUps.Add(1) == 1 {
				return errors.New("a read that cannot succeed")
			}
			return nil // the failure's first try wrote it
		},
	}
	st := newSettler(store, sl, &noClaims{}, partsLog())
	st.queue = append(st.queue, &pendingOutcome{j: j, outcome: outcomeOf(j.lease, []byte("result"), nil), refusedLookUps: maxUnknownTries - 1})
	runSettler(t, st)
	within(t, "the outcome settled", j.isSettled)
	if n := store.ended.Load(); n != 1 {
		t.Fatalf("the failure was found written %d times after %d look-ups, want once", n, lookUps.Load())
	}
}

// TestSettlerRetryPulledForward: an outcome waiting out its backoff
// because the database was away is tried as soon as another outcome's write
// gets through (the database is back); one that failed otherwise keeps its
// backoff.
func TestSettlerRetryPulledForward(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error // the waiting outcome's first failure
		pulled bool
	}{
		{"the database was away", errUnavailable, true},
		{"the database could not write", fmt.Errorf("%w: disk full", engine.ErrStorage), true},
		{"an error of another kind", errors.New("roster: something nobody knows"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			k, _ := testKeeper(t, &fakeRenewer{renew: renewOK}, clk, time.Minute)
			waiting := k.newJob(partsLease(clk.Now().Add(time.Minute)))
			later := k.newJob(partsLease(clk.Now().Add(time.Minute)))
			sl := newSlots(2)
			sl.reserve()
			sl.reserve()
			store := &fakeSettleStore{answer: func(call int, o engine.Outcome) error {
				if call == 0 {
					return tc.err
				}
				return nil
			}}
			st := newSettler(store, sl, &noClaims{}, partsLog())
			runSettler(t, st)
			st.add(waiting, []byte("first"), nil)
			within(t, "the first try", func() bool { calls, _ := store.snapshot(); return len(calls) == 1 })
			// Its backoff, as after many failed tries: far longer than the test.
			within(t, "the outcome queued again", func() bool {
				st.mu.Lock()
				defer st.mu.Unlock()
				for _, p := range st.queue {
					p.due = time.Now().Add(time.Hour)
				}
				return len(st.queue) == 1
			})
			st.add(later, []byte("second"), nil)
			within(t, "the second outcome written", later.isSettled)
			if !tc.pulled {
				time.Sleep(50 * time.Millisecond) // a pulled retry would come within this
				if waiting.isSettled() {
					t.Fatal("an outcome that failed for another reason than the database being away was tried before its backoff ended")
				}
				return
			}
			within(t, "the waiting outcome written once the database answered", waiting.isSettled)
			if _, written := store.snapshot(); written[waiting.lease.LeaseID] != 1 || written[later.lease.LeaseID] != 1 {
				t.Fatalf("written %v, want each outcome once", written)
			}
		})
	}
}

// TestSettlerOwnFailureKeepsBackoff: an outcome whose writes keep failing
// while other writes get through (a failure of its own: too large for the
// disk left, a statement timeout) is not tried again at every write that
// gets through, nor at every heartbeat, renewal or claim of the worker's
// other parts, and does not hold back an outcome that shared its failed
// batch (a batch fails as a whole).
func TestSettlerOwnFailureKeepsBackoff(t *testing.T) {
	for _, tc := range []struct {
		name  string
		heard bool // the other parts' writes get through every millisecond too
	}{
		{"other outcomes written", false},
		{"and the other parts heard", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			k, _ := testKeeper(t, &fakeRenewer{renew: renewOK}, clk, time.Minute)
			bad := k.newJob(partsLease(clk.Now().Add(time.Minute)))
			beside := k.newJob(partsLease(clk.Now().Add(time.Minute)))
			sl := newSlots(1 << 20)
			var badTries atomic.Int32
			store := &fakeSettleStore{}
			store.answer = func(call int, o engine.Outcome) error {
				if o.Lease == leaseRef(bad.lease) {
					badTries.Add(1)
				}
				// The batch fails as a whole when the bad outcome is in it.
				calls, _ := store.snapshot()
				for _, other := range calls[call].outcomes {
					if other.Lease == leaseRef(bad.lease) {
						return fmt.Errorf("%w: disk full", engine.ErrStorage)
					}
				}
				return nil
			}
			st := newSettler(store, sl, &noClaims{}, partsLog())
			st.add(bad, []byte("too large"), nil)
			st.add(beside, []byte("small"), nil)
			runSettler(t, st) // both queued: one batch, which fails
			// Other outcomes are written every 2 ms meanwhile.
			const stream = 500 * time.Millisecond
			for end := time.Now().Add(stream); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
				st.add(k.newJob(partsLease(clk.Now().Add(time.Minute))), []byte("other"), nil)
				if tc.heard {
					st.heardElsewhere()
					time.Sleep(time.Millisecond)
					st.heardElsewhere()
				}
			}
			within(t, "the outcome that shared the failed batch written", beside.isSettled)
			// Backoff alone gives about 6 tries in 500 ms; one pulled try
			// per backoff doubles that, and one more on the other parts'
			// word triples it. Pulled at every write it would be over 100.
			if n := badTries.Load(); n > 25 {
				t.Fatalf("the failing outcome was tried %d times in %v while other writes got through", n, stream)
			}
			if bad.isSettled() {
				t.Fatal("the failing outcome settled")
			}
		})
	}
}

// fakeClaimStore is a claimStore whose claims answer with claim.
type fakeClaimStore struct {
	claim func(ctx context.Context, p engine.ClaimParams) ([]Lease, time.Time, error)

	calls    atomic.Int32
	lookups  atomic.Int32 // claims of unknown outcome looked up
	mu       sync.Mutex
	released []uuid.UUID // lease ids
}

// newClaim gives each of n leases a fresh id, expiring LeaseTTL after t0
// (the fake clock's start).
func (f *fakeClaimStore) newClaim(a ClaimArgs, n int) (engine.ClaimParams, error) {
	p := engine.ClaimParams{Namespace: a.Namespace, InstanceID: a.InstanceID, LeaseIDs: make([]uuid.UUID, n),
		ExpiresAtMs: t0.Add(a.LeaseTTL).UnixMilli()}
	for i := range p.LeaseIDs {
		p.LeaseIDs[i] = uuid.New()
	}
	return p, nil
}

// executionClaim counts the call and answers with f.claim.
func (f *fakeClaimStore) executionClaim(ctx context.Context, p engine.ClaimParams) ([]Lease, time.Time, error) {
	f.calls.Add(1)
	return f.claim(ctx, p)
}

// ReleaseLease records the lease released.
func (f *fakeClaimStore) ReleaseLease(_ context.Context, a ReleaseArgs) error {
	f.mu.Lock()
	f.released = append(f.released, a.Lease.LeaseID)
	f.mu.Unlock()
	return nil
}

// releaseUnknownClaim counts the look-up and finds nothing to release.
func (f *fakeClaimStore) releaseUnknownClaim(engine.WorkerKey, []uuid.UUID) error {
	f.lookups.Add(1)
	return nil
}

// releasedIDs returns the lease ids released so far.
func (f *fakeClaimStore) releasedIDs() []uuid.UUID {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]uuid.UUID(nil), f.released...)
}

// quietSub is a subscription that never hears a change.
type quietSub struct{}

// C never delivers.
func (quietSub) C() <-chan struct{} { return nil }

// Arm does nothing.
func (quietSub) Arm() {}

// Disarm does nothing.
func (quietSub) Disarm() {}

// Close does nothing.
func (quietSub) Close() {}

// TestClaimerNoClaimAfterStop: once ctx ends the claimer begins no claim; a
// claim in flight then is answered all the same (its context is not
// cancelled) and its leases are released, not started, their slots freed;
// after shutdown no claim rides on the settler's writes either.
func TestClaimerNoClaimAfterStop(t *testing.T) {
	for _, tc := range []struct {
		name string
		when string // "before", "in flight", "idle"
	}{
		{"stopped before the first claim", "before"},
		{"stopped while a claim is in flight", "in flight"},
		{"stopped while idle", "idle"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			sl := newSlots(2)
			entered, answer := make(chan struct{}, 1), make(chan struct{})
			var claimed []Lease
			var ctxErr error
			store := &fakeClaimStore{claim: func(ctx context.Context, p engine.ClaimParams) ([]Lease, time.Time, error) {
				if tc.when != "in flight" {
					return nil, time.Time{}, nil // nothing claimable: the claimer idles
				}
				entered <- struct{}{}
				<-answer
				ctxErr = ctx.Err()
				for _, id := range p.LeaseIDs {
					l := partsLease(clk.Now().Add(time.Minute))
					l.LeaseID = id
					claimed = append(claimed, l)
				}
				return claimed, time.Time{}, nil
			}}
			c := newClaimer(store, sl, ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Minute}, clk.Now, partsLog())
			var launched atomic.Int32
			c.poll, c.sub = time.Hour, quietSub{}
			c.signal = func() <-chan struct{} { return nil }
			c.launch = func(Lease) bool { launched.Add(1); return true }
			c.lapsed, c.regEpoch = func(uint64) {}, func() uint64 { return 0 }
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c.done = ctx.Done()
			if tc.when == "before" {
				cancel()
			}
			ran := make(chan error, 1)
			go func() { ran <- c.run(ctx) }()
			switch tc.when {
			case "in flight":
				<-entered
				cancel()
				select {
				case <-ran:
					t.Fatal("the claimer returned with its claim in flight")
				case <-time.After(20 * time.Millisecond):
				}
				close(answer)
			case "idle":
				within(t, "the first claim", func() bool { return store.calls.Load() == 1 })
				within(t, "the claimer idle", func() bool { listen, _ := sl.whenIdle(); return listen })
				cancel()
			}
			select {
			case err := <-ran:
				if err != nil {
					t.Fatalf("run = %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the claimer did not return after stop")
			}
			calls := store.calls.Load()
			sl.stop() // the runner's shutdown
			if bc := c.prepare(); bc != nil {
				t.Fatal("a claim was prepared for a settler's write after shutdown")
			}
			time.Sleep(20 * time.Millisecond)
			if got := store.calls.Load(); got != calls {
				t.Fatalf("%d claims began after stop returned", got-calls)
			}
			wantCalls := map[string]int32{"before": 0, "in flight": 1, "idle": 1}[tc.when]
			if calls != wantCalls {
				t.Fatalf("%d claims, want %d", calls, wantCalls)
			}
			if ctxErr != nil {
				t.Fatalf("the claim in flight saw its context end: %v", ctxErr)
			}
			released := store.releasedIDs()
			if launched.Load() != 0 || len(released) != len(claimed) {
				t.Fatalf("%d handlers started and %d of %d leases released; want none started, all released", launched.Load(), len(released), len(claimed))
			}
			for i, l := range claimed {
				if released[i] != l.LeaseID {
					t.Fatalf("released %v, want the claimed leases", released)
				}
			}
			if sl.held() != 0 {
				t.Fatalf("%d slots held after stop", sl.held())
			}
		})
	}
}

// startClaimer runs a claimer of one worker over store and sl, logging to
// log, polling every poll, hearing no change and starting every lease it
// claims, until the test ends.
func startClaimer(t *testing.T, store claimStore, sl *slots, log runLog, poll time.Duration) *claimer {
	c := newClaimer(store, sl, ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Minute}, newClock().Now, log)
	c.poll, c.sub = poll, quietSub{}
	c.signal = func() <-chan struct{} { return nil }
	c.launch = func(Lease) bool { return true }
	c.lapsed, c.regEpoch = func(uint64) {}, func() uint64 { return 0 }
	ctx, cancel := context.WithCancel(context.Background())
	c.done = ctx.Done()
	ran := make(chan error, 1)
	t.Cleanup(func() {
		cancel()
		c.kick()
		if err := <-ran; err != nil {
			t.Errorf("run = %v", err)
		}
	})
	go func() { ran <- c.run(ctx) }()
	return c
}

// TestClaimerWhileClaimsFail: while claims fail (the database away), the
// claimer alone tries them again: no claim rides on the settler's writes
// (such a write may be a retry waiting for a connection, and would hold
// every free slot meanwhile), and the claims of unknown outcome are not
// looked up before each try. Once a claim succeeds, they are looked up, and
// claims ride on the settler's writes again; a claim that fails there hands
// the claiming back to the claimer.
func TestClaimerWhileClaimsFail(t *testing.T) {
	sl := newSlots(2)
	var down atomic.Bool
	down.Store(true)
	store := &fakeClaimStore{claim: func(ctx context.Context, p engine.ClaimParams) ([]Lease, time.Time, error) {
		if down.Load() {
			return nil, time.Time{}, errUnavailable
		}
		return nil, time.Time{}, nil // nothing claimable
	}}
	c := startClaimer(t, store, sl, partsLog(), time.Hour)

	within(t, "three failed claims", func() bool { return store.calls.Load() >= 3 })
	if bc := c.prepare(); bc != nil {
		t.Fatal("a claim rode on a settler's write while claims failed")
	}
	if n := store.lookups.Load(); n != 0 {
		t.Fatalf("claims of unknown outcome were looked up %d times while claims failed", n)
	}
	down.Store(false)
	c.answered() // a heartbeat got through: the claimer tries at once
	within(t, "the claims of unknown outcome looked up", func() bool { return store.lookups.Load() > 0 })
	within(t, "the claimer idle", func() bool { listen, _ := sl.whenIdle(); return listen })

	sl.wakeUp() // work announced: the settler's next write claims for the free slots
	bc := c.prepare()
	if bc == nil {
		t.Fatal("no claim rides on a settler's write once claims succeed again")
	}
	calls := store.calls.Load()
	down.Store(true)
	c.claimed(bc, nil, time.Time{}, errUnavailable) // that claim failed
	within(t, "the claimer trying again itself", func() bool { return store.calls.Load() > calls })
	if bc := c.prepare(); bc != nil {
		t.Fatal("a claim rode on a settler's write after a claim there failed")
	}
}

// flakyLookupStore is a fakeClaimStore whose first look-up of a claim of
// unknown outcome fails for a transient reason.
type flakyLookupStore struct {
	*fakeClaimStore
	tries atomic.Int32
}

// releaseUnknownClaim fails the first time, then finds nothing to release.
func (f *flakyLookupStore) releaseUnknownClaim(engine.WorkerKey, []uuid.UUID) error {
	if f.tries.Add(1) == 1 {
		return errUnavailable
	}
	return nil
}

// TestClaimerLooksUpOrphansWhileBusy: a claim of unknown outcome whose first
// look-up failed is looked up again at the next rounds of a worker that
// stays busy (its one slot held by a long handler, so it claims no more):
// were it not, a lease that did commit would stay held until it expired (a
// bound one, until the worker stops).
func TestClaimerLooksUpOrphansWhileBusy(t *testing.T) {
	clk := newClock()
	sl := newSlots(1)
	inner := &fakeClaimStore{}
	inner.claim = func(ctx context.Context, p engine.ClaimParams) ([]Lease, time.Time, error) {
		if inner.calls.Load() == 1 {
			return nil, time.Time{}, errUnavailable // outcome unknown
		}
		l := partsLease(clk.Now().Add(time.Minute)) // a long handler holds the slot
		l.LeaseID = p.LeaseIDs[0]
		return []Lease{l}, time.Time{}, nil
	}
	store := &flakyLookupStore{fakeClaimStore: inner}
	startClaimer(t, store, sl, partsLog(), 10*time.Millisecond)
	within(t, "the second claim", func() bool { return inner.calls.Load() >= 2 })
	within(t, "the claim of unknown outcome looked up again", func() bool { return store.tries.Load() >= 2 })
}

// hookHandler is a slog handler that runs hook at each record whose
// message says a claim failed.
type hookHandler struct{ hook func() }

func (h hookHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h hookHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "claiming failed") {
		h.hook()
	}
	return nil
}

func (h hookHandler) WithAttrs([]slog.Attr) slog.Handler { return h }

func (h hookHandler) WithGroup(string) slog.Handler { return h }

// TestClaimerFailedClaimLendsNoSlots: from the moment a claim fails, a
// settler's write gets no claim to carry (here asked as the failure is
// logged, its slots just freed): it would hold the slots while the claimer
// waits to retry.
func TestClaimerFailedClaimLendsNoSlots(t *testing.T) {
	sl := newSlots(1)
	store := &fakeClaimStore{claim: func(ctx context.Context, p engine.ClaimParams) ([]Lease, time.Time, error) {
		return nil, time.Time{}, errUnavailable
	}}
	var c *claimer
	var mu sync.Mutex
	var prepared *batchClaim
	log := runLog{Logger: slog.New(hookHandler{hook: func() {
		mu.Lock()
		defer mu.Unlock()
		if prepared == nil {
			prepared = c.prepare() // a settler writing a batch now
		}
	}}), limit: engine.NewLogLimiter(time.Second)}
	mu.Lock() // the hook waits until c is set
	c = startClaimer(t, store, sl, log, time.Hour)
	mu.Unlock()
	within(t, "three failed claims", func() bool { return store.calls.Load() >= 3 })
	mu.Lock()
	defer mu.Unlock()
	if prepared != nil {
		t.Fatalf("a claim rode on a settler's write after the claimer's claim failed (%d slot(s) held by it)", prepared.n)
	}
}

// TestKeeperEndsAtExpiry: the keeper ends the handler's context at the
// lease's expiry by the (fake) clock when no renewal got through, with cause
// errLeaseExpired; not a moment before; not at all when renewals pass; and
// at once, with ErrLeaseLost, when the store says the lease is lost.
func TestKeeperEndsAtExpiry(t *testing.T) {
	blocked := func(ctx context.Context, _ RenewLeaseArgs) (time.Time, error) {
		<-ctx.Done() // the database does not answer
		return time.Time{}, fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
	}
	for _, tc := range []struct {
		name  string
		renew func(ctx context.Context, a RenewLeaseArgs) (time.Time, error)
		want  error // the cause at the expiry; nil: the context is live
	}{
		{"renewals block", blocked, errLeaseExpired},
		{"renewals fail", func(context.Context, RenewLeaseArgs) (time.Time, error) { return time.Time{}, errUnavailable }, errLeaseExpired},
		{"renewals pass", renewOK, nil},
		{"the lease is lost", func(context.Context, RenewLeaseArgs) (time.Time, error) { return time.Time{}, ErrLeaseLost }, ErrLeaseLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const ttl = 300 * time.Millisecond
			clk := newClock()
			start := clk.Now()
			renewer := &fakeRenewer{renew: tc.renew}
			k, looks := testKeeper(t, renewer, clk, ttl)
			j := k.newJob(partsLease(start.Add(ttl)))
			done := make(chan struct{})
			go func() { defer close(done); j.keep(j.k.now().Add(j.k.every())) }()
			defer func() { j.settle(); <-done }()
			within(t, "the keeper started", func() bool { return looks.Load() > 0 })

			clk.Advance(ttl / 3) // a renewal is due
			within(t, "a renewal", func() bool { return renewer.calls.Load() > 0 })
			if tc.want == ErrLeaseLost {
				within(t, "the context ended", func() bool { return j.ctx.Err() != nil })
				if cause := context.Cause(j.ctx); cause != ErrLeaseLost || !j.isLost() {
					t.Fatalf("cause %v, lost %v; want ErrLeaseLost", cause, j.isLost())
				}
				return
			}
			clk.Advance(ttl - ttl/3 - time.Millisecond) // just before the expiry
			time.Sleep(20 * time.Millisecond)           // ten keeper ticks
			if err := j.ctx.Err(); err != nil {
				t.Fatalf("the context ended before the lease's expiry: %v", context.Cause(j.ctx))
			}
			clk.Advance(time.Millisecond) // the expiry
			if tc.want == nil {
				time.Sleep(20 * time.Millisecond)
				if j.ctx.Err() != nil || !j.expiry().After(start.Add(ttl)) {
					t.Fatalf("renewed lease: context ended (%v), expiry %v", context.Cause(j.ctx), j.expiry())
				}
				return
			}
			within(t, "the context ended at the expiry", func() bool { return j.ctx.Err() != nil })
			if cause := context.Cause(j.ctx); cause != tc.want || !j.isLost() {
				t.Fatalf("cause %v, lost %v; want %v", cause, j.isLost(), tc.want)
			}
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("the keeper did not stop at the expiry")
			}
		})
	}
}

// TestKeeperRenewalCutAtTheExpiry: a renewal that its own bound (the
// lease's expiry) cut, answering the context's raw error as an engine does,
// is no failure to log: the fault suite counts a raw error in a worker's log
// as a leak ("renewing a lease failed; will retry": context deadline
// exceeded, seen after a server restart).
func TestKeeperRenewalCutAtTheExpiry(t *testing.T) {
	const ttl = 150 * time.Millisecond
	clk := newClock()
	start := clk.Now()
	var returned atomic.Int32
	renewer := &fakeRenewer{renew: func(ctx context.Context, _ RenewLeaseArgs) (time.Time, error) {
		<-ctx.Done() // the database does not answer
		defer returned.Add(1)
		return time.Time{}, ctx.Err()
	}}
	var log bytes.Buffer
	var logMu sync.Mutex
	k, looks := testKeeper(t, renewer, clk, ttl)
	k.log = runLog{Logger: slog.New(slog.NewTextHandler(&lockedWriter{w: &log, mu: &logMu}, nil)), limit: engine.NewLogLimiter(time.Second)}
	j := k.newJob(partsLease(start.Add(ttl)))
	done := make(chan struct{})
	go func() { defer close(done); j.keep(j.k.now().Add(j.k.every())) }()
	defer func() { j.settle(); <-done }()
	within(t, "the keeper started", func() bool { return looks.Load() > 0 })
	clk.Advance(ttl / 3) // a renewal is due; its bound is the rest of the lease, by the wall clock
	within(t, "the renewal cut at its bound", func() bool { return returned.Load() > 0 })
	time.Sleep(20 * time.Millisecond) // ten keeper ticks
	logMu.Lock()
	text := log.String()
	logMu.Unlock()
	if strings.Contains(text, "renewing a lease failed") {
		t.Fatalf("a renewal cut at the lease's expiry was logged as a failure:\n%s", text)
	}
	clk.Advance(ttl) // the expiry by the Store's clock ends the handler, as always
	within(t, "the context ended at the expiry", func() bool { return j.ctx.Err() != nil })
	if cause := context.Cause(j.ctx); cause != errLeaseExpired {
		t.Fatalf("cause %v, want errLeaseExpired", cause)
	}
}

// fakeHeartStore is a heartStore: heartbeats answer with beat, registrations
// wait for a value on register.
type fakeHeartStore struct {
	beat      func(n int32) error
	beats     atomic.Int32
	registers atomic.Int32
	register  chan error
	quit      chan struct{} // closed at the test's end: registrations fail
}

// HeartbeatWorker counts the heartbeat and answers with f.beat.
func (f *fakeHeartStore) HeartbeatWorker(context.Context, HeartbeatWorkerArgs) (time.Time, error) {
	return time.Time{}, f.beat(f.beats.Add(1))
}

// RegisterWorker counts the call and waits for its answer on f.register.
func (f *fakeHeartStore) RegisterWorker(context.Context, RegisterWorkerArgs) (RegisterOutcome, error) {
	f.registers.Add(1)
	select {
	case err := <-f.register:
		return 0, err
	case <-f.quit:
		return 0, ErrClosed
	}
}

// TestHeartLapseStopsClaims: a lapse (a heartbeat answering
// ErrNotRegistered, or a claim reporting it) stops claims while the heart
// registers again, through failed tries; once registered, claims resume
// (a wake-up, though the last claim had found no work) and the claimer is
// kicked.
func TestHeartLapseStopsClaims(t *testing.T) {
	for _, tc := range []struct {
		name      string
		byClaim   bool // a claim found the lapse, not a heartbeat
		failTries int  // registrations that fail before one passes
	}{
		{"a heartbeat finds it", false, 0},
		{"a heartbeat finds it, registering fails first", false, 2},
		{"a claim finds it", true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sl := newSlots(2)
			n, gen := sl.reserve()
			sl.unreserve(n)
			sl.noMoreWork(gen, time.Time{}) // the last claim found nothing
			store := &fakeHeartStore{register: make(chan error), quit: make(chan struct{})}
			// Heartbeats find the lapse, or (a claim found it) fail for a
			// transient reason: either way none proves the registration,
			// and only registering again can restore it.
			var lapse atomic.Bool
			lapse.Store(!tc.byClaim)
			store.beat = func(int32) error {
				if lapse.Load() {
					return fmt.Errorf("%w: instance i", ErrNotRegistered)
				}
				return errUnavailable
			}
			claims := &noClaims{}
			h := newHeart(store, RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "i", TTL: 15 * time.Millisecond}, sl, claims, partsLog())
			stop, done := make(chan struct{}), make(chan struct{})
			go func() { defer close(done); h.run(stop) }()
			defer func() { close(stop); close(store.quit); <-done }()
			if tc.byClaim {
				h.lapsed(h.registration())
			}
			for i := range tc.failTries + 1 {
				within(t, "a registration", func() bool { return store.registers.Load() == int32(i+1) })
				sl.wakeUp() // work may be claimable: only the lapse holds claims back
				if n, _ := sl.reserve(); n != 0 {
					t.Fatalf("a claim took %d slots while the registration had lapsed", n)
				}
				if i < tc.failTries {
					store.register <- errUnavailable
				}
			}
			// Registered again: nothing held back any more, even though
			// the last claim had found no work.
			_, gen = sl.reserve()
			sl.noMoreWork(gen, time.Time{})
			kicks := claims.kicks.Load()
			lapse.Store(false)
			store.register <- nil
			within(t, "the claimer kicked", func() bool { return claims.kicks.Load() > kicks })
			if n, _ := sl.reserve(); n != 2 {
				t.Fatalf("after registering again a claim took %d slots, want 2", n)
			}
		})
	}
}

// TestKeeperStartsAtItsFirstLook: a job settled before its keeper's first
// look (a renewal, the expiry or the tick) never runs a keeper: no renewal,
// not another look at the clock; a job that lives on is renewed when its
// renewal falls due, and ended at its expiry when renewals fail.
func TestKeeperStartsAtItsFirstLook(t *testing.T) {
	t.Run("settled first", func(t *testing.T) {
		clk := newClock()
		renewer := &fakeRenewer{renew: renewOK}
		k, looks := testKeeper(t, renewer, clk, 30*time.Second)
		k.tick = time.Hour // the first look would be the renewal's, by the fake clock
		j := k.newJob(partsLease(clk.Now().Add(30 * time.Second)))
		j.startKeeper()
		before := looks.Load()
		j.settle()
		clk.Advance(time.Minute)
		time.Sleep(30 * time.Millisecond)
		if renewer.calls.Load() != 0 || looks.Load() != before {
			t.Fatalf("%d renewals and %d looks at the clock after the job settled; want none", renewer.calls.Load(), looks.Load()-before)
		}
	})
	t.Run("renewed when due", func(t *testing.T) {
		clk := newClock()
		renewer := &fakeRenewer{renew: renewOK}
		k, _ := testKeeper(t, renewer, clk, 30*time.Second)
		j := k.newJob(partsLease(clk.Now().Add(30 * time.Second)))
		j.startKeeper()
		defer j.settle()
		time.Sleep(10 * time.Millisecond) // a few ticks: nothing due yet
		if n := renewer.calls.Load(); n != 0 {
			t.Fatalf("%d renewals before one was due", n)
		}
		clk.Advance(10*time.Second + time.Millisecond) // LeaseTTL/3
		within(t, "the renewal due at LeaseTTL/3", func() bool { return renewer.calls.Load() == 1 })
	})
	t.Run("ended at expiry", func(t *testing.T) {
		clk := newClock()
		renewer := &fakeRenewer{renew: func(context.Context, RenewLeaseArgs) (time.Time, error) { return time.Time{}, errUnavailable }}
		k, _ := testKeeper(t, renewer, clk, 30*time.Second)
		j := k.newJob(partsLease(clk.Now().Add(30 * time.Second)))
		j.startKeeper()
		defer j.settle()
		clk.Advance(31 * time.Second)
		within(t, "the handler's context ended", func() bool { return j.ctx.Err() != nil })
		if !errors.Is(context.Cause(j.ctx), errLeaseExpired) || !j.isLost() {
			t.Fatalf("cause %v, lost %v; want errLeaseExpired, lost", context.Cause(j.ctx), j.isLost())
		}
	})
}

// TestHeartRegistersOnceAfterAStall: a stall past the TTL found by both the
// heart and a claim (one that began under the registration the stall ended)
// registers once, whichever reports first; a lapse a claim finds under the
// new registration registers again.
func TestHeartRegistersOnceAfterAStall(t *testing.T) {
	for _, tc := range []struct {
		name        string
		claimBefore bool // the claim reports before the heart's register answers
	}{
		{"the claim reports while the heart registers", true},
		{"the claim reports after the heart registered", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sl := newSlots(1)
			store := &fakeHeartStore{register: make(chan error), quit: make(chan struct{})}
			var lapse atomic.Bool
			lapse.Store(true)
			store.beat = func(int32) error {
				if lapse.Load() {
					return fmt.Errorf("%w: instance i", ErrNotRegistered)
				}
				return nil
			}
			h := newHeart(store, RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "i", TTL: 15 * time.Millisecond}, sl, &noClaims{}, partsLog())
			stale := h.registration() // a claim begins under the registration the stall ends
			stop, done := make(chan struct{}), make(chan struct{})
			go func() { defer close(done); h.run(stop) }()
			defer func() { close(stop); close(store.quit); <-done }()
			within(t, "the heart registering", func() bool { return store.registers.Load() == 1 })
			if tc.claimBefore {
				h.lapsed(stale)
			}
			lapse.Store(false)
			store.register <- nil
			within(t, "registered", func() bool { return h.registration() == stale+1 })
			if !tc.claimBefore {
				h.lapsed(stale)
			}
			time.Sleep(60 * time.Millisecond) // a dozen heartbeats
			if n := store.registers.Load(); n != 1 {
				t.Fatalf("%d registrations after one stall, want 1", n)
			}
			if n, _ := sl.reserve(); n != 1 {
				t.Fatalf("claims held back after the registration: %d slots", n)
			}
			sl.unreserve(1)
			// Under the new registration, a claim's lapse registers again.
			h.lapsed(h.registration())
			within(t, "a second registration", func() bool { return store.registers.Load() == 2 })
			store.register <- nil
		})
	}
}

// hearingPart is a part of the worker whose write gets through, telling
// the others that the database answers.
type hearingPart struct {
	name string
	hear func(t *testing.T, w *runner) // starts the part, over a fake whose writes get through
	kick bool                          // the part kicks a claimer waiting to retry
}

// hearingParts are a heartbeat, a renewal and a claim getting through.
func hearingParts() []hearingPart {
	return []hearingPart{
		{"a heartbeat", func(t *testing.T, w *runner) {
			store := &fakeHeartStore{beat: func(int32) error { return nil }, register: make(chan error), quit: make(chan struct{})}
			w.heart.store, w.heart.every = store, time.Millisecond
			stop, done := make(chan struct{}), make(chan struct{})
			go func() { defer close(done); w.heart.run(stop) }()
			t.Cleanup(func() { close(stop); close(store.quit); <-done })
		}, true},
		{"a renewal", func(t *testing.T, w *runner) {
			clk := newClock()
			w.keeper.renewer, w.keeper.now, w.keeper.tick = &fakeRenewer{renew: renewOK}, clk.Now, time.Millisecond
			j := w.keeper.newJob(partsLease(clk.Now().Add(time.Millisecond))) // its renewal is due at once
			done := make(chan struct{})
			go func() { defer close(done); j.keep(clk.Now()) }()
			t.Cleanup(func() { j.settle(); <-done })
		}, true},
		{"a claim", func(t *testing.T, w *runner) {
			c := w.claims
			c.store = &fakeClaimStore{claim: func(context.Context, engine.ClaimParams) ([]Lease, time.Time, error) {
				return nil, time.Time{}, nil
			}}
			c.sub, c.launch = quietSub{}, func(Lease) bool { return true }
			c.lapsed, c.regEpoch = func(uint64) {}, func() uint64 { return 0 }
			ctx, cancel := context.WithCancel(context.Background())
			c.done = ctx.Done()
			ran := make(chan error, 1)
			go func() { ran <- c.run(ctx) }()
			t.Cleanup(func() { cancel(); c.kick(); <-ran })
		}, false},
	}
}

// partsRunner is a runner of leases of their own (renewed), its parts
// wired by newRunner, over a Store the test replaces part by part.
func partsRunner(t *testing.T) *runner {
	s, _ := newStore(t)
	w, err := newRunner(s, WorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "i", TTL: time.Minute, LeaseTTL: time.Minute,
		Handler: func(context.Context, Lease) ([]byte, error) { return nil, nil }})
	must(t, err)
	return w
}

// TestRunnerHearsTheDatabaseEverywhere: a heartbeat, a renewal or a claim
// that gets through pulls forward the outcomes waiting out a backoff because
// the database was away (and the first two kick a claimer waiting to retry a
// failed claim). After a failover the parts reach the new primary one by
// one: the first to get through must not leave an outcome waiting seconds
// more. The parts are RunWorker's own, wired by newRunner, over fakes.
func TestRunnerHearsTheDatabaseEverywhere(t *testing.T) {
	for _, tc := range hearingParts() {
		t.Run(tc.name, func(t *testing.T) {
			w := partsRunner(t)
			// An outcome whose write found the database away, waiting out
			// a long backoff; a claimer waiting to retry.
			clk := newClock()
			p := &pendingOutcome{j: w.keeper.newJob(partsLease(clk.Now().Add(time.Minute))), away: true, heard: true, due: time.Now().Add(time.Hour)}
			w.settler.queue = append(w.settler.queue, p)
			w.claims.setFailing(tc.kick)
			tc.hear(t, w)
			within(t, "the outcome pulled forward", func() bool {
				w.settler.mu.Lock()
				defer w.settler.mu.Unlock()
				return !p.heard && p.heardPulled && !p.due.After(time.Now())
			})
			if kicked := len(w.claims.kickCh) == 1; kicked != tc.kick {
				t.Fatalf("claimer kicked: %v, want %v", kicked, tc.kick)
			}
		})
	}
}

// TestSettlerPullOnAnotherPartsWord: a try pulled forward because another
// part's write got through may fail all the same (the settler's own
// connection still broken, or the pool full of reconnecting ones); the
// settler's own write getting through next still pulls the outcome forward,
// rather than leave it to wait out its backoff (up to maxRetryWait).
func TestSettlerPullOnAnotherPartsWord(t *testing.T) {
	for _, tc := range hearingParts() {
		t.Run(tc.name, func(t *testing.T) {
			w := partsRunner(t)
			var healed atomic.Bool // the settler's own writes get through
			store := &fakeSettleStore{answer: func(int, engine.Outcome) error {
				if healed.Load() {
					return nil
				}
				return errUnavailable
			}}
			st := w.settler
			st.store, st.claims = store, &noClaims{}
			runSettler(t, st)
			clk := newClock()
			waiting := w.keeper.newJob(partsLease(clk.Now().Add(time.Minute)))
			st.add(waiting, []byte("waiting"), nil)
			within(t, "the first try failed", func() bool {
				st.mu.Lock()
				defer st.mu.Unlock()
				if len(st.queue) != 1 || !st.queue[0].away {
					return false
				}
				st.queue[0].tries = 20 // after many failed tries: a backoff of maxRetryWait
				st.queue[0].due = time.Now().Add(time.Hour)
				return true
			})
			tc.hear(t, w)
			// The pulled try failed: the outcome waits out its backoff.
			var due time.Time
			within(t, "the pulled try failed", func() bool {
				calls, _ := store.snapshot()
				st.mu.Lock()
				defer st.mu.Unlock()
				if len(calls) < 2 || len(st.queue) != 1 || !st.queue[0].due.After(time.Now()) {
					return false
				}
				due = st.queue[0].due
				return true
			})
			healed.Store(true)
			st.add(w.keeper.newJob(partsLease(clk.Now().Add(time.Minute))), []byte("other"), nil)
			within(t, "the waiting outcome written", waiting.isSettled)
			if !time.Now().Before(due) {
				t.Fatal("the waiting outcome waited out its backoff after the settler's own write got through")
			}
		})
	}
}
