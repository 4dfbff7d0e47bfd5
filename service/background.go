package service

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"time"

	"github.com/rosterdb/roster/internal/engine"
)

// KeepAliveArgs configure KeepAlive.
type KeepAliveArgs struct {
	Namespace, WorkerID, InstanceID string
	Lanes, Capabilities             []string
	TTL                             time.Duration
	// Interval between heartbeats; 0 means TTL/3. Each wait is jittered by ±10%.
	Interval time.Duration
	// After replaces time.After for the waits between heartbeats (tests).
	After func(time.Duration) <-chan time.Time
}

// ShutdownReason is the reason KeepAlive gives when it marks its worker dead.
const ShutdownReason = "shutdown"

// KeepAlive registers a worker and keeps it alive until ctx ends: it
// heartbeats every Interval, registers again after ErrNotRegistered (the TTL
// lapsed or the instance was swept), and when ctx ends marks the worker dead
// with reason "shutdown" and returns nil. It returns early with an error only
// when the worker cannot be registered at all (ErrInvalidInput, ErrConflict)
// or the Store is closed. Transient failures are logged and retried.
func (s *Store) KeepAlive(ctx context.Context, a KeepAliveArgs) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := validTTL("TTL", a.TTL); err != nil {
		return err
	}
	interval := a.Interval
	if interval == 0 {
		interval = a.TTL / 3
	}
	if interval <= 0 {
		return invalid("Interval", "%v is not positive", interval)
	}
	after := a.After
	if after == nil {
		after = time.After
	}
	log := s.log.With("namespace", a.Namespace, "instance", a.InstanceID)
	register := func() error {
		_, err := s.RegisterWorker(ctx, RegisterWorkerArgs{
			Namespace: a.Namespace, WorkerID: a.WorkerID, InstanceID: a.InstanceID,
			Lanes: a.Lanes, Capabilities: a.Capabilities, TTL: a.TTL,
		})
		return err
	}
	fatal := func(err error) bool {
		return errors.Is(err, ErrInvalidInput) || errors.Is(err, ErrConflict) || errors.Is(err, ErrClosed)
	}
	if err := register(); err != nil && (fatal(err) || ctx.Err() != nil) {
		return err
	} else if err != nil {
		log.Warn("roster: keep-alive: register failed, will retry", "err", err)
	}
	for {
		select {
		case <-ctx.Done():
			err := s.MarkWorkerDead(context.WithoutCancel(ctx), MarkWorkerDeadArgs{
				Namespace: a.Namespace, InstanceID: a.InstanceID, Reason: ShutdownReason,
			})
			if err != nil && !errors.Is(err, ErrNotRegistered) {
				log.Warn("roster: keep-alive: mark dead on shutdown failed", "err", err)
			}
			return nil
		case <-after(jitter(interval)):
		}
		_, err := s.HeartbeatWorker(ctx, HeartbeatWorkerArgs{Namespace: a.Namespace, InstanceID: a.InstanceID})
		if errors.Is(err, ErrNotRegistered) {
			log.Warn("roster: keep-alive: worker was not registered; registering again")
			err = register()
		}
		switch {
		case err == nil, ctx.Err() != nil:
		case fatal(err):
			return err
		default:
			log.Warn("roster: keep-alive: heartbeat failed, will retry", "err", err)
		}
	}
}

// SweeperArgs configure RunSweeper and Sweep.
type SweeperArgs struct {
	// Interval between runs: 0 means 10s, else at least 1ms (RunSweeper
	// refuses less). Each wait is jittered by ±10%.
	Interval time.Duration
	// EventRetention: events older than this are pruned; 0 means 7 days,
	// negative keeps every event, and so does one reaching back before
	// 1970 (at most 100 years).
	EventRetention time.Duration
	// ExecutionRetention: executions that finished longer ago than this are
	// pruned with their attempts; 0 means 7 days, negative keeps every
	// execution, and so does one reaching back before 1970 (at most 100
	// years).
	ExecutionRetention time.Duration
	// InstanceID names this RunSweeper in the leadership lease (an
	// identifier); "" means host name and process id.
	InstanceID string
	// After replaces time.After for the waits between runs (tests).
	After func(time.Duration) <-chan time.Time
}

// SweepReport counts what one maintenance run did: workers swept, leases
// reclaimed, events pruned, executions pruned, and executions created by
// schedules.
type SweepReport struct {
	Swept, Reclaimed, Pruned, PrunedExecutions, Scheduled int
}

// DefaultEventRetention is how long Sweep and RunSweeper keep audit events
// when the retention given is 0.
const DefaultEventRetention = 7 * 24 * time.Hour

// DefaultExecutionRetention is how long Sweep and RunSweeper keep finished
// executions (after FinishedAt) when the retention given is 0.
const DefaultExecutionRetention = 7 * 24 * time.Hour

