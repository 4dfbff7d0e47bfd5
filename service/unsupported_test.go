package service

import (
	"context"
	"strings"
	"testing"
	"time"
)

// Bound leases and run timeouts are not granted by this version: asking for
// either is ErrInvalidInput naming the field, with nothing written, and
// every lease says Bound false with no Deadline.
func TestBoundLeasesAndTimeoutsAreRefused(t *testing.T) {
	validationOnly(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		worker(t, s, "ns", "i", []string{"default"}, nil)
		for _, c := range []struct {
			timeout time.Duration
			says    string
		}{
			{time.Second, "not supported"},
			{-time.Second, "neither 0 nor"},
			{31 * 24 * time.Hour, "neither 0 nor"},
			{time.Microsecond, "neither 0 nor"},
		} {
			_, err := s.CreateExecution(ctx, CreateExecutionArgs{Namespace: "ns", Lane: "default", Timeout: c.timeout})
			wantErr(t, err, ErrInvalidInput)
			if !strings.Contains(err.Error(), "Timeout") || !strings.Contains(err.Error(), c.says) {
				t.Errorf("Timeout %v: %v", c.timeout, err)
			}
		}
		if p, _ := s.ListExecutions(ctx, ListExecutionsArgs{}); len(p.Executions) != 0 {
			t.Fatalf("a refused create wrote %d executions", len(p.Executions))
		}
		create(t, s, CreateExecutionArgs{})
		_, err := s.ClaimExecution(ctx, ClaimArgs{Namespace: "ns", InstanceID: "i", Bound: true, Now: t0})
		wantErr(t, err, ErrInvalidInput)
		if !strings.Contains(err.Error(), "Bound") {
			t.Errorf("Bound: %v", err)
		}
		l := claim(t, s, "i", t0)
		if l.Bound || !l.Deadline.IsZero() || getExecution(t, s, l.ExecutionID).Timeout != 0 {
			t.Fatalf("a lease of its own: %+v", l)
		}
	})
}

// Agents bound to a worker registration are not granted by this version: a
// holder is ErrInvalidInput naming the field, nothing written; clearing a
// holder that cannot be set is a no-op for a live agent.
func TestAgentHoldersAreRefused(t *testing.T) {
	validationOnly(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		a := agent("held")
		a.HolderNamespace, a.HolderInstanceID = "ns", "i"
		err := s.InsertAgent(ctx, a)
		wantErr(t, err, ErrInvalidInput)
		if !strings.Contains(err.Error(), "HolderNamespace") {
			t.Errorf("InsertAgent with a holder: %v", err)
		}
		_, err = s.GetAgent(ctx, "held")
		wantErr(t, err, ErrNotFound)
		live := agent("live")
		must(t, s.InsertAgent(ctx, live))
		wantErr(t, s.SetAgentHolder(ctx, "live", "", "i"), ErrInvalidInput)
		must(t, s.SetAgentHolder(ctx, "live", "", ""))
		wantErr(t, s.SetAgentHolder(ctx, "nobody", "", ""), ErrNotFound)
		must(t, s.UpdateAgentState(ctx, UpdateAgentStateArgs{ID: "live", State: AgentTerminal, Reason: ReasonKilled}))
		wantErr(t, s.SetAgentHolder(ctx, "live", "", ""), ErrInvalidTransition)
	})
}
