package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/rosterdb/roster/internal/engine"
)

// WorkerArgs configure RunWorker.
type WorkerArgs struct {
	Namespace, WorkerID, InstanceID string
	Lanes, Capabilities             []string
	TTL                             time.Duration // the worker's TTL; it heartbeats at about TTL/3
	LeaseTTL                        time.Duration // 0 = TTL; a held lease is renewed at about LeaseTTL/3
	Concurrency                     int           // handlers running at once; 0 = 1
	DrainTimeout                    time.Duration // 0 = 30 s: how long shutdown waits for running handlers
	// Handler runs one claimed execution. Its context is cancelled when the
	// lease is lost (reclaimed, cancelled, worker marked dead or swept), when
	// the registration lapses, or when shutdown outlasts DrainTimeout. A nil
	// error completes the execution with the result; an error (or a panic)
	// fails it with its text.
	Handler func(ctx context.Context, l Lease) (result []byte, err error)
	// Ready, optional, is called once the worker is registered, before the
	// first claim.
	Ready func()
}

// defaultWorkerPoll is how often an idle worker looks for work that no
// CreateExecution on its own Store announced (another process's, or a
// scheduled RunAt coming due).
const defaultWorkerPoll = 250 * time.Millisecond

// shutdownGrace bounds the wait for handlers that ignore their cancelled
// context after the drain timeout; their outcomes are then dropped.
const shutdownGrace = 2 * time.Second

// RunWorker is a whole worker process's loop. It registers (invalid arguments,
// or an instance alive under another worker id, return at once with
// ErrInvalidInput / ErrConflict), calls Ready, keeps the registration alive
// (heartbeats at about TTL/3, registers again after a lapse), and claims
// executions of its lanes, in batches when several handler slots are free,
// while it is registered. Each claimed execution runs Handler while its lease
// is renewed at about LeaseTTL/3; the outcome is written only while the lease
// holds (a result that arrives after the lease was lost is dropped and
// logged). A panic fails that execution with the panic's text and the worker
// goes on. It wakes within milliseconds when CreateExecution on the same Store
// adds work, and polls otherwise.
//
// When ctx ends, RunWorker stops claiming, lets running handlers finish (up to
// DrainTimeout; after it their contexts are cancelled and their outcomes
// written only if their leases still hold), marks the worker dead with reason
// "shutdown", and returns nil. It returns ErrClosed if the Store is closed
// under it.
func (s *Store) RunWorker(ctx context.Context, a WorkerArgs) error {
	if err := s.check(); err != nil {
		return err
	}
	leaseTTL, drain, slots, err := a.validate()
	if err != nil {
		return err
	}
	w := &runner{s: s, a: a, leaseTTL: leaseTTL, slots: slots, log: s.log.With("namespace", a.Namespace, "instance", a.InstanceID)}
	if err := w.register(ctx); err != nil {
		return err
	}
	if a.Ready != nil {
		a.Ready()
	}
	return w.run(ctx, drain)
}

