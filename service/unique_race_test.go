package service

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

// One execution holds a unique key at a time, under any concurrency: many
// Stores create the same keys at once, in batches (their keys in any
// order) and one by one, with and without UniqueFor, and cancel what they
// get at once, so that a key's execution has often ended while another
// create, begun before it committed, is still under way. A key created
// with a UniqueFor (30 days here) by every create has exactly one
// execution, ever; a create that begins after a UniqueFor create of its
// key returned the execution it made gets that execution.
func TestUniqueKeyOneHolderUnderConcurrency(t *testing.T) {
	conformanceShared(t, func(t *testing.T, b backend) {
		loc := b.fresh(t)
		const stores, rounds = 8, 25
		const hold = 30 * 24 * time.Hour
		ss := make([]*Store, stores)
		for i := range ss {
			// Each Store's clock is its own millisecond, so that an
			// execution's CreatedAt tells which Store made it.
			var clock *fakeClock
			ss[i], clock = b.open(t, loc)
			clock.Advance(time.Duration(i) * time.Millisecond)
		}
		// uf keys: every create has a UniqueFor; mix keys: the creates of
		// even Stores only; plain keys: none.
		uniqueFor := func(store int, key string) time.Duration {
			if strings.HasPrefix(key, "uf-") || strings.HasPrefix(key, "mix-") && store%2 == 0 {
				return hold
			}
			return 0
		}
		type call struct {
			store      int
			key        string
			began, end time.Time
			id         uuid.UUID
		}
		var mu sync.Mutex
		var calls []call
		var failures []string
		fail := func(format string, args ...any) {
			mu.Lock()
			failures = append(failures, fmt.Sprintf(format, args...))
			mu.Unlock()
		}
		for round := range rounds {
			var keys []string
			for k := range 3 {
				keys = append(keys, fmt.Sprintf("uf-%d-%d", round, k))
			}
			for k := range 2 {
				keys = append(keys, fmt.Sprintf("mix-%d-%d", round, k), fmt.Sprintf("plain-%d-%d", round, k))
			}
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i, s := range ss {
				wg.Go(func() {
					ctx := context.Background()
					order := append([]string(nil), keys...)
					rand.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
					args := make([]CreateExecutionArgs, len(order))
					for j, k := range order {
						args[j] = CreateExecutionArgs{Namespace: "ns", Lane: "default", UniqueKey: k, UniqueFor: uniqueFor(i, k)}
					}
					var got []call
					<-start
					if (i+round)%2 == 0 {
						began := time.Now()
						ids, err := s.CreateExecutions(ctx, args)
						end := time.Now()
						if err != nil {
							fail("round %d store %d: batch: %v", round, i, err)
							return
						}
						for j, id := range ids {
							got = append(got, call{store: i, key: order[j], began: began, end: end, id: id})
						}
					} else {
						for _, a := range args {
							began := time.Now()
							id, err := s.CreateExecution(ctx, a)
							if err != nil {
								fail("round %d store %d: %s: %v", round, i, a.UniqueKey, err)
								return
							}
							got = append(got, call{store: i, key: a.UniqueKey, began: began, end: time.Now(), id: id})
						}
					}
					for _, c := range got {
						if err := s.CancelExecution(ctx, CancelExecutionArgs{ID: c.id, Reason: "ended at once"}); err != nil {
							fail("round %d store %d: cancel %s: %v", round, i, c.key, err)
						}
					}
					mu.Lock()
					calls = append(calls, got...)
					mu.Unlock()
				})
			}
			close(start)
			wg.Wait()
		}
		if len(failures) > 0 {
			t.Fatalf("%d calls failed, e.g.:\n%s", len(failures), strings.Join(failures[:min(5, len(failures))], "\n"))
		}
		executions := map[string]map[uuid.UUID]Execution{}
		for after := ""; ; {
			p, err := ss[0].ListExecutions(context.Background(), ListExecutionsArgs{Namespace: "ns", After: after, Limit: 10000})
			must(t, err)
			for _, e := range p.Executions {
				if executions[e.UniqueKey] == nil {
					executions[e.UniqueKey] = map[uuid.UUID]Execution{}
				}
				executions[e.UniqueKey][e.ID] = e
			}
			if after = p.Next; after == "" {
				break
			}
		}
		byKey := map[string][]call{}
		for _, c := range calls {
			byKey[c.key] = append(byKey[c.key], c)
		}
		keys := make([]string, 0, len(byKey))
		for k := range byKey {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var bad []string
		for _, k := range keys {
			cs, es := byKey[k], executions[k]
			for _, c := range cs {
				if _, ok := es[c.id]; !ok {
					bad = append(bad, fmt.Sprintf("%s: store %d got %s, no execution of the key", k, c.store, c.id))
				}
			}
			switch {
			case strings.HasPrefix(k, "uf-"):
				ids := map[uuid.UUID]bool{}
				for _, c := range cs {
					ids[c.id] = true
				}
				if len(es) != 1 || len(ids) != 1 {
					bad = append(bad, fmt.Sprintf("%s (always UniqueFor): %d executions; %d creates got %d distinct ids",
						k, len(es), len(cs), len(ids)))
				}
			case strings.HasPrefix(k, "mix-"):
				for _, h := range cs {
					made := es[h.id].CreatedAt.Equal(t0.Add(time.Duration(h.store) * time.Millisecond))
					if uniqueFor(h.store, k) == 0 || !made {
						continue
					}
					for _, c := range cs {
						if c.began.After(h.end) && c.id != h.id {
							bad = append(bad, fmt.Sprintf("%s: store %d began after store %d's UniqueFor create of %s returned, and got %s (%d executions)",
								k, c.store, h.store, h.id, c.id, len(es)))
							break
						}
					}
				}
			}
		}
		if len(bad) > 0 {
			t.Fatalf("%d breaches of the one-holder rule, e.g.:\n%s", len(bad), strings.Join(bad[:min(8, len(bad))], "\n"))
		}
	})
}
