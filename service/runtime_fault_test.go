package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/rosterdb/roster/internal/engine"
)

// The runtime's promises under faults (RunWorker's doc comment), each on every engine where
// the fault applies. The faults here are real: another connection holding
// the database's write locks, a clock that jumps, a database rule that
// refuses a row. The fault suite (internal/faults) adds real processes and
// servers restarted, killed and taken away.

// faultEngine fails the first settleFails Settle calls with ErrUnavailable,
// as a connection lost mid-write would, and passes everything else to the
// real engine.
type faultEngine struct {
	engine.Engine
	settleFails atomic.Int64
	settles     atomic.Int64
}

func (f *faultEngine) Settle(ctx context.Context, nowMs int64, outcomes []engine.Outcome, claim *engine.ClaimParams) engine.SettleResult {
	f.settles.Add(1)
	if f.settleFails.Add(-1) >= 0 {
		res := engine.SettleResult{Errs: make([]error, len(outcomes)), ClaimErr: engine.ErrUnavailable}
		for i := range res.Errs {
			res.Errs[i] = engine.ErrUnavailable
		}
		return res
	}
	return f.Engine.Settle(ctx, nowMs, outcomes, claim)
}

// outageEngine fails every claim with ErrUnavailable while down, as a
// database that cannot be reached would (the rest passes to the real
// engine), and can wake its subscribers as an engine does when its listening
// connection is re-established.
type outageEngine struct {
	engine.Engine
	down       atomic.Bool
	claimFails atomic.Int64
	reconnect  chan struct{} // a send wakes every subscription, as a listener re-established does

	mu   sync.Mutex
	subs []*relaySub
	once sync.Once
}

// relay fans each reconnect out to every subscription open.
func (o *outageEngine) relay() {
	for range o.reconnect {
		o.mu.Lock()
		for _, sub := range o.subs {
			select {
			case sub.ch <- struct{}{}:
			default:
			}
		}
		o.mu.Unlock()
	}
}

func (o *outageEngine) ExecutionClaim(ctx context.Context, p engine.ClaimParams) (engine.ClaimResult, error) {
	if o.down.Load() {
		o.claimFails.Add(1)
		return engine.ClaimResult{}, engine.ErrUnavailable
	}
	return o.Engine.ExecutionClaim(ctx, p)
}

func (o *outageEngine) Settle(ctx context.Context, nowMs int64, outcomes []engine.Outcome, claim *engine.ClaimParams) engine.SettleResult {
	if claim != nil && o.down.Load() {
		res := o.Engine.Settle(ctx, nowMs, outcomes, nil)
		o.claimFails.Add(1)
		res.ClaimErr = engine.ErrUnavailable
		return res
	}
	return o.Engine.Settle(ctx, nowMs, outcomes, claim)
}

func (o *outageEngine) Subscribe(namespace string) engine.Subscription {
	sub := &relaySub{Subscription: o.Engine.Subscribe(namespace), ch: make(chan struct{}, 1), done: make(chan struct{})}
	o.once.Do(func() { go o.relay() })
	o.mu.Lock()
	o.subs = append(o.subs, sub)
	o.mu.Unlock()
	go func() {
		for {
			select {
			case <-sub.Subscription.C():
			case <-sub.done:
				return
			}
			select {
			case sub.ch <- struct{}{}:
			default:
			}
		}
	}()
	return sub
}

// relaySub is a subscription whose C also hears the outageEngine's reconnect.
type relaySub struct {
	engine.Subscription
	ch   chan struct{}
	done chan struct{}
	once sync.Once
}

func (r *relaySub) C() <-chan struct{} { return r.ch }
func (r *relaySub) Close() {
	r.once.Do(func() { close(r.done); r.Subscription.Close() })
}

