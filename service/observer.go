package service

import "time"

// Observer hears what a Store does, for metrics (package metrics implements it
// for Prometheus, so that importing service alone pulls no metrics
// dependency). Its methods are called synchronously on the Store's paths:
// they must be fast and safe for concurrent use.
type Observer interface {
	// Claimed: n executions were claimed (ClaimExecution, ClaimExecutions,
	// or RunWorker).
	Claimed(n int)
	// Completed and Failed: an attempt ended with that outcome.
	Completed()
	Failed()
	// LeaseLost: a renew, complete or fail found its lease lost.
	LeaseLost()
	// Reclaimed: n expired leases were reclaimed.
	Reclaimed(n int)
	// Swept: n lapsed workers were swept.
	Swept(n int)
	// Overloaded: a write was refused with ErrOverloaded.
	Overloaded()
	// WriteWaited: how long a write waited for the writer (SQLite) or a
	// pooled connection (PostgreSQL) before it began.
	WriteWaited(d time.Duration)
	// Committed: how long a commit took, and for how many writes (group
	// commit shares one among several).
	Committed(d time.Duration, writes int)
}

// LabeledObserver is an Observer that also hears the namespace and lane of
// each claim, completion and failure (package metrics implements it, to
// label its counters). On an Observer that implements it, the Store calls
// ClaimedIn, CompletedIn and FailedIn instead of Claimed, Completed and
// Failed.
type LabeledObserver interface {
	Observer
	ClaimedIn(namespace, lane string, n int)
	CompletedIn(namespace, lane string)
	FailedIn(namespace, lane string)
}

// TimingObserver is an Observer that also hears how long work waited to be
// claimed and how long it ran (package metrics implements it as the
// roster_queue_wait_seconds and roster_run_seconds histograms). On an
// Observer that implements it, the Store calls these methods only.
type TimingObserver interface {
	Observer
	// Waited: an execution of the namespace's lane was claimed d after it
	// became claimable (its RunAt), by this Store's clock.
	Waited(namespace, lane string, d time.Duration)
	// Ran: a handler RunWorker ran on this Store, for an execution of the
	// namespace's lane, returned d after its lease was handed to it.
	Ran(namespace, lane string, d time.Duration)
}

// FlowObserver is an Observer that also counts the claims that found ready
// work a lane's cap, rate or pause held back.
type FlowObserver interface {
	Observer
	// ClaimHeld counts a claim of a namespace's worker that found lanes
	// whose ready work a cap, a rate or a pause held back.
	ClaimHeld(namespace string, lanes int)
}

// roomFreed wakes this Store's claimers when a claim found a lane at its
// cap: a run just ended (completed, failed, cancelled, reclaimed), which may
// have freed room.
func (s *Store) roomFreed() {
	if s.held.Load() && s.held.Swap(false) {
		s.work.signal()
	}
}

// noteClaimed tells the Observer of claimed leases.
func (s *Store) noteClaimed(leases []Lease) {
	o, ok := s.cfg.observer.(LabeledObserver)
	if !ok {
		s.cfg.observer.Claimed(len(leases))
		return
	}
	for _, l := range leases {
		o.ClaimedIn(l.Namespace, l.Lane, 1)
	}
}

// noteEnded tells the Observer that an attempt of the namespace's lane
// completed or failed, and wakes this Store's claimers when a claim found
// a lane at its cap (the end may have freed room).
func (s *Store) noteEnded(namespace, lane string, failed bool) {
	s.roomFreed()
	o, ok := s.cfg.observer.(LabeledObserver)
	switch {
	case ok && failed:
		o.FailedIn(namespace, lane)
	case ok:
		o.CompletedIn(namespace, lane)
	case failed:
		s.cfg.observer.Failed()
	default:
		s.cfg.observer.Completed()
	}
}

// WithObserver sets an Observer of the Store (default: none).
func WithObserver(o Observer) Option { return func(c *config) { c.observer = o } }

// nopObserver is the Observer of a Store that has none.
type nopObserver struct{}

func (nopObserver) Claimed(int)                  {}
func (nopObserver) Completed()                   {}
func (nopObserver) Failed()                      {}
func (nopObserver) LeaseLost()                   {}
func (nopObserver) Reclaimed(int)                {}
func (nopObserver) Swept(int)                    {}
func (nopObserver) Overloaded()                  {}
func (nopObserver) WriteWaited(time.Duration)    {}
func (nopObserver) Committed(time.Duration, int) {}

// FleetObserver is an Observer that also hears of leadership and schedules
// (package metrics implements it). The Store calls these methods only on
// an Observer that implements them.
type FleetObserver interface {
	Observer
	// LeaderChanged: this process's RunSweeper took the maintenance
	// leadership under a new epoch, or lost it.
	LeaderChanged()
	// ScheduleRuns: n executions were created by schedules.
	ScheduleRuns(n int)
}
