package service

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/robfig/cron/v3"

	"github.com/rosterdb/roster/internal/engine"
)

// Schedule creates one execution per period from its Template: every Every
// (periods aligned to the Unix epoch: Every 1h runs on the hour, UTC) or at
// each time of Cron (5 fields, UTC, github.com/robfig/cron/v3's standard
// parser). The leader's maintenance creates the run of each due period with
// UniqueKey "schedule:<Name>:<period start in Unix ms>", so a change of
// leader, two leaders racing at a handover, or a restart never creates a
// period twice; after an outage only the latest missed period runs. A
// cron's next time is found however far ahead it lies (February 29th:
// 2096, then 2104), and a sweep visits each due schedule once, so it always
// ends.
type Schedule struct {
	Namespace, Name string        // identifiers; (Namespace, Name) is the key
	Every           time.Duration // exactly one of Every (1 s to 366 days) and Cron
	Cron            string
	// Template is what each run creates. Its Namespace is the schedule's
	// (empty, or the same); its UniqueKey is set by the schedule and must
	// be empty; its RunAt and Now are not used (a run is claimable at once).
	Template  CreateExecutionArgs
	Paused    bool      // a paused schedule creates nothing
	NextRunAt time.Time // read-only: the next period's start (zero while paused: none)
	// LastExecutionID is the execution of the latest run (uuid.Nil: none
	// yet), and LastState its state ("" when none, or pruned): read-only.
	LastExecutionID uuid.UUID
	LastState       ExecutionState
}

const (
	minScheduleEvery = time.Second
	maxScheduleEvery = 366 * 24 * time.Hour
	// scheduleBatch bounds the schedules one maintenance run looks at.
	scheduleBatch = 256
)

// period is a schedule's parsed timing.
type period struct {
	every time.Duration
	cron  cron.Schedule
}

// parsePeriod validates Every and Cron: exactly one of them.
func parsePeriod(every time.Duration, spec string) (period, error) {
	switch {
	case every != 0 && spec != "":
		return period{}, invalid("Every", "both Every and Cron are set; give one")
	case every == 0 && spec == "":
		return period{}, invalid("Every", "neither Every nor Cron is set; give one")
	case spec != "":
		// Five fields, in UTC: no descriptor (@every, @daily) and no time
		// zone prefix (CRON_TZ=, TZ=), which the parser would accept.
		if len(spec) > 256 {
			return period{}, invalid("Cron", "longer than 256 bytes")
		}
		if f := strings.Fields(spec); len(f) != 5 || strings.HasPrefix(spec, "@") || strings.Contains(spec, "TZ=") {
			return period{}, invalid("Cron", "%q is not 5 fields (minute hour day-of-month month day-of-week, in UTC)", spec)
		}
		c, err := cron.ParseStandard(spec)
		if err != nil {
			return period{}, invalid("Cron", "%q does not parse: %v", spec, err)
		}
		// A spec that names no time that exists (February 30th) never fires.
		if cronNext(c, time.Unix(0, 0).UTC()).IsZero() {
			return period{}, invalid("Cron", "%q never fires", spec)
		}
		return period{cron: c}, nil
	case every < minScheduleEvery || every > maxScheduleEvery:
		return period{}, invalid("Every", "%v is outside 1s..366 days", every)
	}
	return period{every: every}, nil
}

// cronSearch bounds how far cronNext looks: the Gregorian calendar repeats
// every 400 years, so a spec with no time in 401 never fires.
const cronSearch = 401

// cronNext is c's first time after t, however far ahead. The cron library
// looks only about five years ahead, and February 29th can be eight years
// away (2096, then 2104: 2100 is not a leap year), so it asks again from
// where each search ended. Zero only for a spec that never fires.
func cronNext(c cron.Schedule, t time.Time) time.Time {
	t = t.UTC()
	for from := t; from.Year() <= t.Year()+cronSearch; {
		if n := c.Next(from); !n.IsZero() {
			return n
		}
		// Next found nothing from the second after from to the end of year
		// from.Year()+5: look again from the start of that year, which
		// overlaps the last search by a year.
		from = time.Date(from.Year()+5, time.January, 1, 0, 0, 0, 0, time.UTC).Add(-time.Second)
	}
	return time.Time{}
}