func (a WorkerArgs) validate() (leaseTTL, drain time.Duration, slots int, err error) {
	if err := validWorkerKey(a.Namespace, a.InstanceID); err != nil {
		return 0, 0, 0, err
	}
	if err := validIdentifier("WorkerID", a.WorkerID); err != nil {
		return 0, 0, 0, err
	}
	if err := validTTL("TTL", a.TTL); err != nil {
		return 0, 0, 0, err
	}
	if a.Handler == nil {
		return 0, 0, 0, invalid("Handler", "must not be nil")
	}
	leaseTTL = a.LeaseTTL
	if leaseTTL == 0 {
		leaseTTL = a.TTL
	}
	if err := validTTL("LeaseTTL", leaseTTL); err != nil {
		return 0, 0, 0, err
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

// runner is one RunWorker's state.
type runner struct {
	s        *Store
	a        WorkerArgs
	leaseTTL time.Duration
	slots    int
	log      *slog.Logger

	mu       sync.Mutex
	running  map[*job]struct{}
	reserved int           // slots held for claims in flight
	freed    chan struct{} // signalled when a handler ends
	lapsed   bool          // the registration lapsed and is not yet renewed: no claims
	handlers sync.WaitGroup

	outcomes       chan outcome  // finished handlers' results, for the settler
	outcomesClosed bool          // no handler may send any more (shutdown)
	settled        chan struct{} // closed when the settler has written every outcome
}

// job is one claimed execution being handled.
type job struct {
	lease  Lease
	cancel context.CancelFunc
	lost   chan struct{} // closed once the lease is known lost
	once   sync.Once
}

func (j *job) markLost() { j.once.Do(func() { close(j.lost) }) }

func (j *job) isLost() bool {
	select {
	case <-j.lost:
		return true
	default:
		return false
	}
}

func (w *runner) register(ctx context.Context) error {
	_, err := w.s.RegisterWorker(ctx, RegisterWorkerArgs{
		Namespace: w.a.Namespace, WorkerID: w.a.WorkerID, InstanceID: w.a.InstanceID,
		Lanes: w.a.Lanes, Capabilities: w.a.Capabilities, TTL: w.a.TTL,
	})
	return err
}

func (w *runner) run(ctx context.Context, drain time.Duration) error {
	w.running = map[*job]struct{}{}
	w.freed = make(chan struct{}, 1)
	w.outcomes = make(chan outcome, w.slots)
	w.settled = make(chan struct{})
	go w.settler(ctx)
	stopKeep := make(chan struct{})
	keepDone := make(chan error, 1)
	go func() { keepDone <- w.keepAlive(ctx, stopKeep) }()

	err := w.claimLoop(ctx)
	w.shutdown(drain)
	w.closeOutcomes()
	<-w.settled
	close(stopKeep)
	if kerr := <-keepDone; err == nil {
		err = kerr
	}
	if errors.Is(err, ErrClosed) {
		return err
	}
	bg := context.WithoutCancel(ctx)
	if derr := w.s.MarkWorkerDead(bg, MarkWorkerDeadArgs{Namespace: w.a.Namespace, InstanceID: w.a.InstanceID, Reason: ShutdownReason}); derr != nil && !errors.Is(derr, ErrNotRegistered) {
		w.log.Warn("roster: worker: mark dead on shutdown failed", "err", derr)
	}
	return nil
}

// claimLoop claims while slots are free until ctx ends (nil) or the Store
// closes (ErrClosed).
func (w *runner) claimLoop(ctx context.Context) error {
	backoff := 10 * time.Millisecond
	for ctx.Err() == nil {
		free := w.reserve(w.slots)
		if free == 0 || w.isLapsed() {
			w.unreserve(free)
			w.idle(ctx, nil)
			continue
		}
		wake := w.s.work.wait() // taken before the claim: no announcement is missed
		leases, err := w.s.ClaimExecutions(ctx, w.claimArgs(), free)
		for _, l := range leases {
			w.start(ctx, l)
		}
		w.unreserve(free)
		switch {
		case err == nil:
			backoff = 10 * time.Millisecond
		case errors.Is(err, ErrNoWork):
			w.idle(ctx, wake)
		case errors.Is(err, ErrClosed):
			return err
		case ctx.Err() != nil:
		default:
			// ErrNotRegistered: the keep-alive registers again; anything
			// else is transient. Either way, wait a little.
			w.log.Debug("roster: worker: claim failed", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(jitter(backoff)):
			}
			backoff = min(2*backoff, time.Second)
		}
	}
	return nil
}

// idle waits for a reason to claim again: announced work, a freed slot, the
// poll interval, or the end of ctx.
func (w *runner) idle(ctx context.Context, wake <-chan struct{}) {
	t := time.NewTimer(jitter(w.s.cfg.workerPoll))
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-wake:
	case <-w.freed:
	case <-t.C:
	}
}

func (w *runner) active() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.running)
}