// Sweep runs one full maintenance run at now (zero: the Store's clock): it
// sweeps expired workers, reclaims expired leases, prunes events older than
// a.EventRetention and executions that finished longer ago than
// a.ExecutionRetention (each 0: the default of 7 days; negative: keep
// them), and creates the due runs of schedules. It does not take the
// leadership (RunSweeper does): running it beside a leader is safe, only
// redundant. a.Interval, a.InstanceID and a.After are not used.
func (s *Store) Sweep(ctx context.Context, now time.Time, a SweeperArgs) (SweepReport, error) {
	if err := s.check(); err != nil {
		return SweepReport{}, err
	}
	if err := validTime("now", now); err != nil {
		return SweepReport{}, err
	}
	events, executions, err := retentions(a)
	if err != nil {
		return SweepReport{}, err
	}
	now = s.now(now)
	var r SweepReport
	if r.Swept, err = s.SweepExpiredWorkers(ctx, now); err != nil {
		return r, err
	}
	if r.Reclaimed, err = s.ReclaimExpiredLeases(ctx, now, 0); err != nil {
		return r, err
	}
	if events >= 0 {
		if r.Pruned, err = s.PruneWorkerEvents(ctx, horizon(now, events)); err != nil {
			return r, err
		}
	}
	if executions >= 0 {
		if r.PrunedExecutions, err = s.PruneExecutions(ctx, horizon(now, executions)); err != nil {
			return r, err
		}
	}
	if r.Scheduled, err = s.runSchedules(ctx, now); err != nil {
		return r, err
	}
	return r, nil
}

// retentions applies the defaults to a's retentions and checks that a time
// that far back is one a database can hold.
func retentions(a SweeperArgs) (events, executions time.Duration, err error) {
	events, executions = a.EventRetention, a.ExecutionRetention
	if events == 0 {
		events = DefaultEventRetention
	}
	if executions == 0 {
		executions = DefaultExecutionRetention
	}
	if events > maxRetention {
		return 0, 0, invalid("EventRetention", "%v exceeds the maximum of %v", events, maxRetention)
	}
	if executions > maxRetention {
		return 0, 0, invalid("ExecutionRetention", "%v exceeds the maximum of %v", executions, maxRetention)
	}
	return events, executions, nil
}

// horizon is how far back a retention keeps things from now: now minus
// retention, or the Unix epoch when that lies before it (a retention that
// long keeps everything: nothing stored is older).
func horizon(now time.Time, retention time.Duration) time.Time {
	if h := now.Add(-retention); h.After(minTime) {
		return h
	}
	return minTime
}

// minSweepInterval is the shortest Interval RunSweeper accepts.
const minSweepInterval = time.Millisecond

// maxRetention bounds the retentions: 100 years.
const maxRetention = 100 * 365 * 24 * time.Hour

// leaseTerm is how long a leader's lease lasts: 2.5 Intervals, so that it
// survives one missed renewal, and a follower, looking every Interval/4,
// takes over within 3 Intervals of the leader's death; but at least
// minLeaseTerm, so that a run (bounded by the term) can end within it
// however short the Interval.
func leaseTerm(interval time.Duration) time.Duration { return max(interval*5/2, minLeaseTerm) }

// minLeaseTerm is the shortest term of a leader's lease.
const minLeaseTerm = 250 * time.Millisecond

// RunSweeper runs the fleet's maintenance (Sweep) on an interval until ctx
// ends (returning nil) or the Store is closed (returning ErrClosed). Any
// number of processes on any number of hosts may run it on one database: at
// any moment at most one of them, the leader, does the work. Leadership is
// a fenced lease in the database (holder, epoch, expiry), taken and renewed
// by compare-and-set at each Interval and lasting 2.5 Intervals (at least
// 250 ms, so that a run can end within it), so it is lost before 3
// Intervals pass without a renewal, and a follower (looking every
// Interval/4) takes over within 3 Intervals of the leader's death.
// Every write of a leader's maintenance is fenced by its term in the same
// transaction: a leader that lost the lease writes nothing more and stops
// at once, and each run ends by the lease's expiry. On shutdown a leader resigns, so that another
// takes over at its next Interval. Failures of a run are logged and the
// next run goes ahead.
func (s *Store) RunSweeper(ctx context.Context, a SweeperArgs) error {
	interval := a.Interval
	if interval == 0 {
		interval = 10 * time.Second
	}
	if interval < minSweepInterval {
		// A shorter one would lapse its lease as it is taken (the term is
		// counted in milliseconds) and spin without doing the work.
		return invalid("Interval", "%v is below 1ms (0 means 10s)", interval)
	}
	if _, _, err := retentions(a); err != nil {
		return err
	}
	instance := a.InstanceID
	if instance == "" {
		instance = defaultInstanceID()
	}
	if err := validIdentifier("InstanceID", instance); err != nil {
		return err
	}
	after := a.After
	if after == nil {
		after = time.After
	}
	l := &leadership{s: s, instance: instance, term: leaseTerm(interval)}
	defer l.resign()
	for {
		// A follower looks four times as often as the leader renews, so
		// that it takes over soon after a dead leader's lease lapses.
		wait := interval
		if l.epoch == 0 {
			wait = interval / 4
		}
		select {
		case <-ctx.Done():
			return nil
		case <-after(jitter(wait)):
		}
		until, err := l.renew(ctx)
		switch {
		case errors.Is(err, ErrClosed):
			return err
		case err != nil:
			if ctx.Err() == nil {
				s.log.Warn("roster: sweeper: leadership check failed", "err", err)
			}
			continue
		case until.IsZero():
			continue // another instance leads
		}
		began := time.Now()
		rctx, cancel := context.WithDeadline(context.WithValue(ctx, fenceKey{}, fence{holder: instance, epoch: l.epoch}), until)
		r, err := s.Sweep(rctx, time.Time{}, a)
		cancel()
		switch {
		case errors.Is(err, ErrClosed):
			return err
		case errors.Is(err, errNotLeader):
			l.lost("a maintenance write found the term ended")
		case err != nil && ctx.Err() == nil:
			s.log.Warn("roster: sweeper run failed", "epoch", l.epoch, "err", err)
		default:
			s.log.Debug("roster: sweeper run", "instance", instance, "epoch", l.epoch,
				"began", began.UnixNano(), "ended", time.Now().UnixNano(),
				"swept", r.Swept, "reclaimed", r.Reclaimed, "pruned", r.Pruned,
				"pruned_executions", r.PrunedExecutions, "scheduled", r.Scheduled)
		}
	}
}

