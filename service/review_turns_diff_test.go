package service

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// The same random script of creates (groups, priorities, capabilities,
// RunAt), claims by workers of one and several lanes, completes, fails,
// releases and snoozes, and limit changes, on every engine: the claims must
// take the same executions in the same order everywhere.
func TestReviewTurnsEnginesAgree(t *testing.T) {
	seeds := 12
	if os.Getenv("REVIEW_SEEDS") != "" {
		fmt.Sscan(os.Getenv("REVIEW_SEEDS"), &seeds)
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			var ref []string
			refName := ""
			for _, b := range backends() {
				if b.pooled || b.migrated || b.name == "sqlite-file" {
					continue
				}
				trace := turnsScript(t, b, uint64(seed))
				if ref == nil {
					ref, refName = trace, b.name
					continue
				}
				for i := range min(len(ref), len(trace)) {
					if ref[i] != trace[i] {
						t.Fatalf("seed %d, step %d: %s: %s\n%s: %s\n(previous: %s)", seed, i, refName, ref[i], b.name, trace[i], strings.Join(ref[max(0, i-4):i], " | "))
					}
				}
			}
		})
	}
}

func turnsScript(t *testing.T, b backend, seed uint64) []string {
	ctx := context.Background()
	s, _ := b.newStore(t)
	rng := rand.New(rand.NewPCG(seed, 99))
	now := t0
	for _, w := range []struct {
		inst  string
		lanes []string
		caps  []string
	}{{"w1", []string{"l1", "l2"}, nil}, {"w2", []string{"l1"}, []string{"x"}}, {"w3", []string{"l1", "l2", "l3"}, []string{"x"}}} {
		_, err := s.RegisterWorker(ctx, RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: w.inst, Lanes: w.lanes, Capabilities: w.caps, TTL: 24 * time.Hour, Now: t0})
		must(t, err)
	}
	var ids []uuid.UUID
	index := map[uuid.UUID]int{}
	var running []Lease
	var trace []string
	for step := range 250 {
		now = now.Add(time.Duration(rng.IntN(400)) * time.Millisecond)
		switch op := rng.IntN(10); {
		case op <= 2 || step < 5:
			n := 1 + rng.IntN(4)
			as := make([]CreateExecutionArgs, n)
			for i := range as {
				a := CreateExecutionArgs{Namespace: "ns", Lane: []string{"l1", "l1", "l2", "l3"}[rng.IntN(4)], Now: now,
					Group: []string{"", "a", "b", "c", "d"}[rng.IntN(5)], Priority: rng.IntN(3), MaxAttempts: 3,
					Payload: make([]byte, rng.IntN(3))}
				if rng.IntN(4) == 0 {
					a.RequiredCapabilities = []string{"x"}
				}
				if rng.IntN(4) == 0 {
					a.RunAt = now.Add(time.Duration(rng.IntN(3000)-1000) * time.Millisecond)
				}
				if a.Lane == "l2" && rng.IntN(2) == 0 {
					a.Group = ""
				}
				as[i] = a
			}
			got, err := s.CreateExecutions(ctx, as)
			must(t, err)
			for _, id := range got {
				index[id] = len(ids)
				ids = append(ids, id)
			}
		case (op == 3 || op == 5) && len(running) > 0:
			i := rng.IntN(len(running))
			l := running[i]
			running = slices.Delete(running, i, i+1)
			var err error
			switch rng.IntN(4) {
			case 0:
				err = s.CompleteExecution(ctx, CompleteArgs{Lease: l, Now: now})
			case 1:
				err = s.FailExecution(ctx, FailArgs{Lease: l, Reason: "x", Now: now})
			case 2:
				err = s.ReleaseLease(ctx, ReleaseArgs{Lease: l, Now: now})
			default:
				err = s.SnoozeLease(ctx, SnoozeArgs{Lease: l, Until: now.Add(time.Duration(rng.IntN(1500)) * time.Millisecond), Now: now})
			}
			trace = append(trace, fmt.Sprintf("settle %d: %v", index[l.ExecutionID], err))
		case op == 4 && rng.IntN(2) == 0:
			lane := []string{"l1", "l2"}[rng.IntN(2)]
			l := LaneLimits{Namespace: "ns", Lane: lane, MaxRunning: rng.IntN(8), MaxRunningPerGroup: rng.IntN(3)}
			if rng.IntN(3) == 0 {
				l.Rate, l.RatePeriod = 2+rng.IntN(5), time.Second
			}
			must(t, s.PutLaneLimits(ctx, l))
			trace = append(trace, fmt.Sprintf("limits %+v", l))
		default:
			inst := []string{"w1", "w2", "w3"}[rng.IntN(3)]
			n := 1 + rng.IntN(5)
			ls, err := s.ClaimExecutions(ctx, ClaimArgs{Namespace: "ns", InstanceID: inst, LeaseTTL: time.Hour, Now: now}, n)
			if err != nil && !errors.Is(err, ErrNoWork) {
				t.Fatalf("%s: claim: %v", b.name, err)
			}
			var got []int
			for _, l := range ls {
				got = append(got, index[l.ExecutionID])
			}
			running = append(running, ls...)
			trace = append(trace, fmt.Sprintf("%s claims %d at +%v: %v %v", inst, n, now.Sub(t0), got, err))
		}
	}
	return trace
}
