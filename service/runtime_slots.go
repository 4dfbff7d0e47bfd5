package service

import (
	"sync"
	"time"
)

// slots are a runner's handler slots, and the belief that decides when they
// are claimed for. A slot is free, reserved by a claim in flight, or held by
// a handler (running, or its outcome waiting to be written). Free slots are
// claimed for while work may be claimable (want), the worker is registered
// and shutdown has not begun. A claim that comes up short clears want; only
// a wake-up sets it again. Every field is guarded by mu; the claimer, the
// jobs, the settler and the heart share a runner's slots and nothing else of
// each other's state.
type slots struct {
	mu         sync.Mutex
	size       int       // handler slots in all (Concurrency)
	free       int       // slots neither held by a handler nor reserved by a claim
	want       bool      // work may be claimable: claim when a slot is free
	wantGen    uint64    // counts the wake-ups that set want
	nextRunAt  time.Time // the earliest RunAt of scheduled work the last short claim saw
	registered bool      // false from a lapse until registered again
	stopping   bool      // shutdown began: no claim, no handler start
}

// newSlots returns n free slots of a registered worker that believes work
// may be claimable (it has not looked yet).
func newSlots(n int) *slots {
	return &slots{size: n, free: n, want: true, registered: true}
}

// reserve takes every free slot for a claim, when claiming is allowed: work
// may be claimable, the worker is registered and not shutting down. It
// returns the wake-up generation the claim answers (see noMoreWork).
func (s *slots) reserve() (n int, gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.want || !s.registered || s.stopping || s.free == 0 {
		return 0, s.wantGen
	}
	n = s.free
	s.free = 0
	return n, s.wantGen
}

// unreserve makes n slots free again: slots a claim did not fill, a lease
// not started, a handler whose outcome was written or dropped.
func (s *slots) unreserve(n int) {
	if n == 0 {
		return
	}
	s.mu.Lock()
	s.free += n
	s.mu.Unlock()
}

// admit turns a reserved slot into a running handler: unless shutdown began,
// it calls start under the slots' lock (so that stop comes wholly before or
// after it) and reports true. Otherwise it reports false and the slot stays
// reserved, for the caller to give back.
func (s *slots) admit(start func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return false
	}
	start()
	return true
}

// stop begins shutdown: no slot is reserved or admitted any more.
func (s *slots) stop() {
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()
}

// hasFree reports whether a slot is free.
func (s *slots) hasFree() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.free > 0
}

// held counts the slots that are not free: reserved by a claim, or held by
// a handler.
func (s *slots) held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.size - s.free
}

// wakeUp records a reason to believe work may be claimable.
func (s *slots) wakeUp() {
	s.mu.Lock()
	s.want = true
	s.wantGen++
	s.mu.Unlock()
}

// noMoreWork records a claim that came up short: nothing more is claimable
// until a wake-up, or until next (the earliest RunAt of scheduled work). A
// wake-up that came while the claim ran (gen moved on) may announce work the
// claim could not see: want then stays set, and noMoreWork reports false
// (claim again).
func (s *slots) noMoreWork(gen uint64, next time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextRunAt = next
	if s.wantGen != gen {
		return false
	}
	s.want = false
	return true
}

// setRegistered records the registration and reports whether it was just
// restored: a restored registration is a wake-up (claims were held back
// meanwhile).
func (s *slots) setRegistered(v bool) (restored bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	restored = v && !s.registered
	s.registered = v
	if restored {
		s.want = true
		s.wantGen++
	}
	return restored
}

// whenIdle says how an idle claimer should wait: listen for changes (no work
// is known, a slot is free and the worker is registered), and the earliest
// RunAt of scheduled work the last short claim saw (zero: none).
func (s *slots) whenIdle() (listen bool, next time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.want && s.free > 0 && s.registered, s.nextRunAt
}
