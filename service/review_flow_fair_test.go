package service

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"
)

// fair shares: a group with 10 ready executions created after a
// group with a big backlog: all 10 start within the next 20 claims of the
// lane, here in batches of 3 and with a cap on the lane.
func TestReviewFlowFairBatches(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		worker(t, s, "ns", "i", []string{"default"}, nil)
		noisy := make([]CreateExecutionArgs, 2000)
		for i := range noisy {
			noisy[i] = CreateExecutionArgs{Namespace: "ns", Lane: "default", Group: "noisy"}
		}
		_, err := s.CreateExecutions(ctx, noisy)
		must(t, err)
		putLimits(t, s, LaneLimits{MaxRunning: 1000})
		claimAll(t, s, "i", t0, 7)
		quiet := map[uuid.UUID]bool{}
		for range 10 {
			quiet[create(t, s, CreateExecutionArgs{Group: "quiet"})] = true
		}
		var order []bool
		for len(order) < 20 {
			for _, l := range claimAll(t, s, "i", t0, 3) {
				order = append(order, quiet[l.ExecutionID])
			}
		}
		seen := 0
		for _, q := range order[:20] {
			if q {
				seen++
			}
		}
		if seen != 10 {
			t.Fatalf("%d of the quiet group's 10 started in the next 20 claims: %v", seen, fmt.Sprint(order[:20]))
		}
	})
}
