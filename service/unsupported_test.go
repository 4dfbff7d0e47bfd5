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
