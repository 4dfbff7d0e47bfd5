package service

import (
	"fmt"
	"testing"
)

// Turns are kept apart by priority: a group that gets ready work starts
// within as many claims of its priority as there are groups with ready work
// there, however often work of another priority is claimed in between.
// Groups a and c have a backlog at priority 0; c also gets urgent work
// (priority 1), one execution at a time. Group b then gets one execution at
// priority 0 (3 groups), and every other claim of the lane is at priority 0.
// (Found by review: with one turn per lane, every urgent claim moved the
// lane's turn to c, and the priority-0 turn after c wrapped to a: b never
// started.)
func TestReviewTurnsKeptApartByPriority(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		s, _ := b.newStore(t)
		worker(t, s, "ns", "i", []string{"default"}, nil)
		for range 20 {
			create(t, s, CreateExecutionArgs{Group: "a"})
			create(t, s, CreateExecutionArgs{Group: "c"})
		}
		bID := create(t, s, CreateExecutionArgs{Group: "b"})
		var order []string
		for range 10 {
			create(t, s, CreateExecutionArgs{Group: "c", Priority: 1}) // urgent work of c
			for range 2 {
				l := claim(t, s, "i", t0)
				if l.ExecutionID == bID {
					return // b started
				}
				e := getExecution(t, s, l.ExecutionID)
				order = append(order, fmt.Sprintf("%s/p%d", e.Group, e.Priority))
			}
		}
		t.Fatalf("group b (3 groups at its priority) did not start in %d claims of the lane, %d of them at its priority; claims: %v",
			len(order), len(order)/2, order)
	})
}

// Turns are kept apart by the claiming workers' capabilities: group b's work
// requires "x"; worker w2 has it, w1 has not, and they claim in turn. b starts
// within as many of w2's claims as there are groups w2 can run. (Found by
// review: with one turn per lane, w1's claims moved the turn past b, to c,
// and w2's turn after c wrapped to a: b never started.)
func TestReviewTurnsKeptApartByCapabilities(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		s, _ := b.newStore(t)
		worker(t, s, "ns", "w1", []string{"default"}, nil)
		worker(t, s, "ns", "w2", []string{"default"}, []string{"x"})
		for range 20 {
			create(t, s, CreateExecutionArgs{Group: "a"})
			create(t, s, CreateExecutionArgs{Group: "c"})
		}
		bID := create(t, s, CreateExecutionArgs{Group: "b", RequiredCapabilities: []string{"x"}})
		var order []string
		for range 10 {
			for _, inst := range []string{"w2", "w1"} {
				l := claim(t, s, inst, t0)
				if l.ExecutionID == bID {
					return
				}
				order = append(order, inst+":"+getExecution(t, s, l.ExecutionID).Group)
			}
		}
		t.Fatalf("group b (3 groups w2 can run) did not start in %d claims of the lane, %d of them by a worker that can run it; claims: %v",
			len(order), len(order)/2, order)
	})
}
