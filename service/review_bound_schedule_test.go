package service

import (
	"context"
	"testing"
	"time"
)

// Review: a schedule's Template is a CreateExecutionArgs, and PutSchedule
// now accepts a Template.Timeout (this version no longer refuses it), but
// the runs it creates have none: the README ("Timeout bounds a run" and the README on schedules
// (schedules create "the run of each due period" from the Template). A
// value accepted with a nil error must not be silently dropped; either the
// runs carry the Timeout, or PutSchedule refuses it (ErrInvalidInput
// naming Template.Timeout).
func TestReviewBoundScheduleTemplateTimeout(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, clock := b.newStore(t)
		err := s.PutSchedule(ctx, Schedule{Namespace: "ns", Name: "hourly", Every: time.Hour,
			Template: CreateExecutionArgs{Lane: "reports", Timeout: 5 * time.Second}})
		if err != nil {
			return // refused: the contract holds
		}
		scs, err := s.ListSchedules(ctx, "ns")
		must(t, err)
		if len(scs) != 1 || scs[0].Template.Timeout != 5*time.Second {
			t.Errorf("PutSchedule accepted Template.Timeout 5s; ListSchedules says %v", scs[0].Template.Timeout)
		}
		clock.Advance(time.Minute)
		_, err = s.Sweep(ctx, time.Time{}, SweeperArgs{})
		must(t, err)
		p, err := s.ListExecutions(ctx, ListExecutionsArgs{Namespace: "ns"})
		must(t, err)
		if len(p.Executions) != 1 {
			t.Fatalf("%d runs", len(p.Executions))
		}
		if got := p.Executions[0].Timeout; got != 5*time.Second {
			t.Errorf("the schedule's run has Timeout %v; the Template (accepted) said 5s", got)
		}
	})
}