// After claims failed long enough for their backoff to reach its cap
// (seconds), the worker claims again as soon as the database is heard to
// answer: its listening connection re-established (as after a failover), or
// a heartbeat of its own answered; not at the end of the backoff.
func TestRunWorkerClaimsAsSoonAsTheDatabaseAnswers(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ttl       time.Duration // the heart answers every ttl/3
		reconnect bool
	}{
		{"listener re-established", time.Hour, true},
		{"heartbeat answered", 600 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conformance(t, func(t *testing.T, b backend) {
				s := realStore(t, b, WithWorkerPoll(time.Hour))
				oe := &outageEngine{Engine: s.eng, reconnect: make(chan struct{}, 1)}
				oe.down.Store(true)
				s.eng = oe
				started := make(chan time.Time, 1)
				stop := runWorker(t, s, WorkerArgs{TTL: tc.ttl, Handler: func(context.Context, Lease) ([]byte, error) {
					started <- time.Now()
					return nil, nil
				}})
				create(t, s, CreateExecutionArgs{})
				// Nine failed claims in a row: the next wait is the backoff's cap.
				eventually(t, "nine failed claims", func() bool { return oe.claimFails.Load() >= 9 })
				up := time.Now()
				oe.down.Store(false)
				if tc.reconnect {
					oe.reconnect <- struct{}{}
				}
				select {
				case at := <-started:
					if d := at.Sub(up); d > 500*time.Millisecond {
						t.Fatalf("the handler started %v after the database answered again", d)
					}
				case <-time.After(20 * time.Second):
					t.Fatal("the worker never claimed")
				}
				must(t, stop())
			})
		})
	}
}

// A claim that keeps failing while the database answers everything else
// (work is created through the same Store throughout) still backs off:
// neither this Store's signal nor the changes heard make it claim at every
// create.
func TestRunWorkerFailedClaimsBackOffWhileWorkIsCreated(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		s := realStore(t, b, WithWorkerPoll(time.Hour))
		oe := &outageEngine{Engine: s.eng, reconnect: make(chan struct{}, 1)}
		oe.down.Store(true)
		s.eng = oe
		stop := runWorker(t, s, WorkerArgs{Handler: func(context.Context, Lease) ([]byte, error) { return nil, nil }})
		create(t, s, CreateExecutionArgs{})
		// Nine failed claims in a row: the backoff is at its cap (2 s).
		eventually(t, "nine failed claims", func() bool { return oe.claimFails.Load() >= 9 })
		before := oe.claimFails.Load()
		const window = 1500 * time.Millisecond
		for end := time.Now().Add(window); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
			create(t, s, CreateExecutionArgs{})
		}
		// At most one claim per floor (250 ms) of the capped backoff, and
		// one more for a wait under way when the window began.
		if n := oe.claimFails.Load() - before; n > int64(window/(250*time.Millisecond))+1 {
			t.Fatalf("%d failed claims in %v while work was created", n, window)
		}
		must(t, stop())
	})
}

// lyingEngine writes the first lies settles but answers ErrUnavailable for
// them, outcomes and claim alike, as a connection that broke after the
// commit and before its answer would.
type lyingEngine struct {
	engine.Engine
	lies atomic.Int64
}

func (l *lyingEngine) Settle(ctx context.Context, nowMs int64, outcomes []engine.Outcome, claim *engine.ClaimParams) engine.SettleResult {
	res := l.Engine.Settle(ctx, nowMs, outcomes, claim)
	if l.lies.Add(-1) < 0 {
		return res
	}
	for i := range res.Errs {
		res.Errs[i] = engine.ErrUnavailable
	}
	res.Claim, res.ClaimErr = engine.ClaimResult{}, engine.ErrUnavailable
	return res
}

// outcomeObserver counts completions, failures and lost leases.
type outcomeObserver struct {
	nopObserver
	completed, failed, lost atomic.Int64
}

func (o *outcomeObserver) Completed() { o.completed.Add(1) }
func (o *outcomeObserver) Failed()    { o.failed.Add(1) }
func (o *outcomeObserver) LeaseLost() { o.lost.Add(1) }

// An outcome written by a try whose answer was lost (ErrUnavailable after
// the commit) is found written when the next try finds its lease ended: it
// is counted once as written, never logged as dropped nor counted as a lost
// lease.
func TestRunWorkerOutcomeWrittenByAnUnknownTry(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("fail=%v", fail), func(t *testing.T) {
			conformance(t, func(t *testing.T, b backend) {
				var log bytes.Buffer
				var logMu sync.Mutex
				obs := &outcomeObserver{}
				s := realStore(t, b, WithObserver(obs), WithLogger(slog.New(slog.NewTextHandler(&lockedWriter{w: &log, mu: &logMu}, nil))))
				le := &lyingEngine{Engine: s.eng}
				le.lies.Store(1)
				s.eng = le
				id := create(t, s, CreateExecutionArgs{})
				stop := runWorker(t, s, WorkerArgs{Handler: func(context.Context, Lease) ([]byte, error) {
					if fail {
						return nil, errors.New("no luck")
					}
					return []byte("done"), nil
				}})
				want := ExecutionCompleted
				if fail {
					want = ExecutionFailed
				}
				eventually(t, "the outcome", func() bool { return getExecution(t, s, id).State == want })
				eventually(t, "the outcome counted", func() bool { return obs.completed.Load()+obs.failed.Load() == 1 })
				must(t, stop())
				logMu.Lock()
				defer logMu.Unlock()
				text := log.String()
				if strings.Contains(text, "dropped") || obs.lost.Load() != 0 {
					t.Fatalf("an outcome its first try wrote was called lost (%d leases lost counted):\n%s", obs.lost.Load(), text)
				}
				if !strings.Contains(text, "written by that try") {
					t.Fatalf("the log does not say the earlier try wrote the outcome:\n%s", text)
				}
			})
		})
	}
}

