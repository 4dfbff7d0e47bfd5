package service

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// The race behind TestReviewFlowRateOutOfOrderNow with real clocks:
// claimers on several Stores, each claim on the Store's own clock (Now
// time.Now() read just before the call), hammering a lane of Rate 2 per second for about 3 s. No window may
// hold more than 2 claims (by each attempt's StartedAt, the claim's Now).
func TestReviewFlowRateRace(t *testing.T) {
	conformanceShared(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		loc := b.fresh(t)
		const stores, claimers, rate = 3, 12, 2
		var ss []*Store
		for range stores {
			s, _ := b.open(t, loc, WithClock(time.Now))
			ss = append(ss, s)
		}
		must(t, ss[0].PutLaneLimits(ctx, LaneLimits{Namespace: "ns", Lane: "default", Rate: rate, RatePeriod: time.Second}))
		items := make([]CreateExecutionArgs, 200)
		for i := range items {
			items[i] = CreateExecutionArgs{Namespace: "ns", Lane: "default"}
		}
		_, err := ss[0].CreateExecutions(ctx, items)
		must(t, err)
		var mu sync.Mutex
		var claimedAt []time.Time
		stop := time.Now().Add(3 * time.Second)
		var wg sync.WaitGroup
		for c := range claimers {
			s := ss[c%stores]
			inst := fmt.Sprintf("i%d", c)
			_, err := s.RegisterWorker(ctx, RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: inst, Lanes: []string{"default"}, TTL: time.Hour})
			must(t, err)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(stop) {
					now := time.Now()
					_, err := s.ClaimExecution(ctx, ClaimArgs{Namespace: "ns", InstanceID: inst, LeaseTTL: time.Hour, Now: now})
					if errors.Is(err, ErrNoWork) {
						time.Sleep(time.Millisecond)
						continue
					}
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					claimedAt = append(claimedAt, now)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		perWindow := map[int64]int{}
		worst := 0
		for _, at := range claimedAt {
			w := at.UnixMilli() / 1000
			perWindow[w]++
			worst = max(worst, perWindow[w])
		}
		t.Logf("%d claims in %d windows, at most %d in one", len(claimedAt), len(perWindow), worst)
		if worst > rate {
			t.Fatalf("a window of 1 s held %d claims, Rate is %d: %v", worst, rate, perWindow)
		}
	})
}