func (w *runner) claimArgs() ClaimArgs {
	return ClaimArgs{Namespace: w.a.Namespace, InstanceID: w.a.InstanceID, LeaseTTL: w.leaseTTL}
}

// reserve holds up to n free handler slots for a claim and returns how many.
func (w *runner) reserve(n int) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n = max(min(n, w.slots-len(w.running)-w.reserved), 0)
	w.reserved += n
	return n
}

// unreserve gives n held slots back (started handlers now hold theirs).
func (w *runner) unreserve(n int) {
	if n == 0 {
		return
	}
	w.mu.Lock()
	w.reserved -= n
	w.mu.Unlock()
	select {
	case w.freed <- struct{}{}:
	default:
	}
}

func (w *runner) isLapsed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lapsed
}

// start runs the handler of one lease, with its renewer.
func (w *runner) start(ctx context.Context, l Lease) {
	hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	j := &job{lease: l, cancel: cancel, lost: make(chan struct{})}
	w.mu.Lock()
	w.running[j] = struct{}{}
	w.mu.Unlock()
	w.handlers.Add(1)
	go func() {
		defer w.handlers.Done()
		stopRenew := make(chan struct{})
		renewed := make(chan struct{})
		go func() { defer close(renewed); w.renew(hctx, j, stopRenew) }()
		result, herr := w.call(hctx, l)
		close(stopRenew)
		<-renewed
		// The handler's slot now holds the next claim, made by the settler
		// with this outcome and the others that finished meanwhile.
		w.mu.Lock()
		delete(w.running, j)
		w.reserved++
		closed := w.outcomesClosed
		if !closed {
			w.outcomes <- outcome{j: j, result: result, herr: herr}
		}
		w.mu.Unlock()
		j.cancel()
		if closed {
			w.log.Warn("roster: worker: a handler returned after shutdown; its outcome is dropped", "execution", l.ExecutionID)
		}
	}()
}

// outcome is a handler's result waiting to be written.
type outcome struct {
	j      *job
	result []byte
	herr   error
}

// maxSettleBatch bounds the outcomes one write carries.
const maxSettleBatch = 256

// settler writes the outcomes of finished handlers in batches: everything
// that finished while the previous batch was being written goes into the
// next one, with a claim for the slots they free (one statement each for
// the completions and the claim). It returns when outcomes is closed and
// drained.
func (w *runner) settler(ctx context.Context) {
	defer close(w.settled)
	for first := range w.outcomes {
		batch := []outcome{first}
	fill:
		for len(batch) < maxSettleBatch {
			select {
			case o, ok := <-w.outcomes:
				if !ok {
					break fill
				}
				batch = append(batch, o)
			default:
				break fill
			}
		}
		for _, l := range w.settle(ctx, batch) {
			w.start(ctx, l)
		}
		w.unreserve(len(batch))
	}
}

// closeOutcomes ends the settler's input once no handler will send again.
func (w *runner) closeOutcomes() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.outcomesClosed {
		w.outcomesClosed = true
		close(w.outcomes)
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
	return w.a.Handler(ctx, l)
}

// renew extends the lease at about LeaseTTL/3 until stop; a lost lease
// cancels the handler.
func (w *runner) renew(ctx context.Context, j *job, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-time.After(jitter(w.leaseTTL / 3)):
		}
		_, err := w.s.RenewLease(ctx, RenewLeaseArgs{Lease: j.lease, TTL: w.leaseTTL})
		switch {
		case err == nil:
		case errors.Is(err, ErrLeaseLost):
			w.log.Info("roster: worker: lease lost; cancelling its handler", "execution", j.lease.ExecutionID)
			j.markLost()
			j.cancel()
			return
		case errors.Is(err, ErrClosed):
			j.cancel()
			return
		default:
			w.log.Warn("roster: worker: renewing a lease failed, will retry", "execution", j.lease.ExecutionID, "err", err)
		}
	}
}