// keeperFirstEngine answers the first settle ErrUnavailable after it
// committed; it holds the next one until the job's keeper has found the
// lease ended (by that very commit) and said so in the log, and answers it
// ErrUnavailable too, writing nothing: the settler's next try comes after
// the keeper's verdict.
type keeperFirstEngine struct {
	engine.Engine
	settles atomic.Int64
	logged  func() string
}

func (k *keeperFirstEngine) Settle(ctx context.Context, nowMs int64, outcomes []engine.Outcome, claim *engine.ClaimParams) engine.SettleResult {
	switch k.settles.Add(1) {
	case 1:
		res := k.Engine.Settle(ctx, nowMs, outcomes, claim)
		for i := range res.Errs {
			res.Errs[i] = engine.ErrUnavailable
		}
		res.Claim, res.ClaimErr = engine.ClaimResult{}, engine.ErrUnavailable
		return res
	case 2:
		for deadline := time.Now().Add(10 * time.Second); !strings.Contains(k.logged(), "lease lost; cancelling its handler"); {
			if time.Now().After(deadline) {
				break // the test fails on its own: the keeper never saw it
			}
			time.Sleep(5 * time.Millisecond)
		}
		res := engine.SettleResult{Errs: make([]error, len(outcomes)), ClaimErr: engine.ErrUnavailable}
		for i := range res.Errs {
			res.Errs[i] = engine.ErrUnavailable
		}
		return res
	}
	return k.Engine.Settle(ctx, nowMs, outcomes, claim)
}

// An outcome written by a try whose answer was lost, whose keeper then
// found the lease ended before the settler tried again, is looked up too:
// counted once as written, never called dropped nor a lost lease.
func TestRunWorkerOutcomeWrittenByAnUnknownTryKeeperFirst(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("fail=%v", fail), func(t *testing.T) {
			conformance(t, func(t *testing.T, b backend) {
				var log bytes.Buffer
				var logMu sync.Mutex
				logged := func() string {
					logMu.Lock()
					defer logMu.Unlock()
					return log.String()
				}
				obs := &outcomeObserver{}
				s := realStore(t, b, WithObserver(obs), WithLogger(slog.New(slog.NewTextHandler(&lockedWriter{w: &log, mu: &logMu}, nil))))
				s.eng = &keeperFirstEngine{Engine: s.eng, logged: logged}
				id := create(t, s, CreateExecutionArgs{})
				stop := runWorker(t, s, WorkerArgs{LeaseTTL: 300 * time.Millisecond, Handler: func(context.Context, Lease) ([]byte, error) {
					if fail {
						return nil, errors.New("no luck")
					}
					return []byte("done"), nil
				}})
				want := ExecutionCompleted
				if fail {
					want = ExecutionFailed
				}
				eventually(t, "the outcome", func() bool { return getExecution(t, s, id).State == want })
				eventually(t, "the outcome counted", func() bool { return obs.completed.Load()+obs.failed.Load() == 1 })
				must(t, stop())
				text := logged()
				if !strings.Contains(text, "lease lost; cancelling its handler") {
					t.Fatalf("the keeper did not find the lease ended first:\n%s", text)
				}
				// The keeper's renewal that found the lease ended counts as a
				// lost lease (it was one, to a renewal); the outcome is what
				// matters.
				if strings.Contains(text, "dropped") || obs.completed.Load()+obs.failed.Load() != 1 {
					t.Fatalf("an outcome its first try wrote was called dropped:\n%s", text)
				}
				if !strings.Contains(text, "written by that try") {
					t.Fatalf("the log does not say the earlier try wrote the outcome:\n%s", text)
				}
			})
		})
	}
}