// next is the first period start at or after t.
func (p period) next(t time.Time) time.Time {
	if p.cron != nil {
		return cronNext(p.cron, t.Add(-time.Nanosecond))
	}
	ms, every := t.UnixMilli(), p.every.Milliseconds()
	return time.UnixMilli((ms + every - 1) / every * every).UTC()
}

// after is the first period start after t.
func (p period) after(t time.Time) time.Time {
	return p.next(t.Add(time.Millisecond))
}

// catchUpWindows are how far back latest looks for a cron's last time, the
// nearest first: the walk forward from the window's start is then bounded by
// the times in the smallest window that holds one (a cron fires at least
// once in eight years and a day, or never: February 29th skips 2100).
var catchUpWindows = []time.Duration{time.Minute, time.Hour, 24 * time.Hour, 32 * 24 * time.Hour,
	367 * 24 * time.Hour, (4*366 + 1) * 24 * time.Hour, (8*366 + 1) * 24 * time.Hour}

// latest is the last period start at or before now, from (a period start at
// or before now) when none is later.
func (p period) latest(from, now time.Time) time.Time {
	if p.cron == nil {
		every := p.every.Milliseconds()
		return time.UnixMilli(now.UnixMilli() / every * every).UTC()
	}
	for _, w := range catchUpWindows {
		start := now.Add(-w)
		if !start.After(from) {
			start = from.Add(-time.Millisecond)
		}
		t := cronNext(p.cron, start)
		if t.IsZero() || t.After(now) {
			if start.Before(from) {
				break
			}
			continue
		}
		for {
			n := cronNext(p.cron, t)
			if n.IsZero() || n.After(now) {
				return t
			}
			t = n
		}
	}
	return from
}

// PutSchedule creates or replaces a schedule. A new schedule's next run is
// the first period that starts at or after now; a replaced one keeps its
// next run (a period already due still runs) unless its Every or Cron
// changed or it resumes from paused, when it starts over from now. A bad
// Every or Cron (one that never fires included), or a Template that
// CreateExecution would refuse, is ErrInvalidInput and writes nothing; so
// is a Template with a UniqueKey (the schedule sets it) or Metadata (its
// runs carry none).
func (s *Store) PutSchedule(ctx context.Context, sc Schedule) error {
	if err := s.notClosed(); err != nil {
		return err
	}
	if err := validIdentifier("Namespace", sc.Namespace); err != nil {
		return err
	}
	if err := validIdentifier("Name", sc.Name); err != nil {
		return err
	}
	p, err := parsePeriod(sc.Every, sc.Cron)
	if err != nil {
		return err
	}
	tpl := sc.Template
	if tpl.Namespace != "" && tpl.Namespace != sc.Namespace {
		return invalid("Template.Namespace", "%q is not the schedule's namespace %q", tpl.Namespace, sc.Namespace)
	}
	if tpl.UniqueKey != "" || tpl.UniqueFor != 0 {
		return invalid("Template.UniqueKey", "set by the schedule: leave UniqueKey and UniqueFor empty")
	}
	if len(tpl.Metadata) > 0 {
		return invalid("Template.Metadata", "a schedule's runs carry no metadata: leave it empty")
	}
	if tpl.Group != "" {
		return invalid("Template.Group", "a schedule's runs belong to no group: leave it empty")
	}
	tpl.Namespace, tpl.RunAt, tpl.Now = sc.Namespace, time.Time{}, time.Time{}
	row, err := s.executionRow(tpl, "Template.")
	if err != nil {
		return err
	}
	now := s.now(time.Time{})
	err = s.write(ctx, func(ctx context.Context, q engine.Queries) error {
		return q.SchedulePut(ctx, engine.Schedule{
			Namespace: sc.Namespace, Name: sc.Name, EveryMs: sc.Every.Milliseconds(), Cron: sc.Cron,
			Lane: row.Lane, Priority: row.Priority, RequiredCapabilities: row.RequiredCapabilities,
			MaxAttempts: int64(tpl.MaxAttempts), RetryBackoffMs: tpl.RetryBackoff.Milliseconds(), TimeoutMs: row.TimeoutMs,
			Payload: row.Payload, Paused: sc.Paused, NextRunAtMs: p.next(now).UnixMilli(), UpdatedAtMs: now.UnixMilli(),
		})
	})
	if err == nil {
		s.schedules.signal()
	}
	return err
}

