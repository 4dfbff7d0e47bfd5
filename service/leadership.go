package service

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/rosterdb/roster/internal/engine"
)

// maintenanceRole names the leadership lease of RunSweeper.
const maintenanceRole = "maintenance"

// Leader says which RunSweeper instance holds the maintenance leadership and
// until when; "" and a zero time when none does.
func (s *Store) Leader(ctx context.Context) (instanceID string, until time.Time, err error) {
	if err := s.notClosed(); err != nil {
		return "", time.Time{}, err
	}
	now := s.now(time.Time{}).UnixMilli()
	err = s.read(ctx, func(ctx context.Context, q engine.Queries) error {
		holder, _, expires, err := q.LeaderGet(ctx, maintenanceRole)
		switch {
		case errors.Is(err, engine.ErrNoRows):
			return nil
		case err != nil:
			return err
		case expires > now:
			instanceID, until = holder, msTime(expires)
		}
		return nil
	})
	return instanceID, until, err
}

// minSweepInterval is the shortest Interval RunSweeper accepts.
const minSweepInterval = time.Millisecond

// leaseTerm is how long a leader's lease lasts: 2.5 Intervals, so that it
// survives one missed renewal, and a follower, looking every Interval/4,
// takes over within 3 Intervals of the leader's death.
func leaseTerm(interval time.Duration) time.Duration { return interval * 5 / 2 }

// RunSweeper runs the fleet's maintenance (Sweep) on an interval until ctx
// ends (returning nil) or the Store is closed (returning ErrClosed). Any
// number of processes on any number of hosts may run it on one database: at
// any moment at most one of them, the leader, does the work. Leadership is
// a fenced lease in the database (holder, epoch, expiry), taken and renewed
// by compare-and-set at each Interval and lasting 2.5 Intervals, so it is
// lost before 3 Intervals pass without a renewal, and a follower (looking
// every Interval/4) takes over within 3 Intervals of the leader's death.
// Every write of a leader's maintenance is fenced by its term (holder and
// epoch) in the same transaction: a leader whose lease another instance
// took writes nothing more and stops at once. A run that outlasts the
// lease (the Interval shorter than the run) goes on while no other
// instance has taken it. On shutdown a leader resigns, so that another
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
	sc := newScheduleClock(s)
	defer sc.close()
	left, fresh := time.Duration(0), true // the wait left before the next run
	// The wait under way: its channel (nil: none), length, start, and
	// whether it ends early, for a schedule's period.
	var (
		timer  <-chan time.Time
		timerD time.Duration
		waited time.Time
		early  bool
	)
	for {
		if fresh {
			// A follower looks four times as often as the leader renews, so
			// that it takes over soon after a dead leader's lease lapses.
			wait := interval
			if l.epoch == 0 {
				wait = interval / 4
			}
			left, fresh, timer = jitter(wait), false, nil
		}
		if timer == nil {
			// The leader wakes early for a schedule's period that begins
			// before its next run, and runs the due schedules alone then.
			timerD, early = left, false
			if untilDue, ok := sc.untilDue(l); ok && untilDue < timerD {
				timerD, early = untilDue, true
			}
			timer, waited = after(timerD), time.Now()
		}
		changed := false
		select {
		case <-ctx.Done():
			return nil
		case <-sc.own:
			sc.own, changed = s.schedules.wait(), true
		case <-sc.notified:
			changed = true
		case <-timer:
			timer, left = nil, left-timerD
		}
		if changed {
			// A schedule was put or deleted: look at the next run again,
			// and wait anew only for one that begins before this wait ends.
			if l.epoch != 0 {
				sc.look(ctx, time.Time{})
			}
			spent := time.Since(waited)
			if untilDue, ok := sc.untilDue(l); ok && untilDue < timerD-spent {
				timer, left = nil, max(left-spent, 0)
			}
			continue
		}
		if early {
			ran, now := time.Now(), s.now(time.Time{})
			_, err := maintenance{s: s, term: &fence{holder: instance, epoch: l.epoch}}.runSchedules(ctx, now)
			// The run's time comes off the wait too (by the wall's clock or
			// the Store's, whichever moved more), so that runs as long as
			// the schedule's period never put off the renewal and the full
			// run: the term lasts 2.5 Intervals.
			left = max(left-max(time.Since(ran), s.now(time.Time{}).Sub(now)), 0)
			switch {
			case errors.Is(err, ErrClosed):
				return err
			case errors.Is(err, errNotLeader):
				l.lost("a schedule's run found the term ended")
			case err != nil && ctx.Err() == nil:
				s.log.Warn("roster: sweeper: a schedule's run failed", "epoch", l.epoch, "err", err)
			}
			sc.look(ctx, now)
			continue
		}
		fresh = true
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
		began, now := time.Now(), s.now(time.Time{})
		r, err := s.sweep(ctx, now, a, &fence{holder: instance, epoch: l.epoch})
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
		if l.epoch != 0 {
			sc.look(ctx, now)
		}
	}
}