// An outcome whose write fails is retried until it is written, and its lease
// is renewed meanwhile: here the writes fail for three lease TTLs, so the
// outcome is written only because the renewals went on.
func TestRunWorkerRetriesOutcomeWhileRenewing(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		s := realStore(t, b)
		fe := &faultEngine{Engine: s.eng}
		fe.settleFails.Store(1 << 30)
		s.eng = fe
		id := create(t, s, CreateExecutionArgs{})
		stop := runWorker(t, s, WorkerArgs{LeaseTTL: 300 * time.Millisecond, Handler: func(context.Context, Lease) ([]byte, error) {
			return []byte("kept"), nil
		}})
		eventually(t, "several failed tries", func() bool { return fe.settles.Load() >= 4 })
		time.Sleep(900 * time.Millisecond) // three lease TTLs
		if e := getExecution(t, s, id); e.State != ExecutionRunning {
			t.Fatalf("while the outcome cannot be written: %+v", e)
		}
		fe.settleFails.Store(0)
		eventually(t, "the outcome written", func() bool { return getExecution(t, s, id).State == ExecutionCompleted })
		must(t, stop())
		if e := getExecution(t, s, id); string(e.Result) != "kept" || e.ReclaimCount != 0 {
			t.Fatalf("after the faults: %+v", e)
		}
	})
}

// The database refusing writes (locked elsewhere) delays an outcome, never
// drops it.
func TestRunWorkerOutcomeSurvivesLockedDatabase(t *testing.T) {
	conformanceShared(t, func(t *testing.T, b backend) {
		loc := b.fresh(t)
		s, _ := b.openImpatient(t, loc, WithClock(time.Now))
		id := create(t, s, CreateExecutionArgs{})
		started, finish := make(chan struct{}), make(chan struct{})
		stop := runWorker(t, s, WorkerArgs{TTL: 10 * time.Second, Handler: func(context.Context, Lease) ([]byte, error) {
			close(started)
			<-finish
			return []byte("done"), nil
		}})
		<-started
		unblock := b.blockWrites(t, loc)
		close(finish)
		time.Sleep(500 * time.Millisecond) // the settler tries and fails
		if e := getExecution(t, s, id); e.State != ExecutionRunning {
			t.Fatalf("while writes are refused: %+v", e)
		}
		unblock()
		eventually(t, "the outcome written", func() bool { return getExecution(t, s, id).State == ExecutionCompleted })
		must(t, stop())
		if e := getExecution(t, s, id); string(e.Result) != "done" {
			t.Fatalf("result %q", e.Result)
		}
	})
}

// A handler's context ends at its lease's expiry by the Store's clock when no
// renewal gets through, although the database cannot say so; the late
// outcome is not written.
func TestRunWorkerCancelsAtExpiryWhenAway(t *testing.T) {
	conformanceShared(t, func(t *testing.T, b backend) {
		loc := b.fresh(t)
		s, _ := b.openImpatient(t, loc, WithClock(time.Now))
		id := create(t, s, CreateExecutionArgs{MaxAttempts: 2})
		type ended struct {
			at    time.Time
			cause error
			l     Lease
		}
		started, done := make(chan Lease, 1), make(chan ended, 1)
		stop := runWorker(t, s, WorkerArgs{TTL: 10 * time.Second, LeaseTTL: 600 * time.Millisecond, Handler: func(ctx context.Context, l Lease) ([]byte, error) {
			started <- l
			<-ctx.Done()
			done <- ended{at: time.Now(), cause: context.Cause(ctx), l: l}
			return []byte("too late"), nil
		}})
		l := <-started
		unblock := b.blockWrites(t, loc)
		var e ended
		select {
		case e = <-done:
		case <-time.After(20 * time.Second):
			t.Fatal("the handler ran on past its lease")
		}
		if !errors.Is(e.cause, errLeaseExpired) {
			t.Fatalf("cause %v, want the lease's expiry", e.cause)
		}
		if e.at.Before(l.ExpiresAt) || e.at.After(l.ExpiresAt.Add(keeperTick+500*time.Millisecond)) {
			t.Fatalf("cancelled at %v, the lease expired at %v", e.at, l.ExpiresAt)
		}
		unblock()
		time.Sleep(300 * time.Millisecond)
		must(t, stop())
		if x := getExecution(t, s, id); x.State != ExecutionRunning || x.Result != nil {
			t.Fatalf("the expired lease's outcome was written: %+v", x)
		}
	})
}