// settle writes a batch of outcomes while their leases hold and, while the
// runner is still claiming, claims as many executions for the freed slots.
// It returns the leases so claimed.
func (w *runner) settle(ctx context.Context, batch []outcome) []Lease {
	var items []settleItem
	for _, o := range batch {
		if o.j.isLost() {
			w.s.cfg.observer.LeaseLost()
			w.log.Warn("roster: worker: dropping the outcome of a lost lease", "execution", o.j.lease.ExecutionID, "handler_err", o.herr)
			continue
		}
		items = append(items, settleItem{lease: o.j.lease, result: o.result, herr: o.herr})
	}
	var next *ClaimArgs
	if ctx.Err() == nil && !w.isLapsed() {
		a := w.claimArgs()
		next = &a
	}
	lost, leases, err := w.s.settleAndClaim(context.WithoutCancel(ctx), items, next, len(batch))
	if err != nil {
		w.log.Warn("roster: worker: writing outcomes failed; their leases will expire and be reclaimed", "outcomes", len(items), "err", err)
		return leases
	}
	for i, it := range items {
		if lost[i] {
			w.log.Warn("roster: worker: the lease was lost before the outcome was written; dropped", "execution", it.lease.ExecutionID, "handler_err", it.herr)
		}
	}
	return leases
}

// settleItem is one outcome for settleAndClaim.
type settleItem struct {
	lease  Lease
	result []byte
	herr   error // nil: complete with result; else fail with its text
}

// settleAndClaim completes or fails each item's execution and, when next is
// set, claims up to n executions for next's worker. lost[i] reports that
// item i's lease was no longer current (its outcome was dropped); a claim
// that finds no work or an unregistered worker claims nothing. Where one
// commit is worth sharing (SQLite) it is all one write; elsewhere
// (PostgreSQL) each part is one statement of its own: the completions, each
// failure, the claim.
func (s *Store) settleAndClaim(ctx context.Context, items []settleItem, next *ClaimArgs, n int) (lost []bool, leases []Lease, err error) {
	if err := s.check(); err != nil {
		return nil, nil, err
	}
	now := s.now(time.Time{}).UnixMilli()
	var refs []engine.LeaseRef
	var results [][]byte
	var completeAt, failAt []int
	reasons := make([]string, len(items))
	for i, it := range items {
		herr := it.herr
		if herr == nil && len(it.result) > maxPayloadBytes {
			herr = fmt.Errorf("the handler's result of %d bytes exceeds the limit of 16 MiB", len(it.result))
		}
		if herr != nil {
			reasons[i] = failReason(herr)
			failAt = append(failAt, i)
			continue
		}
		refs = append(refs, leaseRef(it.lease))
		results = append(results, it.result)
		completeAt = append(completeAt, i)
	}
	var params engine.ClaimParams
	if next != nil {
		params = engine.ClaimParams{Namespace: next.Namespace, InstanceID: next.InstanceID, NowMs: now,
			ExpiresAtMs: now + next.LeaseTTL.Milliseconds()}
		for range n {
			id, err := uuid.NewV7()
			if err != nil {
				return nil, nil, fmt.Errorf("roster: new lease id: %w", err)
			}
			params.LeaseIDs = append(params.LeaseIDs, id)
		}
	}
	var completed, failed int
	complete := func(ctx context.Context, q engine.Queries) error {
		done, err := q.LeaseCompleteMany(ctx, refs, results, now)
		if err != nil {
			return err
		}
		ok := make(map[uuid.UUID]bool, len(done))
		for _, id := range done {
			ok[id] = true
		}
		completed = 0
		for _, i := range completeAt {
			lost[i] = !ok[items[i].lease.ExecutionID]
			if !lost[i] {
				completed++
			}
		}
		return nil
	}
	fail := func(i int) func(ctx context.Context, q engine.Queries) error {
		return func(ctx context.Context, q engine.Queries) error {
			err := q.LeaseFail(ctx, leaseRef(items[i].lease), now, reasons[i])
			lost[i] = errors.Is(err, engine.ErrNoRows)
			if lost[i] {
				return nil
			}
			return err
		}
	}
	claim := func(ctx context.Context, q engine.Queries) error {
		leases = nil
		claimed, err := q.ExecutionClaim(ctx, params)
		if errors.Is(err, engine.ErrNoRows) {
			return nil // not registered any more: the keep-alive registers again
		}
		for _, c := range claimed {
			leases = append(leases, leaseFromRow(c, next.InstanceID))
		}
		return err
	}
	lost = make([]bool, len(items))
	if s.eng.SharedCommit() {
		err = s.write(ctx, func(ctx context.Context, q engine.Queries) error {
			if len(refs) > 0 {
				if err := complete(ctx, q); err != nil {
					return err
				}
			}
			for _, i := range failAt {
				if err := fail(i)(ctx, q); err != nil {
					return err
				}
			}
			if next == nil || n == 0 {
				return nil
			}
			return claim(ctx, q)
		})
	} else {
		if len(refs) > 0 {
			err = s.writeOne(ctx, complete)
		}
		for _, i := range failAt {
			if err == nil {
				err = s.writeOne(ctx, fail(i))
			}
		}
		if err == nil && next != nil && n > 0 {
			err = s.writeOne(ctx, claim)
		}
	}
	if err != nil {
		return lost, leases, err
	}
	for _, i := range failAt {
		if !lost[i] {
			failed++
		}
	}
	obs := s.cfg.observer
	for range completed {
		obs.Completed()
	}
	for range failed {
		obs.Failed()
	}
	for _, l := range lost {
		if l {
			obs.LeaseLost()
		}
	}
	if len(leases) > 0 {
		obs.Claimed(len(leases))
	}
	return lost, leases, nil
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

// cancelAll cancels every running handler (their leases may still hold).
func (w *runner) cancelAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for j := range w.running {
		j.cancel()
	}
}

