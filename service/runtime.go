package service

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rosterdb/roster/internal/engine"
)

// WorkerArgs configure RunWorker.
type WorkerArgs struct {
	Namespace, WorkerID, InstanceID string
	Lanes, Capabilities             []string
	TTL                             time.Duration // the worker's TTL; it heartbeats at about TTL/3
	// LeaseTTL 0 (the default) gives leases bound to the worker's
	// registration: its heartbeats keep every lease it holds alive, and
	// nothing is written per lease. A positive LeaseTTL gives leases of
	// their own, each renewed at about LeaseTTL/3.
	LeaseTTL     time.Duration
	Concurrency  int           // handlers running at once; 0 = 1
	DrainTimeout time.Duration // 0 = 30 s: how long shutdown waits for running handlers
	// Handler runs one claimed execution. Its context is cancelled when the
	// lease is lost (reclaimed, cancelled, worker marked dead or swept), at
	// the lease's expiry by the Store's clock when it could not be renewed
	// (the database away), or when shutdown outlasts DrainTimeout. A nil
	// error completes the execution with the result; an error (or a panic)
	// fails it with its text.
	Handler func(ctx context.Context, l Lease) (result []byte, err error)
	// Ready, optional, is called once the worker is registered, before the
	// first claim.
	Ready func()
}

// Timings of the runtime.
const (
	// defaultWorkerPoll bounds how long an idle worker goes without looking
	// for work: the safety net under the wake-ups (this Store's signal, the
	// engine's change notices, the earliest RunAt it knows of).
	defaultWorkerPoll = time.Second
	// shutdownGrace is how long shutdown waits for handlers that ignore
	// their cancelled context after the drain timeout, and for the last
	// outcomes and releases to be written.
	shutdownGrace = 5 * time.Second
	// maxRetryWait caps the backoff between tries of a failed write.
	maxRetryWait = 2 * time.Second
)

// RunWorker is a whole worker process's loop. It registers (invalid arguments,
// or an instance alive under another worker id, return at once with
// ErrInvalidInput / ErrConflict), calls Ready, keeps the registration alive
// (heartbeats at about TTL/3), and claims executions of its lanes while it is
// registered and a handler slot is free, in batches when several are. Each
// claimed execution runs Handler while its lease is renewed at about
// LeaseTTL/3. A nil error completes the execution with the result, an error or
// a panic fails it with its text.
//
// Under faults:
//   - An outcome is retried (backoff with jitter) through every transient
//     error until it is written, or until its lease is found lost
//     (ErrLeaseLost), and the lease goes on being renewed meanwhile. Outcomes
//     written together are fenced one by one.
//   - A handler starts only for a lease whose claim committed, and its
//     context ends at the lease's expiry by the Store's clock (the last
//     renewal that succeeded) even when the database cannot be reached.
//   - A lapsed registration (the process stalled, the database was away)
//     stops claims until RunWorker has registered again; handlers whose
//     leases hold go on.
//   - While the database is unreachable it keeps its handlers running while
//     their leases hold, stops claiming, logs (rate-limited) and recovers by
//     itself. It returns only when ctx ends (or at once for invalid
//     arguments or a conflicting registration, or with ErrClosed when the
//     Store is closed under it).
//   - With a logger enabled for Debug, each outcome written (its commit
//     acknowledged) is logged: "roster: worker: outcome written", with the
//     execution, epoch, lease and whether it failed the attempt. Nothing is
//     built when Debug is off.
//   - An idle worker writes nothing; it wakes within milliseconds for work
//     added through this Store, through any Store on PostgreSQL
//     (LISTEN/NOTIFY) or on the same SQLite file (a change check that
//     writes nothing), and at the earliest RunAt of scheduled work.
//
// When ctx ends RunWorker stops claiming at once: no handler starts after
// that, and a lease claimed but not yet started is released. Running handlers
// get up to DrainTimeout; then their contexts are cancelled and their outcomes
// written only if their leases still hold. It marks the worker dead with
// reason "shutdown" and returns nil once every handler has returned, or 5 s
// after cancelling the stragglers.
func (s *Store) RunWorker(ctx context.Context, a WorkerArgs) error {
	if err := s.notClosed(); err != nil {
		return err
	}
	w, err := newRunner(s, a)
	if err != nil {
		return err
	}
	if err := w.registerFirst(ctx); err != nil || ctx.Err() != nil {
		return err
	}
	if a.Ready != nil {
		a.Ready()
	}
	return w.run(ctx)
}