// DeleteSchedule removes a schedule (its past runs stay); an absent one is
// ErrNotFound.
func (s *Store) DeleteSchedule(ctx context.Context, namespace, name string) error {
	if err := s.notClosed(); err != nil {
		return err
	}
	if err := validIdentifier("namespace", namespace); err != nil {
		return err
	}
	if err := validIdentifier("name", name); err != nil {
		return err
	}
	err := s.write(ctx, func(ctx context.Context, q engine.Queries) error {
		found, err := q.ScheduleDelete(ctx, namespace, name)
		if err == nil && !found {
			return fmt.Errorf("%w: schedule %q in namespace %q", ErrNotFound, name, namespace)
		}
		return err
	})
	if err == nil {
		s.schedules.signal()
	}
	return err
}

// ListSchedules returns the schedules of a namespace ("" = every namespace),
// ordered by (Namespace, Name).
func (s *Store) ListSchedules(ctx context.Context, namespace string) ([]Schedule, error) {
	if err := s.notClosed(); err != nil {
		return nil, err
	}
	if namespace != "" {
		if err := validIdentifier("namespace", namespace); err != nil {
			return nil, err
		}
	}
	var out []Schedule
	err := s.read(ctx, func(ctx context.Context, q engine.Queries) error {
		rows, err := q.ScheduleList(ctx, namespace)
		out = make([]Schedule, len(rows))
		for i, r := range rows {
			out[i] = scheduleFromRow(r)
		}
		return err
	})
	return out, err
}

func scheduleFromRow(r engine.Schedule) Schedule {
	return Schedule{
		Namespace: r.Namespace, Name: r.Name,
		Every: time.Duration(r.EveryMs) * time.Millisecond, Cron: r.Cron,
		Template: CreateExecutionArgs{
			Namespace: r.Namespace, Lane: r.Lane, Payload: r.Payload, Priority: int(r.Priority),
			RequiredCapabilities: r.RequiredCapabilities, MaxAttempts: int(r.MaxAttempts),
			RetryBackoff: time.Duration(r.RetryBackoffMs) * time.Millisecond,
			Timeout:      time.Duration(r.TimeoutMs) * time.Millisecond,
		},
		Paused: r.Paused, NextRunAt: nextRun(r),
		LastExecutionID: r.LastExecutionID, LastState: ExecutionState(r.LastState),
	}
}

// nextRun is a stored schedule's next period start, or zero while it is
// paused (it has none: a resume starts over from its time).
func nextRun(r engine.Schedule) time.Time {
	if r.Paused {
		return time.Time{}
	}
	return msTime(r.NextRunAtMs)
}

// nextScheduleRun reads when the earliest period of any schedule not paused
// starts after ran (zero ran: at any time; zero result: there is none),
// from the index of due schedules: the leading RunSweeper sleeps until then.
func (s *Store) nextScheduleRun(ctx context.Context, ran time.Time) (time.Time, error) {
	after := engine.Schedule{NextRunAtMs: math.MinInt64}
	if !ran.IsZero() {
		// Every row at or before ran sorts before (ran + 1 ms, "", "").
		after.NextRunAtMs = ran.UnixMilli() + 1
	}
	var first []engine.Schedule
	err := s.read(ctx, func(ctx context.Context, q engine.Queries) error {
		var err error
		first, err = q.ScheduleListDue(ctx, math.MaxInt64, after, 1)
		return err
	})
	if err != nil || len(first) == 0 {
		return time.Time{}, err
	}
	return msTime(first[0].NextRunAtMs), nil
}

