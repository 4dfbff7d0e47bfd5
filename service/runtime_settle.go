package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/rosterdb/roster/internal/engine"
)

// The settler writes finished handlers' outcomes: everything that finished
// while the previous batch was being written goes into the next one, with a
// claim for the slots free at that moment, in one engine Settle (SQLite: one
// commit; PostgreSQL: a statement per part). Each outcome is fenced on its
// own lease; one that fails for a transient reason is tried again with
// backoff (its lease still renewed by its keeper) until it is written or its
// lease is found lost.

// Bounds of one batch of outcomes: a count, and bytes of results and reasons
// (one outcome is always taken, whatever its size).
const (
	maxSettleBatch = 256
	maxSettleBytes = 64 << 20
)

// maxUnknownTries bounds the tries of an outcome that keeps failing with an
// error that is neither transient nor the database refusing the row (after
// them it is taken as refused), and the look-ups of an outcome of an unknown
// try that keep failing so (after them it is dropped: its lease ended).
const maxUnknownTries = 8

// pendingOutcome is an outcome waiting to be written.
type pendingOutcome struct {
	j       *job
	outcome engine.Outcome
	tries   int
	due     time.Time // wall clock: not tried again before
	freed   bool      // its handler's slot was freed (at its first write)
	// unknown: a try failed without knowing whether it was written (the
	// connection broke): a later try that finds the lease ended looks
	// whether that try had written it.
	unknown bool
	// away: its last try failed because the database could not be reached
	// or could not write (transient): it is tried again as soon as the
	// database answers (another outcome's write gets through, or a look-up
	// finds one written), its backoff cut short. pulled: this try was such
	// a pull; if it fails too, the failure is the outcome's own (too large
	// for the disk left, a statement timeout), and it waits out its backoff,
	// not tried again every time the database answers.
	away, pulled bool
	// heard, heardPulled: the same for the word of the other parts (a
	// heartbeat, a renewal or a claim got through), with a pull of its own.
	// Their write says less of the settler's own path (its connection may
	// still be broken, or the pool full of reconnecting ones): a pull on
	// their word that fails leaves away, and the settler's own pull, as
	// they were. So at most three tries per backoff.
	heard, heardPulled bool
	// fenced: this round's write found its lease ended (after a try of
	// unknown result); a look-up that finds it not written counts the lease
	// lost. A look-up that fails clears it: the next round's write, or the
	// keeper, finds the lease ended again (and the keeper counts its own).
	fenced bool
	// refusedLookUps counts the look-ups that failed for an error that is
	// not transient (tries counts every failed try, writes included).
	refusedLookUps int
}

// errEndedUnknown is the Store's answer for an outcome whose lease a write
// found ended after an earlier try of unknown result: whether that try
// wrote it is to be looked up.
var errEndedUnknown = errors.New("roster: the lease ended after a try of unknown result")

// settleStore is what the settler needs from the Store: batches written,
// outcomes of an unknown try looked up, executions ended by such an outcome
// recorded, and leases a write found lost counted.
type settleStore interface {
	settle(outcomes []engine.Outcome, held []Lease, unknown []bool, claim *engine.ClaimParams) (errs []error, leases []Lease, next time.Time, claimErr error)
	writtenBefore(o engine.Outcome) error
	endedBefore(l Lease, o engine.Outcome)
	leaseLost()
}

var _ settleStore = (*Store)(nil)

// settleClaims is what the settler needs from the claimer: a claim for the
// slots free at a batch's write, to ride on it, and the handling of its
// answer; a kick when slots stay free; and word that the database answered.
type settleClaims interface {
	prepare() *batchClaim
	claimed(bc *batchClaim, leases []Lease, next time.Time, err error)
	kick()
	answered()
}

var _ settleClaims = (*claimer)(nil)

// settler is RunWorker's settler. It shares only the slots with the other
// parts: it frees a handler's slot as it writes the outcome.
type settler struct {
	store  settleStore
	slots  *slots
	claims settleClaims
	log    runLog
	wake   chan struct{} // buffered 1

	mu        sync.Mutex
	queue     []*pendingOutcome
	finishing bool      // shutdown: write what is left, until deadline
	deadline  time.Time // of finishing
	closed    bool      // outcomes arriving now are dropped
}

// newSettler returns a settler writing through store, freeing slots of sl,
// claiming through claims.
func newSettler(store settleStore, sl *slots, claims settleClaims, log runLog) *settler {
	return &settler{store: store, slots: sl, claims: claims, log: log, wake: make(chan struct{}, 1)}
}

