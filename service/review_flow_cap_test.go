package service

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// Flow control "Caps hold at every instant, fleet-wide": RunWorkers
// on several Stores (settles pipelined with claims, batch claims at
// Concurrency > 1, workers of two lanes of which one is limited) never run
// more handlers of the lane, or of a group, than its caps. A handler runs
// strictly inside its execution's running span.
func TestReviewFlowCapRunWorkers(t *testing.T) {
	conformanceShared(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		loc := b.fresh(t)
		const stores, jobs, laneCap, groupCap = 3, 400, 5, 2
		var ss []*Store
		for range stores {
			s, _ := b.open(t, loc, WithClock(time.Now))
			ss = append(ss, s)
		}
		must(t, ss[0].PutLaneLimits(ctx, LaneLimits{Namespace: "ns", Lane: "capped", MaxRunning: laneCap, MaxRunningPerGroup: groupCap}))
		items := make([]CreateExecutionArgs, 0, jobs+100)
		for i := range jobs {
			items = append(items, CreateExecutionArgs{Namespace: "ns", Lane: "capped", Group: fmt.Sprintf("g%d", i%4), Payload: []byte(fmt.Sprintf("g%d", i%4))})
		}
		for range 100 {
			items = append(items, CreateExecutionArgs{Namespace: "ns", Lane: "free"})
		}
		_, err := ss[0].CreateExecutions(ctx, items)
		must(t, err)
		var mu sync.Mutex
		running, peak, peakGroup := 0, 0, 0
		perGroup := map[string]int{}
		done := 0
		for i, s := range ss {
			for j := range 2 {
				runWorker(t, s, WorkerArgs{
					InstanceID: fmt.Sprintf("i%d-%d", i, j), Lanes: []string{"capped", "free"}, Concurrency: 8,
					Handler: func(ctx context.Context, l Lease) ([]byte, error) {
						if l.Lane != "capped" {
							mu.Lock()
							done++
							mu.Unlock()
							return nil, nil
						}
						g := string(l.Payload)
						mu.Lock()
						running++
						perGroup[g]++
						peak = max(peak, running)
						peakGroup = max(peakGroup, perGroup[g])
						mu.Unlock()
						time.Sleep(2 * time.Millisecond)
						mu.Lock()
						running--
						perGroup[g]--
						done++
						mu.Unlock()
						return nil, nil
					},
				})
			}
		}
		start := time.Now()
		for {
			mu.Lock()
			n := done
			mu.Unlock()
			if n >= jobs+100 {
				break
			}
			if time.Since(start) > 60*time.Second {
				t.Fatalf("%d of %d executions done in %v", n, jobs+100, time.Since(start))
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Logf("%d executions done in %v", jobs+100, time.Since(start))
		if peak > laneCap || peakGroup > groupCap {
			t.Fatalf("at most %d handlers of the lane ran at once (cap %d), %d of a group (cap %d)", peak, laneCap, peakGroup, groupCap)
		}
		t.Logf("peak %d in the lane, %d in a group", peak, peakGroup)
	})
}
