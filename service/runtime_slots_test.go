package service

import (
	"sync"
	"testing"
	"time"
)

// TestSlotsReserve: a claim takes every free slot, and only while claiming
// is allowed (work may be claimable, registered, not stopping).
func TestSlotsReserve(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(s *slots)
		want  int // slots the claim takes
		held  int // slots not free after it
	}{
		{"fresh", func(*slots) {}, 3, 3},
		{"some held", func(s *slots) { n, _ := s.reserve(); s.unreserve(n - 1) }, 2, 3},
		{"none free", func(s *slots) { s.reserve() }, 0, 3},
		{"no work known", func(s *slots) { _, gen := s.reserve(); s.unreserve(3); s.noMoreWork(gen, time.Time{}) }, 0, 0},
		{"no work known, then a wake-up", func(s *slots) {
			_, gen := s.reserve()
			s.unreserve(3)
			s.noMoreWork(gen, time.Time{})
			s.wakeUp()
		}, 3, 3},
		{"lapsed", func(s *slots) { s.setRegistered(false) }, 0, 0},
		{"registered again", func(s *slots) { s.setRegistered(false); s.setRegistered(true) }, 3, 3},
		{"stopping", func(s *slots) { s.stop() }, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSlots(3)
			tc.setup(s)
			n, _ := s.reserve()
			if n != tc.want {
				t.Fatalf("reserve took %d slots, want %d", n, tc.want)
			}
			if n > 0 && s.hasFree() {
				t.Fatal("a slot is free after reserve took them all")
			}
			if got := s.held(); got != tc.held {
				t.Fatalf("held = %d after reserve, want %d", got, tc.held)
			}
		})
	}
}

// TestSlotsNoMoreWork: a short claim clears want only when no wake-up came
// while it ran; either way it records the RunAt it saw.
func TestSlotsNoMoreWork(t *testing.T) {
	next := time.UnixMilli(1_700_000_000_000)
	for _, tc := range []struct {
		name       string
		wakeDuring bool
		wantIdle   bool // noMoreWork reports true, and the claimer may listen
	}{
		{"quiet", false, true},
		{"woken while claiming", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSlots(2)
			n, gen := s.reserve()
			if tc.wakeDuring {
				s.wakeUp()
			}
			s.unreserve(n)
			if got := s.noMoreWork(gen, next); got != tc.wantIdle {
				t.Fatalf("noMoreWork = %v, want %v", got, tc.wantIdle)
			}
			listen, at := s.whenIdle()
			if listen != tc.wantIdle || !at.Equal(next) {
				t.Fatalf("whenIdle = %v, %v; want %v, %v", listen, at, tc.wantIdle, next)
			}
			if n, _ := s.reserve(); (n > 0) == tc.wantIdle {
				t.Fatalf("reserve took %d slots after noMoreWork = %v", n, tc.wantIdle)
			}
		})
	}
}

// TestSlotsRegistration: a restored registration is a wake-up; a lapse, or
// a registration that had not lapsed, is not.
func TestSlotsRegistration(t *testing.T) {
	s := newSlots(1)
	_, gen := s.reserve()
	s.unreserve(1)
	s.noMoreWork(gen, time.Time{})
	if s.setRegistered(true) {
		t.Fatal("a registration that had not lapsed was reported restored")
	}
	if s.setRegistered(false) {
		t.Fatal("a lapse was reported restored")
	}
	if listen, _ := s.whenIdle(); listen {
		t.Fatal("a lapsed worker listens for work")
	}
	if !s.setRegistered(true) {
		t.Fatal("a restored registration was not reported")
	}
	if n, g := s.reserve(); n != 1 || g == gen {
		t.Fatalf("after the registration was restored reserve took %d (generation %d, before %d), want 1 and a new generation", n, g, gen)
	}
}

// TestSlotsAdmitAfterStop: once stop returned, no handler is admitted; a
// start admitted before it has run, under the lock, when stop returns.
func TestSlotsAdmitAfterStop(t *testing.T) {
	s := newSlots(8)
	n, _ := s.reserve()
	var mu sync.Mutex
	admitted, refused := 0, 0
	var wg sync.WaitGroup
	stopped := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !s.admit(func() {
				select {
				case <-stopped:
					t.Error("a handler was admitted after stop returned")
				default:
				}
				mu.Lock()
				admitted++
				mu.Unlock()
			}) {
				mu.Lock()
				refused++
				mu.Unlock()
				s.unreserve(1)
			}
		}()
	}
	s.stop()
	close(stopped)
	wg.Wait()
	if admitted+refused != n {
		t.Fatalf("%d admitted and %d refused of %d", admitted, refused, n)
	}
	if got := s.held(); got != admitted {
		t.Fatalf("held = %d, want the %d admitted", got, admitted)
	}
	if s.admit(func() {}) {
		t.Fatal("admit after stop reported true")
	}
}