// A lapsed registration (the clock jumped past the worker's TTL, with an
// hour of lease left) is not a lost lease: RunWorker registers again, the
// handler goes on and its outcome is written.
func TestRunWorkerLapseKeepsLeases(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, clock := b.newStore(t)
		id := create(t, s, CreateExecutionArgs{})
		started, finish := make(chan struct{}), make(chan struct{})
		var cancelled atomic.Bool
		stop := runWorker(t, s, WorkerArgs{TTL: 900 * time.Millisecond, LeaseTTL: time.Hour, Handler: func(hctx context.Context, l Lease) ([]byte, error) {
			close(started)
			select {
			case <-finish:
			case <-hctx.Done():
				cancelled.Store(true)
			}
			return []byte("kept"), nil
		}})
		<-started
		before, err := s.GetWorker(ctx, "ns", "i")
		must(t, err)
		clock.Advance(2 * time.Second)
		eventually(t, "the worker to register again", func() bool {
			w, err := s.GetWorker(ctx, "ns", "i")
			return err == nil && w.RegisteredAt.After(before.RegisteredAt)
		})
		if cancelled.Load() {
			t.Fatal("the lapse cancelled a handler whose lease holds")
		}
		close(finish)
		eventually(t, "the outcome", func() bool { return getExecution(t, s, id).State == ExecutionCompleted })
		must(t, stop())
		if e := getExecution(t, s, id); string(e.Result) != "kept" || cancelled.Load() {
			t.Fatalf("after the lapse: %+v (cancelled %v)", e, cancelled.Load())
		}
	})
}

// The database refusing everything for longer than the worker's TTL is not an
// error of the run: RunWorker keeps going, recovers by itself, and runs work
// created after the outage; Ready is called once.
func TestRunWorkerRecoversFromAnOutage(t *testing.T) {
	conformanceShared(t, func(t *testing.T, b backend) {
		loc := b.fresh(t)
		s, _ := b.openImpatient(t, loc, WithClock(time.Now))
		var readies atomic.Int64
		handled := make(chan uuid.UUID, 4)
		stop := runWorker(t, s, WorkerArgs{TTL: 600 * time.Millisecond, Ready: func() { readies.Add(1) },
			Handler: func(_ context.Context, l Lease) ([]byte, error) {
				handled <- l.ExecutionID
				return nil, nil
			}})
		unblock := b.blockWrites(t, loc)
		time.Sleep(1500 * time.Millisecond) // longer than the TTL: the registration lapses
		unblock()
		id := create(t, s, CreateExecutionArgs{})
		select {
		case got := <-handled:
			if got != id {
				t.Fatalf("handled %s, created %s", got, id)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the worker did not recover from the outage")
		}
		must(t, stop())
		if n := readies.Load(); n != 1 {
			t.Fatalf("Ready called %d times", n)
		}
	})
}

// A database rule refusing one outcome fails that attempt alone, with the
// reason; the outcomes written beside it are untouched.
func TestRunWorkerRefusedOutcomeAlone(t *testing.T) {
	conformanceShared(t, func(t *testing.T, b backend) {
		loc := b.fresh(t)
		s, _ := b.open(t, loc, WithClock(time.Now))
		if b.postgres {
			b.exec(t, loc, `CREATE FUNCTION refuse_boom() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN
					IF NEW.result = 'boom'::bytea THEN RAISE EXCEPTION 'refused'; END IF;
					RETURN NEW;
				END $$;
				CREATE TRIGGER refuse_boom BEFORE UPDATE ON executions FOR EACH ROW EXECUTE FUNCTION refuse_boom()`)
		} else {
			b.exec(t, loc, `CREATE TRIGGER refuse_boom BEFORE UPDATE OF result ON executions
				WHEN NEW.result = CAST('boom' AS BLOB) BEGIN SELECT RAISE(ABORT, 'refused'); END`)
		}
		var ids []uuid.UUID
		for _, p := range []string{"fine", "boom", "fine"} {
			ids = append(ids, create(t, s, CreateExecutionArgs{Payload: []byte(p)}))
		}
		release := make(chan struct{})
		var mu sync.Mutex
		waiting := 0
		stop := runWorker(t, s, WorkerArgs{Concurrency: 3, Handler: func(_ context.Context, l Lease) ([]byte, error) {
			mu.Lock()
			waiting++
			if waiting == 3 {
				close(release) // all three finish together: one batch
			}
			mu.Unlock()
			<-release
			return l.Payload, nil
		}})
		eventually(t, "every outcome", func() bool {
			return getExecution(t, s, ids[0]).State == ExecutionCompleted && getExecution(t, s, ids[1]).State == ExecutionFailed &&
				getExecution(t, s, ids[2]).State == ExecutionCompleted
		})
		must(t, stop())
		if e := getExecution(t, s, ids[1]); !strings.Contains(e.LastError, "could not be written") || !strings.Contains(e.LastError, "refused") {
			t.Fatalf("the refused outcome: %+v", e)
		}
	})
}

// An idle worker writes nothing and does not spin: with nothing to claim, its
// claims are reads, and it looks only when woken or polled.
func TestRunWorkerIdleWritesNothing(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		obs := &countingObserver{}
		s := realStore(t, b, WithObserver(obs))
		fe := &claimCounter{Engine: s.eng}
		s.eng = fe
		stop := runWorker(t, s, WorkerArgs{TTL: time.Hour, Handler: func(context.Context, Lease) ([]byte, error) { return nil, nil }})
		time.Sleep(200 * time.Millisecond) // registered and settled into idleness
		commits, claims := obs.commits.Load(), fe.claims.Load()
		time.Sleep(2 * time.Second)
		if n := fe.claims.Load() - claims; n > 3 {
			t.Errorf("%d claims in 2 s of idleness (the poll is 1 s)", n)
		}
		if !b.postgres {
			// PostgreSQL reports every statement in autocommit as a commit;
			// its idle claim is shown to take no transaction id in the
			// engine's tests.
			if n := obs.commits.Load() - commits; n != 0 {
				t.Errorf("%d commits in 2 s of idleness", n)
			}
		}
		must(t, stop())
	})
}