// validate checks a and returns its lease TTL, drain timeout and handler
// slots, defaults applied.
func (a WorkerArgs) validate() (leaseTTL, drain time.Duration, slots int, err error) {
	if err := validWorkerKey(a.Namespace, a.InstanceID); err != nil {
		return 0, 0, 0, err
	}
	if err := validIdentifier("WorkerID", a.WorkerID); err != nil {
		return 0, 0, 0, err
	}
	if _, err := identifierSet("Lanes", a.Lanes); err != nil {
		return 0, 0, 0, err
	}
	if _, err := identifierSet("Capabilities", a.Capabilities); err != nil {
		return 0, 0, 0, err
	}
	if err := validTTL("TTL", a.TTL); err != nil {
		return 0, 0, 0, err
	}
	if a.Handler == nil {
		return 0, 0, 0, invalid("Handler", "must not be nil")
	}
	leaseTTL = a.LeaseTTL // 0: bound leases
	if leaseTTL != 0 {
		if err := validTTL("LeaseTTL", leaseTTL); err != nil {
			return 0, 0, 0, err
		}
	}
	switch {
	case a.Concurrency < 0:
		return 0, 0, 0, invalid("Concurrency", "%d is negative", a.Concurrency)
	case a.Concurrency > maxClaimBatch:
		return 0, 0, 0, invalid("Concurrency", "%d exceeds %d", a.Concurrency, maxClaimBatch)
	case a.DrainTimeout < 0:
		return 0, 0, 0, invalid("DrainTimeout", "%v is negative", a.DrainTimeout)
	}
	drain = a.DrainTimeout
	if drain == 0 {
		drain = 30 * time.Second
	}
	return leaseTTL, drain, max(a.Concurrency, 1), nil
}

// runner is one RunWorker. Its parts, each in a file of its own and each
// built over a narrow interface of what it needs (so that each can be built
// alone, with fakes), share nothing but the slots (runtime_slots.go):
//   - the claimer (runtime_claim.go, over a claimStore) claims while slots
//     are free and work is known to be claimable, and otherwise waits for a
//     wake-up;
//   - jobs (runtime_job.go, each with a keeper over a leaseRenewer) run a
//     handler each, with a keeper that renews the lease and ends the
//     handler's context when the lease is lost or expires;
//   - the settler (runtime_settle.go, over a settleStore) writes finished
//     handlers' outcomes in batches, retrying each until it is written or
//     its lease is lost, and claims for the freed slots in the same write;
//   - the heart (runtime_heart.go, over a heartStore) heartbeats and
//     registers again after a lapse.
type runner struct {
	// The runner's slots, embedded: w.mu is their lock (tests read the
	// wake-up generation, w.wantGen, under it).
	*slots
	s     *Store
	a     WorkerArgs
	drain time.Duration
	log   runLog

	claims  *claimer
	keeper  *keeper
	settler *settler
	heart   *heart

	jobsMu   sync.Mutex
	jobs     map[*job]struct{} // running handlers
	handlers sync.WaitGroup    // running handlers
	quit     chan struct{}     // closed at the very end: keepers stop

	regExpires atomic.Int64 // Unix ms: the registration's expiry, as the heart last proved it (0: lapsed)
}

// runLog is the logger of a RunWorker and its parts; warn rate-limits the
// failures that may repeat many times a second.
type runLog struct {
	*slog.Logger
	limit *engine.LogLimiter
}

// warn logs a failure that may repeat many times a second, rate-limited.
func (l runLog) warn(msg string, args ...any) {
	l.limit.Log(l.Logger, slog.LevelWarn, msg, args...)
}

