package service

import (
	"context"
	"reflect"
	"testing"
	"time"
)

// TestThroughput: completions and failures (for good) per lane and minute
// from a time on, by FinishedAt; a failure with attempts left, a cancel
// and live work are not counted; a read-only Store reads them.
func TestThroughput(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		loc := b.fresh(t)
		s, _ := b.open(t, loc)
		worker(t, s, "ns", "i", []string{"a", "b"}, nil)
		end := func(lane string, at time.Time, fail bool, attempts int) {
			t.Helper()
			create(t, s, CreateExecutionArgs{Namespace: "ns", Lane: lane, MaxAttempts: attempts, Now: at})
			l, err := s.ClaimExecution(ctx, ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Minute, Now: at})
			must(t, err)
			if fail {
				must(t, s.FailExecution(ctx, FailArgs{Lease: l, Reason: "x", Now: at}))
			} else {
				must(t, s.CompleteExecution(ctx, CompleteArgs{Lease: l, Now: at}))
			}
		}
		end("a", t0.Add(10*time.Second), false, 1) // 12:00
		end("a", t0.Add(70*time.Second), true, 1)  // 12:01
		end("a", t0.Add(75*time.Second), false, 1) // 12:01
		end("b", t0.Add(80*time.Second), false, 1) // 12:01
		end("b", t0.Add(85*time.Second), true, 2)  // fails with an attempt left: waits again
		cancelled := create(t, s, CreateExecutionArgs{Namespace: "ns", Lane: "a", Now: t0})
		must(t, s.CancelExecution(ctx, CancelExecutionArgs{ID: cancelled, Now: t0.Add(90 * time.Second)}))
		create(t, s, CreateExecutionArgs{Namespace: "ns", Lane: "a", Now: t0}) // live

		got, err := s.Throughput(ctx, t0)
		must(t, err)
		want := []LaneMinute{
			{Namespace: "ns", Lane: "a", Minute: t0, Completed: 1},
			{Namespace: "ns", Lane: "a", Minute: t0.Add(time.Minute), Completed: 1, Failed: 1},
			{Namespace: "ns", Lane: "b", Minute: t0.Add(time.Minute), Completed: 1},
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Throughput since 12:00:\n got %+v\nwant %+v", got, want)
		}
		// Since is rounded down to its minute.
		got, err = s.Throughput(ctx, t0.Add(61*time.Second))
		must(t, err)
		if !reflect.DeepEqual(got, want[1:]) {
			t.Fatalf("Throughput since 12:01:01:\n got %+v\nwant %+v", got, want[1:])
		}
		if got, err = s.Throughput(ctx, t0.Add(time.Hour)); err != nil || len(got) != 0 {
			t.Fatalf("Throughput of an empty window: %+v, %v", got, err)
		}
		if b.shared {
			ro, _ := b.open(t, loc, WithReadOnly())
			got, err = ro.Throughput(ctx, t0)
			must(t, err)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("Throughput of a read-only Store: %+v", got)
			}
		}
	})
}