// claimCounter counts the engine's claims.
type claimCounter struct {
	engine.Engine
	claims atomic.Int64
}

func (c *claimCounter) ExecutionClaim(ctx context.Context, p engine.ClaimParams) (engine.ClaimResult, error) {
	c.claims.Add(1)
	return c.Engine.ExecutionClaim(ctx, p)
}

// countingObserver counts commits.
type countingObserver struct {
	nopObserver
	commits atomic.Int64
}

func (o *countingObserver) Committed(time.Duration, int) { o.commits.Add(1) }

// Work added through another Store on the same database wakes an idle worker
// (LISTEN/NOTIFY, or the SQLite change check): with an hour's poll, nothing
// else could. Behind PgBouncer, where LISTEN cannot work, the worker polls
// (every second), and says so once in its log.
func TestRunWorkerWakesAcrossStores(t *testing.T) {
	conformanceShared(t, func(t *testing.T, b backend) {
		loc := b.fresh(t)
		poll := WithWorkerPoll(time.Hour)
		var log bytes.Buffer
		var logMu sync.Mutex
		if b.pooled {
			poll = WithWorkerPoll(time.Second)
		}
		worker, _ := b.open(t, loc, WithClock(time.Now), poll, WithLogger(slog.New(slog.NewTextHandler(&lockedWriter{w: &log, mu: &logMu}, nil))))
		producer, _ := b.open(t, loc, WithClock(time.Now))
		got := make(chan uuid.UUID, 2)
		stop := runWorker(t, worker, WorkerArgs{Handler: func(_ context.Context, l Lease) ([]byte, error) {
			got <- l.ExecutionID
			return nil, nil
		}})
		time.Sleep(100 * time.Millisecond) // idle
		for range 2 {
			id := create(t, producer, CreateExecutionArgs{})
			select {
			case g := <-got:
				if g != id {
					t.Fatalf("handled %s, created %s", g, id)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the worker did not hear of work added by another Store")
			}
		}
		must(t, stop())
		logMu.Lock()
		defer logMu.Unlock()
		if n := strings.Count(log.String(), "LISTEN cannot work"); b.pooled && n != 1 {
			t.Fatalf("behind PgBouncer the worker said %d times that it polls:\n%s", n, log.String())
		}
	})
}

// An idle worker whose clock reads behind the producer's (another host, a
// clock offset measured a few milliseconds off) starts work created
// claimable at once as soon as it hears of it, not at its next poll: with an
// hour's poll, nothing else could start it. (Behind PgBouncer the worker
// polls every second: the claim is what is tested there.)
func TestRunWorkerClockBehindTheProducer(t *testing.T) {
	conformanceShared(t, func(t *testing.T, b backend) {
		for _, behind := range []time.Duration{2 * time.Millisecond, 20 * time.Millisecond, 200 * time.Millisecond} {
			loc := b.fresh(t)
			poll := WithWorkerPoll(time.Hour)
			if b.pooled {
				poll = WithWorkerPoll(time.Second)
			}
			worker, _ := b.open(t, loc, WithClock(func() time.Time { return time.Now().Add(-behind) }), poll)
			producer, _ := b.open(t, loc, WithClock(time.Now))
			got := make(chan uuid.UUID, 4)
			stop := runWorker(t, worker, WorkerArgs{Handler: func(_ context.Context, l Lease) ([]byte, error) {
				got <- l.ExecutionID
				return nil, nil
			}})
			for range 2 {
				time.Sleep(50 * time.Millisecond) // idle
				id := create(t, producer, CreateExecutionArgs{})
				select {
				case g := <-got:
					if g != id {
						t.Fatalf("handled %s, created %s", g, id)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("a worker %v behind the producer did not start its work", behind)
				}
			}
			must(t, stop())
		}
	})
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// A worker sleeping on scheduled work wakes at its RunAt, not at the poll.
func TestRunWorkerWakesAtRunAt(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		s := realStore(t, b, WithWorkerPoll(time.Hour))
		started := make(chan time.Time, 1)
		stop := runWorker(t, s, WorkerArgs{Handler: func(context.Context, Lease) ([]byte, error) {
			started <- time.Now()
			return nil, nil
		}})
		runAt := time.Now().Add(400 * time.Millisecond)
		create(t, s, CreateExecutionArgs{RunAt: runAt})
		select {
		case at := <-started:
			if at.Before(runAt.Truncate(time.Millisecond)) || at.After(runAt.Add(time.Second)) {
				t.Fatalf("started at %v, RunAt %v", at, runAt)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the worker did not wake at RunAt")
		}
		must(t, stop())
	})
}

// A handler that ignores its cancelled context holds shutdown for 5 s after
// the drain timeout at most; its lease ends with the mark-dead.
func TestRunWorkerShutdownAbandonsStragglers(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := realStore(t, b)
		id := create(t, s, CreateExecutionArgs{})
		started, gone := make(chan struct{}), make(chan struct{})
		t.Cleanup(func() { close(gone) })
		stop := runWorker(t, s, WorkerArgs{DrainTimeout: 50 * time.Millisecond, Handler: func(context.Context, Lease) ([]byte, error) {
			close(started)
			<-gone // ignores its context
			return []byte("late"), nil
		}})
		<-started
		began := time.Now()
		must(t, stop())
		if d := time.Since(began); d > 50*time.Millisecond+shutdownGrace+2*time.Second {
			t.Fatalf("shutdown took %v", d)
		}
		_, err := s.GetWorker(ctx, "ns", "i")
		wantErr(t, err, ErrNotRegistered)
		page, err := s.ListExpiredLeases(ctx, ListExpiredLeasesArgs{})
		must(t, err)
		if len(page.Leases) != 1 || page.Leases[0].ExecutionID != id {
			t.Fatalf("the straggler's lease did not end with the mark-dead: %+v", page.Leases)
		}
	})
}

// Once shutdown began, a lease claimed is released, not started: its
// execution waits again without having used an attempt.
func TestRunWorkerShutdownReleasesUnstarted(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		s := realStore(t, b)
		id := create(t, s, CreateExecutionArgs{})
		_, err := s.RegisterWorker(context.Background(), RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "i", Lanes: []string{"default"}, TTL: time.Hour})
		must(t, err)
		l, err := s.ClaimExecution(context.Background(), ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Hour})
		must(t, err)
		var ran atomic.Bool
		w, err := newRunner(s, WorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "i", Lanes: []string{"default"}, TTL: time.Hour,
			Handler: func(context.Context, Lease) ([]byte, error) { ran.Store(true); return nil, nil }})
		must(t, err)
		w.stopping = true
		w.start(l)
		if !waitFor(&w.handlers, time.Second) || ran.Load() {
			t.Fatal("a handler started after shutdown began")
		}
		if e := getExecution(t, s, id); e.State != ExecutionWaiting || e.Attempts != 0 {
			t.Fatalf("the unstarted lease was not released: %+v", e)
		}
	})
}