// newRunner validates a and builds the runner and its parts over s.
func newRunner(s *Store, a WorkerArgs) (*runner, error) {
	leaseTTL, drain, n, err := a.validate()
	if err != nil {
		return nil, err
	}
	log := runLog{Logger: s.log.With("namespace", a.Namespace, "instance", a.InstanceID), limit: engine.NewLogLimiter(10 * time.Second)}
	now := func() time.Time { return s.now(time.Time{}) }
	w := &runner{
		slots: newSlots(n),
		s:     s, a: a, drain: drain, log: log,
		jobs: map[*job]struct{}{},
		quit: make(chan struct{}),
	}
	w.claims = newClaimer(s, w.slots, ClaimArgs{Namespace: a.Namespace, InstanceID: a.InstanceID, LeaseTTL: leaseTTL, Bound: leaseTTL == 0}, now, log)
	w.claims.poll = s.cfg.workerPoll
	w.claims.signal = s.work.wait
	w.claims.launch = w.launch
	w.keeper = &keeper{renewer: s, now: now, leaseTTL: leaseTTL, tick: keeperTick, answered: w.answered, log: log, quit: w.quit}
	if leaseTTL == 0 {
		w.keeper.holder = w.regExpiry
	}
	w.settler = newSettler(s, w.slots, w.claims, log)
	w.claims.heard = w.settler.heardElsewhere
	w.heart = newHeart(s, RegisterWorkerArgs{
		Namespace: a.Namespace, WorkerID: a.WorkerID, InstanceID: a.InstanceID,
		Lanes: a.Lanes, Capabilities: a.Capabilities, TTL: a.TTL,
	}, w.slots, heartWaker{w}, log)
	w.heart.alive = w.noteRegistration
	w.claims.lapsed = w.heart.lapsed
	w.claims.regEpoch = w.heart.registration
	return w, nil
}

// answered tells the parts that wait to retry that the database answered a
// write of this worker (a heartbeat, a renewal): a claimer waiting to retry
// a failed claim tries again at once, and outcomes waiting out a backoff
// because the database was away are written now. After a failover the
// parts' calls in flight reach the new primary one by one, each after its
// own wait: the first to get through must not leave the others waiting
// out backoffs of up to maxRetryWait. (A claim that gets through tells the
// settler itself; the settler's own writes pull its queue forward.)
func (w *runner) answered() {
	w.claims.answered()
	w.settler.heardElsewhere()
}

// heartWaker is what the heart reaches: the claimer's kick when the
// registration is restored, and the runner's answered.
type heartWaker struct{ w *runner }

// kick wakes the claimer.
func (h heartWaker) kick() { h.w.claims.kick() }

// answered tells every part waiting to retry.
func (h heartWaker) answered() { h.w.answered() }

// noteRegistration records the registration's expiry by the Store's clock
// as the heart last proved it (zero: it lapsed: every bound lease ended with
// it, and their handlers are cancelled at once).
func (w *runner) noteRegistration(expires time.Time) {
	w.regExpires.Store(expires.UnixMilli())
	if !expires.IsZero() || w.keeper.holder == nil {
		return
	}
	w.jobsMu.Lock()
	defer w.jobsMu.Unlock()
	for j := range w.jobs {
		if !j.isSettled() {
			j.lose(ErrLeaseLost)
		}
	}
}

// regExpiry is the registration's expiry as the heart last proved it: the
// expiry of every bound lease the worker holds (before its deadline).
func (w *runner) regExpiry() time.Time {
	ms := w.regExpires.Load()
	if ms == 0 {
		return time.Time{}
	}
	return msTime(ms)
}

// registerFirst registers the worker, retrying through transient failures
// (the database may not be up yet) until ctx ends. Invalid arguments, a
// conflicting registration and a closed Store return at once.
func (w *runner) registerFirst(ctx context.Context) error {
	var b backoff
	for {
		err := w.heart.register(ctx)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, ErrInvalidInput), errors.Is(err, ErrConflict), errors.Is(err, ErrClosed):
			return err
		case ctx.Err() != nil:
			return nil
		}
		w.log.warn("roster: worker: cannot register yet; will retry", "err", err)
		if !sleep(ctx, b.next()) {
			return nil
		}
	}
}

