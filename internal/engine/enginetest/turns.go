package enginetest

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/rosterdb/roster/internal/engine"
)

// testTurnsFollowTheModel creates, claims (batches of 1 to 4) and completes
// at random in a lane with groups, without a cap per group and with caps of
// 1 and 2, and checks every claim's executions, in their order, against a
// model of the turns written plainly below: at each priority, from the
// highest down, the groups with ready work in key order after the group the
// lane served last at that priority, then from the first up to it; each
// group's first before any group's second; a group at its cap passed over
// (counting what the claim took of it at a higher priority).
func testTurnsFollowTheModel(t *testing.T, h Harness) {
	for seed := range 6 {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			v := setup(t, h)
			rng := rand.New(rand.NewPCG(uint64(seed), 7))
			v.register("ns", "i", []string{"l"}, nil, 1, 1_000_000)
			m := turnModel{perGroup: int64(seed % 3), running: map[string]int64{}, last: map[int64]string{}}
			if m.perGroup > 0 {
				v.putLimits(engine.LaneLimits{Namespace: "ns", Lane: "l", MaxPerGroup: m.perGroup})
			}
			grouped := v.execution("ns", "l")
			grouped.Group = "a"
			v.write(func(ctx context.Context, q engine.Queries) error {
				return q.LaneTurnsTouch(ctx, []engine.Execution{grouped})
			})
			var running []engine.ClaimedLease
			now := int64(100)
			for step := range 80 {
				now++
				switch op := rng.IntN(3); {
				case op == 0 || step < 4:
					var es []engine.Execution
					for range 1 + rng.IntN(4) {
						e := v.execution("ns", "l")
						e.Group = []string{"", "a", "b", "c", "d"}[rng.IntN(5)]
						e.Priority = int64(rng.IntN(2))
						e.CreatedAtMs = now
						e.RunAtMs = now - int64(rng.IntN(50)) // ready at once, RunAt out of creation order
						es = append(es, e)
					}
					v.insert(es...)
					m.ready = append(m.ready, es...)
				case op == 1 && len(running) > 0:
					i := rng.IntN(len(running))
					v.complete(running[i], now, nil)
					m.running[v.get(running[i].ExecutionID).Group]--
					running = slices.Delete(running, i, i+1)
				default:
					n := 1 + rng.IntN(4)
					got := v.claimAt("ns", "i", n, now, now+1_000_000)
					want := m.claim(n)
					if !slices.Equal(executionIDs(got), want) {
						t.Fatalf("step %d, a claim of %d: got %v, the model says %v", step, n, fmtIDs(executionIDs(got)), fmtIDs(want))
					}
					running = append(running, got...)
				}
			}
		})
	}
}

// turnModel is a lane with groups as the turns see it.
type turnModel struct {
	perGroup int64
	ready    []engine.Execution
	running  map[string]int64
	last     map[int64]string // the group served last, by priority
}

// claim takes up to n of the ready executions in turns and says which, in
// the order taken.
func (m *turnModel) claim(n int) []uuid.UUID {
	var taken []engine.Execution
	levels := map[int64]bool{}
	for _, e := range m.ready {
		levels[e.Priority] = true
	}
	for _, p := range slices.Backward(slices.Sorted(maps.Keys(levels))) {
		byGroup := map[string][]engine.Execution{}
		for _, e := range m.ready {
			if e.Priority == p {
				byGroup[e.Group] = append(byGroup[e.Group], e)
			}
		}
		keys := slices.Sorted(maps.Keys(byGroup))
		after := slices.IndexFunc(keys, func(k string) bool { return k > m.last[p] })
		if after < 0 {
			after = len(keys)
		}
		var lists [][]engine.Execution
		for _, g := range append(keys[after:], keys[:after]...) {
			list := byGroup[g]
			slices.SortFunc(list, func(a, b engine.Execution) int {
				return cmp.Or(cmp.Compare(a.RunAtMs, b.RunAtMs), bytes.Compare(a.ID[:], b.ID[:]))
			})
			if m.perGroup > 0 {
				list = list[:max(0, min(int64(len(list)), m.perGroup-m.running[g]))]
			}
			lists = append(lists, list)
		}
		for k, added := 0, true; added && len(taken) < n; k++ {
			added = false
			for _, list := range lists {
				if k < len(list) && len(taken) < n {
					taken = append(taken, list[k])
					m.running[list[k].Group]++
					added = true
				}
			}
		}
	}
	ids := make([]uuid.UUID, len(taken))
	for i, e := range taken {
		ids[i] = e.ID
		m.ready = slices.DeleteFunc(m.ready, func(r engine.Execution) bool { return r.ID == e.ID })
		m.last[e.Priority] = e.Group
	}
	return ids
}
