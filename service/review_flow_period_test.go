package service

import (
	"context"
	"testing"
	"time"
)

// Flow control: only "a RatePeriod outside 1 s to 24 h" (with a
// Rate) is ErrInvalidInput; a period of 1.0000005 s is inside.
func TestReviewFlowRatePeriodInsideRange(t *testing.T) {
	validationOnly(t, func(t *testing.T, b backend) {
		s, _ := b.newStore(t)
		err := s.PutLaneLimits(context.Background(), LaneLimits{Namespace: "ns", Lane: "default", Rate: 1, RatePeriod: time.Second + 500*time.Nanosecond})
		if err != nil {
			t.Fatalf("PutLaneLimits with RatePeriod %v (inside 1 s to 24 h): %v", time.Second+500*time.Nanosecond, err)
		}
	})
}
