package service

import (
	"context"
	"time"

	"github.com/rosterdb/roster/internal/engine"
)

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
	return s.sweep(ctx, now, a, nil)
}

// sweep is Sweep with each write fenced by term when it is set (a leader's
// run, RunSweeper's).
func (s *Store) sweep(ctx context.Context, now time.Time, a SweeperArgs, term *fence) (SweepReport, error) {
	if err := s.notClosed(); err != nil {
		return SweepReport{}, err
	}
	if err := validTime("now", now); err != nil {
		return SweepReport{}, err
	}
	events, executions, err := retentions(a)
	if err != nil {
		return SweepReport{}, err
	}
	m := maintenance{s: s, term: term}
	now = s.now(now)
	var r SweepReport
	if r.Swept, err = m.sweepWorkers(ctx, now.UnixMilli()); err != nil {
		return r, err
	}
	if r.Reclaimed, err = m.reclaim(ctx, now.UnixMilli(), 0); err != nil {
		return r, err
	}
	if events >= 0 {
		if r.Pruned, err = m.pruneEvents(ctx, horizon(now, events).UnixMilli()); err != nil {
			return r, err
		}
	}
	if executions >= 0 {
		if r.PrunedExecutions, err = m.pruneExecutions(ctx, horizon(now, executions).UnixMilli()); err != nil {
			return r, err
		}
	}
	if r.Scheduled, err = m.runSchedules(ctx, now); err != nil {
		return r, err
	}
	return r, nil
}

// maintenance runs the jobs of a maintenance run, one file each: sweep the
// lapsed workers and prune their events (maintenance_workers.go), reclaim
// expired leases (maintenance_reclaim.go), prune finished executions and
// ended unique keys (maintenance_prune.go), run the due schedules
// (schedules.go). term, when set, is the leader's term (leadership.go) that
// fences every write of the jobs; nil for a caller's own Sweep or job.
type maintenance struct {
	s    *Store
	term *fence
}

// write runs fn as Store.write does, ending, when m has a term, with the
// term's check in the same transaction.
func (m maintenance) write(ctx context.Context, fn func(ctx context.Context, q engine.Queries) error) error {
	if m.term != nil {
		fn = m.s.fenced(*m.term, fn)
	}
	return m.s.write(ctx, fn)
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

// maxRetention bounds the retentions: 100 years.
const maxRetention = 100 * 365 * 24 * time.Hour