// scheduleClock is what a leading RunSweeper knows of the schedules: when
// the earliest period of any of them begins, read after each of its runs
// and again whenever a schedule is put or deleted through this Store or,
// on an engine whose notifications are by key (PostgreSQL), through any.
type scheduleClock struct {
	s        *Store
	due      time.Time           // zero: no schedule, or not read
	own      <-chan struct{}     // closed when this Store puts or deletes one
	notified <-chan struct{}     // the engine's notice of another's (nil: none)
	sub      engine.Subscription // nil: the engine signals every key at every commit
}

func newScheduleClock(s *Store) *scheduleClock {
	c := &scheduleClock{s: s, own: s.schedules.wait()}
	if k, ok := s.eng.(engine.KeyedNotifier); ok && k.NotifiesByKey() {
		c.sub = s.eng.Subscribe(engine.ScheduleKey)
		c.sub.Arm()
		c.notified = c.sub.C()
	}
	return c
}

// untilDue is how long until the next schedule's period begins (0 when it
// has), when l leads and knows of one.
func (c *scheduleClock) untilDue(l *leadership) (time.Duration, bool) {
	if l.epoch == 0 || c.due.IsZero() {
		return 0, false
	}
	return max(c.due.Sub(c.s.now(time.Time{})), 0), true
}

// look reads the earliest period that begins after ran (zero: any), the
// time of a run that tried every schedule due by then: one it could not run
// stays due, and is tried again at the next full run rather than woken for
// at once, again and again. A failed read forgets the period (the next run
// looks again).
func (c *scheduleClock) look(ctx context.Context, ran time.Time) {
	due, err := c.s.nextScheduleRun(ctx, ran)
	if err != nil && ctx.Err() == nil {
		c.s.log.Debug("roster: sweeper: reading the next schedule failed", "err", err)
	}
	c.due = due
}

func (c *scheduleClock) close() {
	if c.sub != nil {
		c.sub.Close()
	}
}

// fence is a leader's term: every write of its maintenance ends, in the
// same transaction, with a check that the term still holds, that is that no
// other instance took the lease since (a takeover gives a new epoch; on
// PostgreSQL the check takes a share lock on the lease row, so that a
// takeover waits for the commit, never longer). A write whose term ended
// is rolled back and fails with errNotLeader. The check comes last, so that a write that waited for
// a lock of someone else's holds no lock a takeover needs meanwhile.
type fence struct {
	holder string
	epoch  int64
}

// errNotLeader is a maintenance write refused because its leader's term
// ended.
var errNotLeader = errors.New("roster: the maintenance leadership was lost")

// fenced wraps a write in its leader's fence.
func (s *Store) fenced(f fence, fn func(ctx context.Context, q engine.Queries) error) func(ctx context.Context, q engine.Queries) error {
	return func(ctx context.Context, q engine.Queries) error {
		if err := fn(ctx, q); err != nil {
			return err
		}
		held, err := q.LeaderHolds(ctx, maintenanceRole, f.holder, f.epoch)
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