// add queues a finished handler's outcome.
func (st *settler) add(j *job, result []byte, herr error) {
	o := outcomeOf(j.lease, result, herr)
	st.mu.Lock()
	if st.closed {
		st.mu.Unlock()
		st.log.Warn("roster: worker: a handler returned after shutdown; its outcome is dropped", "execution", j.lease.ExecutionID)
		st.slots.unreserve(1)
		j.settle()
		return
	}
	st.queue = append(st.queue, &pendingOutcome{j: j, outcome: o})
	st.mu.Unlock()
	st.poke()
}

// poke wakes the settler.
func (st *settler) poke() {
	select {
	case st.wake <- struct{}{}:
	default:
	}
}

// finish asks the settler to write what is left until deadline, and then to
// stop.
func (st *settler) finish(deadline time.Time) {
	st.mu.Lock()
	st.finishing = true
	st.deadline = deadline
	st.mu.Unlock()
	st.poke()
}

// settleLinger is how long the settler may wait for more outcomes before
// it writes a batch that is small beside the work in flight.
const settleLinger = time.Millisecond

// linger waits up to settleLinger while the outcomes queued are few beside
// the handlers still running: at high concurrency a batch then carries many
// outcomes and one claim for many slots, so each job costs the database a
// fraction of a statement. At low concurrency it never waits.
func (st *settler) linger() {
	deadline := time.Now().Add(settleLinger)
	for {
		st.mu.Lock()
		queued, finishing := len(st.queue), st.finishing
		st.mu.Unlock()
		busy := st.slots.held() - queued // slots whose handler still runs, or whose claim is out
		left := time.Until(deadline)
		if queued == 0 || finishing || busy <= 0 || left <= 0 {
			return
		}
		t := time.NewTimer(left)
		select {
		case <-st.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// run writes batches until finish's work is done.
func (st *settler) run() {
	for {
		st.linger()
		batch, wait, done := st.take()
		if done {
			return
		}
		if len(batch) > 0 {
			st.write(batch)
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-st.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// take removes the outcomes due now (bounded by count and bytes) from the
// queue; else it says how long to wait for the next one to be due, or that
// the settler is done (finishing with nothing left, or past its deadline:
// what is left is dropped, its leases expire and are reclaimed).
func (st *settler) take() (batch []*pendingOutcome, wait time.Duration, done bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	now := time.Now()
	if st.finishing && (len(st.queue) == 0 || now.After(st.deadline)) {
		st.closed = true
		for _, p := range st.queue {
			st.log.Warn("roster: worker: shutdown could not write an outcome in time; its lease will expire and be reclaimed",
				"execution", p.j.lease.ExecutionID)
			p.j.settle()
		}
		st.queue = nil
		return nil, 0, true
	}
	wait = time.Hour
	size := 0
	rest := st.queue[:0]
	for _, p := range st.queue {
		switch {
		case p.due.After(now):
			wait = min(wait, p.due.Sub(now))
			rest = append(rest, p)
		case len(batch) > 0 && (len(batch) == maxSettleBatch || size+p.outcome.Size() > maxSettleBytes):
			wait = 0
			rest = append(rest, p)
		default:
			batch = append(batch, p)
			size += p.outcome.Size()
		}
	}
	clear(st.queue[len(rest):])
	st.queue = rest
	if st.finishing {
		wait = min(wait, time.Until(st.deadline))
	}
	return batch, max(wait, 0), false
}

// requeue puts outcomes back to be tried again.
func (st *settler) requeue(ps []*pendingOutcome) {
	if len(ps) == 0 {
		return
	}
	st.mu.Lock()
	st.queue = append(st.queue, ps...)
	st.mu.Unlock()
	st.poke()
}

// pullForward makes the queued outcomes that wait out a backoff because the
// database was away due now: a write of the settler's just got through, so
// it is back, and they need not wait up to seconds more. Outcomes whose
// tries failed otherwise keep their backoff, and so does one whose pulled
// try failed again: at most one try is pulled this way per failed try with
// backoff.
func (st *settler) pullForward() {
	st.pull(func(p *pendingOutcome) bool {
		if !p.away {
			return false
		}
		p.away, p.heard, p.pulled = false, false, true
		return true
	})
}

// heardElsewhere is pullForward on the word of another part of the worker:
// a heartbeat, a renewal or a claim got through. At most one try is pulled
// this way per failed try with backoff, and its failure leaves the
// settler's own pull in place.
func (st *settler) heardElsewhere() {
	st.pull(func(p *pendingOutcome) bool {
		if !p.heard {
			return false
		}
		p.heard, p.heardPulled = false, true
		return true
	})
}

// pull makes due now the queued outcomes waiting out a backoff that take
// reports pulled (take records the pull).
func (st *settler) pull(take func(p *pendingOutcome) bool) {
	st.mu.Lock()
	now, pulled := time.Now(), false
	for _, p := range st.queue {
		if p.due.After(now) && take(p) {
			p.due = now
			pulled = true
		}
	}
	st.mu.Unlock()
	if pulled {
		st.poke()
	}
}

// retryLater counts a failed try of p and sets when to try again, with
// backoff.
func (p *pendingOutcome) retryLater() *pendingOutcome {
	p.tries++
	b := backoff{n: p.tries - 1}
	p.due = time.Now().Add(b.next())
	return p
}

// written settles p, whose outcome is written, and says so at Debug: an
// operator tracing a run, or a test reconciling what was acknowledged, can
// see it (the record is built only when enabled).
func (st *settler) written(p *pendingOutcome) {
	if st.log.Enabled(context.Background(), slog.LevelDebug) {
		st.log.Debug("roster: worker: outcome written", "execution", p.j.lease.ExecutionID,
			"epoch", p.j.lease.Epoch, "lease", p.j.lease.LeaseID, "failed", p.outcome.Fail)
	}
	p.j.settle()
}

// write settles one batch, with a claim for the slots free now (those of
// the batch's handlers among them), and sorts each outcome: written, dropped
// (lease lost), or kept to be tried again. Outcomes whose lease ended after
// an earlier try of unknown result are looked up last: a read against a
// database that has just come back must not hold back the outcomes written
// now, nor the claim riding on them.
func (st *settler) write(batch []*pendingOutcome) {
	freed := 0
	for _, p := range batch {
		if !p.freed {
			p.freed = true
			freed++
		}
	}
	st.slots.unreserve(freed)
	// An outcome whose lease the keeper found lost or expired while it
	// waited is dropped (the execution may be another worker's by now),
	// unless an earlier try that ended without knowing whether it wrote the
	// outcome did write it: that write is what ended the lease.
	live := batch[:0]
	var lookUp []*pendingOutcome
	for _, p := range batch {
		switch {
		case !p.j.isLost():
			live = append(live, p)
		case p.unknown:
			lookUp = append(lookUp, p)
		default:
			st.log.warn("roster: worker: the lease was lost before the outcome could be written; dropped", "execution", p.j.lease.ExecutionID)
			p.j.settle()
		}
	}
	var r round
	if len(live) > 0 {
		lookUp = append(lookUp, st.writeLive(live, &r)...)
	}
	st.lookUp(lookUp, &r)
	if r.written {
		st.pullForward()
	}
	st.requeue(r.again) // after the pull: a try that failed now keeps its backoff
	if len(live) == 0 || st.slots.hasFree() {
		// Slots stay free: the claimer, which may be waiting as a busy
		// worker waits (deaf to changes), claims or listens for them.
		st.claims.kick()
	}
}

// round is what one write's outcomes came to: whether one was written (the
// database answered), and those to try again later.
type round struct {
	written bool
	again   []*pendingOutcome
}

// retry counts a failed try of p, to be made again after its backoff; err
// says whether the database was away (then the database answering again
// pulls it forward, unless this try was such a pull: the settler's own
// pull, or one on another part's word, each once).
func (r *round) retry(p *pendingOutcome, err error) {
	p.away = transient(err) && !p.pulled
	p.heard = p.away && !p.heardPulled
	p.pulled, p.heardPulled = false, false
	r.again = append(r.again, p.retryLater())
}

// writeLive writes outcomes whose leases were not found lost, with a claim
// for the slots free now, and hands the claim's answer to the claimer. It
// returns the outcomes whose lease the write found ended after an earlier
// try of unknown result, to be looked up.
func (st *settler) writeLive(batch []*pendingOutcome, r *round) (lookUp []*pendingOutcome) {
	var claim *engine.ClaimParams
	bc := st.claims.prepare()
	if bc != nil {
		claim = &bc.params
	}
	outcomes := make([]engine.Outcome, len(batch))
	held := make([]Lease, len(batch))
	unknown := make([]bool, len(batch))
	for i, p := range batch {
		outcomes[i], held[i], unknown[i] = p.outcome, p.j.lease, p.unknown
	}
	errs, leases, next, claimErr := st.store.settle(outcomes, held, unknown, claim)
	written := false
	for i, p := range batch {
		err := errs[i]
		switch {
		case err == nil:
			written = true
			st.written(p)
		case errors.Is(err, errEndedUnknown):
			p.fenced = true
			lookUp = append(lookUp, p)
		case errors.Is(err, ErrLeaseLost):
			st.log.warn("roster: worker: the lease was lost before the outcome was written; dropped",
				"execution", p.j.lease.ExecutionID, "err", err)
			p.j.settle()
		case errors.Is(err, ErrClosed):
			p.j.settle()
		case transient(err) || (!errors.Is(err, ErrInvalidInput) && p.tries < maxUnknownTries):
			// Transient, or an error nobody knows: try again (the keeper
			// goes on renewing the lease meanwhile).
			st.log.warn("roster: worker: writing an outcome failed; will retry", "execution", p.j.lease.ExecutionID, "err", err)
			p.unknown = p.unknown || outcomeUnknown(err)
			r.retry(p, err)
		case !p.outcome.Fail:
			// The database refused this result or snooze (a rule of its
			// own, or an error that did not pass): record why, as the
			// attempt's failure, rather than lose the outcome.
			st.log.Error("roster: worker: the database refused an outcome; failing the attempt instead",
				"execution", p.j.lease.ExecutionID, "err", err, "snooze", p.outcome.Snooze)
			what := "result"
			if p.outcome.Snooze {
				what = "snooze"
			}
			p.outcome = engine.Outcome{Lease: p.outcome.Lease, Fail: true,
				Reason: failReason(fmt.Errorf("roster: the handler's %s could not be written: %w", what, err))}
			p.tries, p.due, p.unknown, p.refusedLookUps = 0, time.Time{}, false, 0
			p.away, p.pulled, p.heard, p.heardPulled = false, false, false, false
			r.again = append(r.again, p)
		default:
			st.log.Error("roster: worker: the database refused an outcome; its lease will expire and be reclaimed",
				"execution", p.j.lease.ExecutionID, "err", err)
			p.j.settle()
		}
	}
	if written {
		r.written = true
		st.claims.answered()
	}
	if bc != nil {
		st.claims.claimed(bc, leases, next, claimErr)
	}
	return lookUp
}

// lookUp reads, for each outcome whose lease was found ended after an
// earlier try of unknown result, whether that try wrote it: written, it is
// settled as such; not, it is dropped (its lease was lost); the read
// failing, it is tried again later (failing for an error that is not
// transient, up to maxUnknownTries times: the lease ended either way, and
// only the outcome's record is at stake, the Observer's count and the
// wake-up of claimers that writing it would have sent).
func (st *settler) lookUp(ps []*pendingOutcome, r *round) {
	written := false
	for _, p := range ps {
		err := st.store.writtenBefore(p.outcome)
		switch {
		case err == nil:
			st.store.endedBefore(p.j.lease, p.outcome)
			st.written(p)
			written = true
		case errors.Is(err, engine.ErrNoRows):
			if p.fenced {
				st.store.leaseLost()
			}
			st.log.warn("roster: worker: the lease was lost before the outcome could be written; dropped", "execution", p.j.lease.ExecutionID)
			p.j.settle()
		case errors.Is(err, ErrClosed):
			p.j.settle()
		default:
			if !transient(err) {
				p.refusedLookUps++
			}
			if p.refusedLookUps >= maxUnknownTries {
				// The lease ended either way: nothing is left to write.
				st.log.Error("roster: worker: reading whether an outcome was written keeps failing; dropped",
					"execution", p.j.lease.ExecutionID, "err", err)
				p.j.settle()
				continue
			}
			// The look-up failed: look again later.
			st.log.warn("roster: worker: reading whether an outcome was written failed; will retry", "execution", p.j.lease.ExecutionID, "err", err)
			p.fenced = false
			r.retry(p, err)
		}
	}
	if written {
		r.written = true
		st.claims.answered()
	}
}

// outcomeOf turns a handler's return into the outcome to write: a Snooze
// snoozes the execution; a result over the size limit fails the attempt
// instead.
func outcomeOf(l Lease, result []byte, herr error) engine.Outcome {
	o := engine.Outcome{Lease: leaseRef(l)}
	if herr == nil && len(result) > maxPayloadBytes {
		herr = fmt.Errorf("the handler's result of %d bytes exceeds the limit of 16 MiB", len(result))
	}
	if sn, ok := asSnooze(herr); ok {
		until := sn.until
		if until.IsZero() {
			until = time.Now().Add(sn.d)
		}
		o.Snooze, o.RunAtMs = true, until.UnixMilli()
		return o
	}
	if herr != nil {
		o.Fail, o.Reason = true, failReason(herr)
	} else {
		o.Result = result
	}
	return o
}

// outcomeUnknown reports whether a failed write may have been applied all
// the same: the connection broke, or the call gave up, before the outcome
// was known.
func outcomeUnknown(err error) bool {
	return errors.Is(err, ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
}

// settle writes outcomes (each fenced on its own lease; held[i] is
// outcomes[i]'s lease, for the Observer) and, when claim is set, claims; it
// returns each outcome's error (nil: written; ErrLeaseLost: its lease was
// lost, nothing written), the leases claimed, the earliest RunAt when the
// claim came up short, and the claim's error. unknown[i] says that an
// earlier try of outcome i ended without knowing whether it was written:
// when the lease is found ended, its error is errEndedUnknown, and the
// caller looks up (writtenBefore) whether that try wrote it.
func (s *Store) settle(outcomes []engine.Outcome, held []Lease, unknown []bool, claim *engine.ClaimParams) (errs []error, leases []Lease, next time.Time, claimErr error) {
	errs = make([]error, len(outcomes))
	if err := s.notClosed(); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs, nil, time.Time{}, err
	}
	res := s.eng.Settle(context.Background(), s.now(time.Time{}).UnixMilli(), outcomes, claim)
	requeued := false
	for i, err := range res.Errs {
		o := outcomes[i]
		switch {
		case errors.Is(err, engine.ErrNoRows) && unknown[i]:
			errs[i] = errEndedUnknown
		case err == nil && o.Snooze:
			requeued = true // a new earliest RunAt to wait for
		case err == nil && o.Fail:
			s.noteEnded(held[i].Namespace, held[i].Lane, true)
			requeued = true
		case err == nil:
			s.noteEnded(held[i].Namespace, held[i].Lane, false)
		case errors.Is(err, engine.ErrNoRows):
			s.leaseLost()
			errs[i] = fmt.Errorf("%w: lease %s (execution %s, epoch %d) is not the current, unexpired lease",
				ErrLeaseLost, o.Lease.LeaseID, o.Lease.ExecutionID, o.Lease.Epoch)
		default:
			errs[i] = s.fromWrite(err)
		}
	}
	if requeued {
		s.work.signal() // a retry may be claimable
	}
	if claim == nil {
		return errs, nil, time.Time{}, nil
	}
	leases, next, claimErr = s.claimResult(res.Claim, res.ClaimErr, *claim)
	return errs, leases, next, claimErr
}

// endedBefore records an execution whose attempt an earlier try of this
// worker's outcome ended (see writtenBefore): the Observer counts it, and a
// failed or snoozed attempt wakes the claimers (a retry may be claimable, or
// a new earliest RunAt waited for).
func (s *Store) endedBefore(l Lease, o engine.Outcome) {
	if !o.Snooze {
		s.noteEnded(l.Namespace, l.Lane, o.Fail)
	}
	if o.Fail || o.Snooze {
		s.work.signal()
	}
}

// leaseLost counts a lease that an outcome's write found lost.
func (s *Store) leaseLost() { s.cfg.observer.LeaseLost() }

// writtenBefore says what became of an outcome whose lease was found ended
// after an earlier try ended without knowing whether it was written: nil when
// that try wrote it (the lease ended with this very outcome), ErrNoRows when
// the lease was lost, or the error of the read (try again later).
func (s *Store) writtenBefore(o engine.Outcome) error {
	var outcome string
	err := s.read(context.Background(), func(ctx context.Context, q engine.Queries) error {
		var err error
		outcome, err = q.LeaseGetOutcome(ctx, o.Lease)
		return err
	})
	switch {
	case err != nil:
		return err
	case outcome != o.Name():
		return engine.ErrNoRows
	}
	s.log.Info("roster: worker: an outcome whose write had an unknown result was written by that try",
		"execution", o.Lease.ExecutionID, "lease", o.Lease.LeaseID, "outcome", outcome)
	return nil
}

// failReason is an error's text cut to a valid fail reason.
func failReason(err error) string {
	msg := []rune(err.Error())
	out := make([]rune, 0, len(msg))
	size := 0
	for _, r := range msg {
		if r == 0 {
			r = '?'
		}
		n := len(string(r))
		if size+n > maxFailReasonBytes {
			break
		}
		size += n
		out = append(out, r)
	}
	return string(out)
}