// fence is a leader's term: every write of its maintenance ends, in the
// same transaction, with a check that the term still holds (on PostgreSQL
// taking a share lock on the lease row, so that a takeover waits for the
// commit, never longer). A write whose term ended is rolled back and fails
// with errNotLeader. The check comes last, so that a write that waited for
// a lock of someone else's holds no lock a takeover needs meanwhile.
type fence struct {
	holder string
	epoch  int64
}

type fenceKey struct{}

// errNotLeader is a maintenance write refused because its leader's term
// ended.
var errNotLeader = errors.New("roster: the maintenance leadership was lost")

// fenced wraps a write in its leader's fence.
func (s *Store) fenced(f fence, fn func(ctx context.Context, q engine.Queries) error) func(ctx context.Context, q engine.Queries) error {
	return func(ctx context.Context, q engine.Queries) error {
		if err := fn(ctx, q); err != nil {
			return err
		}
		held, err := q.LeaderHolds(ctx, maintenanceRole, f.holder, f.epoch, s.now(time.Time{}).UnixMilli())
		if err != nil {
			return err
		}
		if !held {
			return fmt.Errorf("%w: epoch %d of %s ended", errNotLeader, f.epoch, f.holder)
		}
		return nil
	}
}

// leadership is one RunSweeper's hold on the maintenance lease.
type leadership struct {
	s        *Store
	instance string
	term     time.Duration
	epoch    int64 // 0: not leading
}

// renew takes or renews the lease and returns the local time by which this
// instance's term ends (zero: another instance leads). The term is counted
// from before the statement, so it ends no later than the lease in the
// database.
func (l *leadership) renew(ctx context.Context) (time.Time, error) {
	began := time.Now()
	now := l.s.now(time.Time{})
	var epoch int64
	err := l.s.writeOne(ctx, func(ctx context.Context, q engine.Queries) error {
		var err error
		epoch, err = q.LeaderTake(ctx, maintenanceRole, l.instance, l.epoch, now.UnixMilli(), now.Add(l.term).UnixMilli())
		return err
	})
	switch {
	case errors.Is(err, engine.ErrNoRows):
		l.lost("another instance leads")
		return time.Time{}, nil
	case err != nil:
		return time.Time{}, err
	}
	if epoch != l.epoch {
		if l.epoch != 0 {
			l.lost("the lease lapsed")
		}
		l.epoch = epoch
		l.s.log.Info("roster: sweeper: leading maintenance", "instance", l.instance, "epoch", epoch)
		l.changed()
	}
	return began.Add(l.term), nil
}

// lost records that this instance no longer leads.
func (l *leadership) lost(why string) {
	if l.epoch == 0 {
		return
	}
	l.s.log.Info("roster: sweeper: lost the maintenance leadership", "instance", l.instance, "epoch", l.epoch, "why", why)
	l.epoch = 0
	l.changed()
}

func (l *leadership) changed() {
	if o, ok := l.s.cfg.observer.(FleetObserver); ok {
		o.LeaderChanged()
	}
}

// resign ends this instance's lease at once, if it leads.
func (l *leadership) resign() {
	if l.epoch == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	now := l.s.now(time.Time{}).UnixMilli()
	_ = l.s.writeOne(ctx, func(ctx context.Context, q engine.Queries) error {
		return q.LeaderResign(ctx, maintenanceRole, l.instance, l.epoch, now)
	})
	l.epoch = 0
}

// defaultInstanceID is host name and process id.
func defaultInstanceID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}

// jitter spreads d by ±10% so that a fleet's timers do not align.
func jitter(d time.Duration) time.Duration {
	spread := int64(d) / 5
	if spread <= 0 {
		return d
	}
	return d - time.Duration(spread/2) + time.Duration(rand.Int64N(spread))
}