// errScheduleMoved rolls back a schedule's run that another maintainer
// made first.
var errScheduleMoved = errors.New("roster: the schedule moved on")

// runSchedules creates the run of each due schedule's latest period at now,
// and returns how many executions it created.
func (m maintenance) runSchedules(ctx context.Context, now time.Time) (int, error) {
	s := m.s
	nowMs := now.UnixMilli()
	created := 0
	// A walk in (next run, namespace, name) order that visits each due
	// schedule once: one it cannot run (skipped) stays due, but never holds
	// the walk, so a sweep always ends.
	after := engine.Schedule{NextRunAtMs: math.MinInt64}
	for {
		var due []engine.Schedule
		err := s.read(ctx, func(ctx context.Context, q engine.Queries) error {
			var err error
			due, err = q.ScheduleListDue(ctx, nowMs, after, scheduleBatch)
			return err
		})
		if err != nil {
			return created, err
		}
		if len(due) > 0 {
			after = due[len(due)-1]
		}
		for _, sc := range due {
			n, err := m.runSchedule(ctx, sc, now)
			created += n
			if err != nil {
				return created, err
			}
		}
		if len(due) < scheduleBatch {
			break
		}
	}
	if created > 0 {
		if o, ok := s.cfg.observer.(FleetObserver); ok {
			o.ScheduleRuns(created)
		}
		s.work.signal()
	}
	return created, nil
}

// runSchedule creates the run of one due schedule's latest period and moves
// the schedule to its next period, in one transaction; it returns 1 when it
// created an execution (0: the period's run existed, or another maintainer
// moved the schedule first).
func (m maintenance) runSchedule(ctx context.Context, sc engine.Schedule, now time.Time) (int, error) {
	s := m.s
	p, err := parsePeriod(time.Duration(sc.EveryMs)*time.Millisecond, sc.Cron)
	if err != nil {
		s.log.Warn("roster: a stored schedule does not parse; skipped", "namespace", sc.Namespace, "name", sc.Name, "err", err)
		return 0, nil
	}
	start := p.latest(msTime(sc.NextRunAtMs), now)
	next := p.after(start)
	if next.IsZero() {
		s.log.Warn("roster: a stored schedule has no next run; skipped", "namespace", sc.Namespace, "name", sc.Name)
		return 0, nil
	}
	row, err := s.executionRow(CreateExecutionArgs{
		Namespace: sc.Namespace, Lane: sc.Lane, Payload: sc.Payload, Priority: int(sc.Priority),
		RequiredCapabilities: sc.RequiredCapabilities, MaxAttempts: int(sc.MaxAttempts),
		RetryBackoff: time.Duration(sc.RetryBackoffMs) * time.Millisecond, Timeout: time.Duration(sc.TimeoutMs) * time.Millisecond,
		RunAt: start, // the period's start, so that a late run shows its lag
		Now:   now,
	}, "")
	if err != nil {
		s.log.Warn("roster: a stored schedule's template is refused; skipped", "namespace", sc.Namespace, "name", sc.Name, "err", err)
		return 0, nil
	}
	row.UniqueKey = "schedule:" + sc.Name + ":" + strconv.FormatInt(start.UnixMilli(), 10)
	// The period's key stays held for the period (at most 30 days), so
	// that a maintainer that read the schedule before this run committed
	// cannot create the period again after the run ended.
	hold := min(next.Sub(start), maxUniqueFor)
	created := 0
	err = m.write(ctx, func(ctx context.Context, q engine.Queries) error {
		created = 0
		id, err := s.createKeyed(ctx, q, row, row.CreatedAtMs+hold.Milliseconds())
		if err != nil {
			return err
		}
		if id == row.ID {
			created = 1
		}
		moved, err := q.ScheduleAdvance(ctx, sc.Namespace, sc.Name, sc.NextRunAtMs, next.UnixMilli(), id)
		if err == nil && !moved {
			return errScheduleMoved
		}
		return err
	})
	if errors.Is(err, errScheduleMoved) {
		return 0, nil
	}
	return created, err
}