// shutdown waits for running handlers up to drain, then cancels them and
// waits a bounded grace for them to return.
func (w *runner) shutdown(drain time.Duration) {
	done := make(chan struct{})
	go func() { w.handlers.Wait(); close(done) }()
	select {
	case <-done:
		return
	case <-time.After(drain):
	}
	w.log.Warn("roster: worker: drain timeout; cancelling running handlers", "running", w.active())
	w.cancelAll()
	select {
	case <-done:
	case <-time.After(shutdownGrace):
		w.log.Warn("roster: worker: handlers ignored cancellation; their outcomes will be dropped", "running", w.active())
	}
}

// keepAlive heartbeats at about TTL/3 until stop. On ErrNotRegistered (the
// TTL lapsed, or the worker was swept or marked dead) it cancels the running
// handlers, stops claims and registers again.
func (w *runner) keepAlive(ctx context.Context, stop <-chan struct{}) error {
	interval := max(w.a.TTL/3, time.Millisecond)
	for {
		select {
		case <-stop:
			return nil
		case <-time.After(jitter(interval)):
		}
		bg := context.WithoutCancel(ctx)
		_, err := w.s.HeartbeatWorker(bg, HeartbeatWorkerArgs{Namespace: w.a.Namespace, InstanceID: w.a.InstanceID})
		if errors.Is(err, ErrNotRegistered) {
			w.log.Warn("roster: worker: registration lapsed; cancelling handlers and registering again")
			w.mu.Lock()
			w.lapsed = true
			w.mu.Unlock()
			w.cancelAll()
			err = w.register(bg)
			if err == nil {
				w.mu.Lock()
				w.lapsed = false
				w.mu.Unlock()
			}
		}
		switch {
		case err == nil:
		case errors.Is(err, ErrClosed):
			return err
		default:
			w.log.Warn("roster: worker: heartbeat failed, will retry", "err", err)
		}
	}
}
