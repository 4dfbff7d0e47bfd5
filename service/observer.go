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