// run claims until ctx ends (or the Store closes), then shuts down. Every
// wait of the shutdown is bounded: a write stuck on a database that does not
// answer (a lock held elsewhere, a connection half-open) is abandoned, its
// goroutine left to finish when it can.
func (w *runner) run(ctx context.Context) error {
	w.claims.done = ctx.Done()
	w.claims.sub = w.s.eng.Subscribe(w.a.Namespace)
	defer w.claims.sub.Close()
	settled := make(chan struct{})
	go func() { defer close(settled); w.settler.run() }()
	heartStop, heartDone := make(chan struct{}), make(chan struct{})
	go func() { defer close(heartDone); w.heart.run(heartStop) }()
	go w.watchLost(w.quit)

	err := w.claims.run(ctx)
	// The stragglers, the last outcomes, the heart and the mark-dead share
	// one bound: shutdownGrace after the handlers were cancelled (or had
	// all returned).
	deadline := w.shutdown(err)
	w.settler.finish(deadline)
	if !waitUntil(settled, deadline) {
		w.log.Warn("roster: worker: writing the last outcomes is stuck; their leases will expire and be reclaimed")
	}
	close(heartStop)
	close(w.quit)
	if errors.Is(err, ErrClosed) {
		return err
	}
	// A heartbeat in flight could refresh the registration after the
	// mark-dead: wait for it, within the bound.
	waitUntil(heartDone, deadline)
	marked := make(chan struct{})
	go func() { defer close(marked); w.markDead(deadline) }()
	if !waitUntil(marked, deadline.Add(time.Second)) {
		w.log.Warn("roster: worker: marking the worker dead is stuck; it lapses at its TTL")
	}
	return nil
}

// waitUntil waits for done until deadline and reports whether it closed.
func waitUntil(done <-chan struct{}, deadline time.Time) bool {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// shutdown stops every handler start (a lease claimed from now on is
// released instead) and waits for the running handlers: up to DrainTimeout,
// then it cancels them and waits for them up to shutdownGrace more. It
// returns the end of that grace (counted from now when no handler had to be
// cancelled), which bounds the rest of the shutdown.
func (w *runner) shutdown(cause error) time.Time {
	w.slots.stop()
	w.claims.kick()
	drain := w.drain
	if errors.Is(cause, ErrClosed) {
		drain = 0 // the database is gone: nothing a handler does can be written
	}
	if waitFor(&w.handlers, drain) {
		return time.Now().Add(shutdownGrace)
	}
	w.log.Warn("roster: worker: drain timeout; cancelling running handlers", "running", w.running())
	w.cancelAll(errShutdown)
	deadline := time.Now().Add(shutdownGrace)
	if !waitFor(&w.handlers, shutdownGrace) {
		w.log.Warn("roster: worker: handlers ignored cancellation; their outcomes will be dropped", "running", w.running())
	}
	return deadline
}

// markDead ends the registration (reason "shutdown"), retrying transient
// failures until deadline: a worker that cannot be marked dead lapses at its
// TTL.
func (w *runner) markDead(deadline time.Time) {
	var b backoff
	for {
		err := w.s.MarkWorkerDead(context.Background(), MarkWorkerDeadArgs{Namespace: w.a.Namespace, InstanceID: w.a.InstanceID, Reason: ShutdownReason})
		switch {
		case err == nil, errors.Is(err, ErrNotRegistered), errors.Is(err, ErrClosed):
			return
		case !transient(err) || time.Now().After(deadline):
			w.log.Warn("roster: worker: mark dead on shutdown failed; the worker lapses at its TTL", "err", err)
			return
		}
		time.Sleep(b.next())
	}
}

// running counts the running handlers.
func (w *runner) running() int {
	w.jobsMu.Lock()
	defer w.jobsMu.Unlock()
	return len(w.jobs)
}

// cancelAll ends every running handler's context with cause.
func (w *runner) cancelAll(cause error) {
	w.jobsMu.Lock()
	defer w.jobsMu.Unlock()
	for j := range w.jobs {
		j.cancel(cause)
	}
}

// errShutdown ends the handlers that outlast the drain timeout.
var errShutdown = errors.New("roster: worker shutting down: drain timeout")

// transient reports whether a failed operation may succeed if tried again
// unchanged: the database unavailable, the storage refusing writes, the
// write queue full. Any other error is the operation's own.
func transient(err error) bool {
	return engine.Transient(err) || errors.Is(err, context.DeadlineExceeded)
}

// backoff is an exponential backoff with jitter, from 10 ms to maxRetryWait.
type backoff struct{ n int }

// next returns the next wait and lengthens the one after.
func (b *backoff) next() time.Duration {
	d := 10 * time.Millisecond << min(b.n, 8)
	b.n++
	return jitter(min(d, maxRetryWait))
}

// reset starts the backoff again from its shortest wait.
func (b *backoff) reset() { b.n = 0 }

// sleep waits d or until ctx ends, and reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// waitFor waits for wg up to d and reports whether it finished.
func waitFor(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}
