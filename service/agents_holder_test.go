package service

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// heldAgent is agent(id) in state st, held by the registration (ns, inst).
func heldAgent(id string, st AgentState, ns, inst string) Agent {
	a := agent(id)
	a.State, a.HolderNamespace, a.HolderInstanceID = st, ns, inst
	if st == AgentTerminal {
		a.TerminalReason = ReasonCompleted
	}
	return a
}

// wantAgentStats fails unless Stats counts the agents per state as want
// (states not named: 0) and the database's own consistency check is clean.
func wantAgentStats(t *testing.T, s *Store, want map[AgentState]int) {
	t.Helper()
	ctx := context.Background()
	st, err := s.Stats(ctx, time.Time{})
	must(t, err)
	for _, state := range []AgentState{AgentSpawned, AgentRunning, AgentSuspended, AgentTerminal} {
		if st.Agents[state] != want[state] {
			t.Errorf("Stats: %d %s agents, want %d (all: %v)", st.Agents[state], state, want[state], st.Agents)
		}
	}
	problems, err := s.Check(ctx)
	must(t, err)
	if len(problems) != 0 {
		t.Errorf("Check: %v", problems)
	}
}

// InsertAgent and SpawnAgent store the holder as given, registered or not;
// every read returns it.
func TestAgentHolderStored(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		worker(t, s, "ns", "i", []string{"default"}, nil)
		for _, tc := range []struct {
			name  string
			agent Agent
			spawn bool
		}{
			{"insert registered", heldAgent("a", AgentRunning, "ns", "i"), false},
			{"insert unregistered", heldAgent("b", AgentSpawned, "ns", "later"), false},
			{"insert terminal", heldAgent("c", AgentTerminal, "ns", "i"), false},
			{"spawn keyed", func() Agent { a := heldAgent("d", AgentSpawned, "ns", "i"); a.IdempotencyKey = "k"; return a }(), true},
			{"spawn unkeyed", heldAgent("e", AgentSpawned, "other", "i"), true},
			{"no holder", agent("f"), false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if tc.spawn {
					got, created, err := s.SpawnAgent(ctx, tc.agent)
					must(t, err)
					if !created || got.HolderNamespace != tc.agent.HolderNamespace || got.HolderInstanceID != tc.agent.HolderInstanceID {
						t.Fatalf("SpawnAgent = %+v, %v", got, created)
					}
				} else {
					must(t, s.InsertAgent(ctx, tc.agent))
				}
				got, err := s.GetAgent(ctx, tc.agent.ID)
				must(t, err)
				if got.HolderNamespace != tc.agent.HolderNamespace || got.HolderInstanceID != tc.agent.HolderInstanceID {
					t.Fatalf("GetAgent: holder (%q, %q), want (%q, %q)", got.HolderNamespace, got.HolderInstanceID,
						tc.agent.HolderNamespace, tc.agent.HolderInstanceID)
				}
			})
		}
		// A repeated spawn returns the stored agent, holder included.
		again := heldAgent("d2", AgentSpawned, "elsewhere", "x")
		again.IdempotencyKey, again.SpawnFingerprint = "k", "fp-d"
		got, created, err := s.SpawnAgent(ctx, again)
		must(t, err)
		if created || got.ID != "d" || got.HolderNamespace != "ns" || got.HolderInstanceID != "i" {
			t.Fatalf("repeated SpawnAgent = %+v, created %v", got, created)
		}
		found, err := s.FindAgentByIdempotencyKey(ctx, "alice", "k")
		must(t, err)
		if found.HolderNamespace != "ns" || found.HolderInstanceID != "i" {
			t.Fatalf("FindAgentByIdempotencyKey: %+v", found)
		}
		live := heldAgent("g", AgentRunning, "ns", "i")
		live.ProviderSessionID = "sess-g"
		must(t, s.InsertAgent(ctx, live))
		found, err = s.FindLiveAgentByProviderSession(ctx, "anthropic", "sess-g")
		must(t, err)
		if found.HolderNamespace != "ns" || found.HolderInstanceID != "i" {
			t.Fatalf("FindLiveAgentByProviderSession: %+v", found)
		}
		page, err := s.ListAgents(ctx, ListAgentsArgs{})
		must(t, err)
		for _, a := range page.Agents {
			if a.ID == "a" && (a.HolderNamespace != "ns" || a.HolderInstanceID != "i") {
				t.Fatalf("ListAgents: %+v", a)
			}
		}
	})
}

// A holder is both fields, each an identifier, or neither: anything else is
// ErrInvalidInput naming the field, with nothing written.
func TestAgentHalfHolderRefused(t *testing.T) {
	validationOnly(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		for _, tc := range []struct {
			name, ns, inst, field string
		}{
			{"namespace only", "ns", "", "HolderInstanceID"},
			{"instance only", "", "i", "HolderNamespace"},
			{"bad namespace", "n\ns", "i", "HolderNamespace"},
			{"bad instance", "ns", strings.Repeat("x", 1000), "HolderInstanceID"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				a := heldAgent("held", AgentRunning, tc.ns, tc.inst)
				for _, write := range []func() error{
					func() error { return s.InsertAgent(ctx, a) },
					func() error { _, _, err := s.SpawnAgent(ctx, a); return err },
				} {
					err := write()
					wantErr(t, err, ErrInvalidInput)
					if !strings.Contains(err.Error(), tc.field) {
						t.Errorf("the error does not name %s: %v", tc.field, err)
					}
				}
				_, err := s.GetAgent(ctx, "held")
				wantErr(t, err, ErrNotFound)
				_, err = s.ListAgents(ctx, ListAgentsArgs{HolderNamespace: tc.ns, HolderInstanceID: tc.inst})
				wantErr(t, err, ErrInvalidInput)
				if !strings.Contains(err.Error(), tc.field) {
					t.Errorf("ListAgents: the error does not name %s: %v", tc.field, err)
				}
			})
		}
		_, err := s.ListAgents(ctx, ListAgentsArgs{Host: "bad\nhost"})
		wantErr(t, err, ErrInvalidInput)
	})
}

// SetAgentHolder moves a live agent's holder (or clears it); half a holder
// is ErrInvalidInput, a terminal agent ErrInvalidTransition, an unknown one
// ErrNotFound, each changing nothing.
func TestSetAgentHolder(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		must(t, s.InsertAgent(ctx, heldAgent("live", AgentRunning, "ns", "i")))
		must(t, s.InsertAgent(ctx, heldAgent("ended", AgentTerminal, "ns", "i")))
		for _, tc := range []struct {
			name, id, ns, inst string
			want               error
			wantNS, wantInst   string // the holder after the call
		}{
			{"move", "live", "ns", "j", nil, "ns", "j"},
			{"same", "live", "ns", "j", nil, "ns", "j"},
			{"another namespace", "live", "other", "j", nil, "other", "j"},
			{"namespace only", "live", "ns", "", ErrInvalidInput, "other", "j"},
			{"instance only", "live", "", "i", ErrInvalidInput, "other", "j"},
			{"bad identifier", "live", "ns", "a\tb", ErrInvalidInput, "other", "j"},
			{"clear", "live", "", "", nil, "", ""},
			{"set again", "live", "ns", "i", nil, "ns", "i"},
			{"terminal", "ended", "ns", "j", ErrInvalidTransition, "ns", "i"},
			{"terminal cleared", "ended", "", "", ErrInvalidTransition, "ns", "i"},
			{"unknown", "nobody", "ns", "i", ErrNotFound, "", ""},
			{"bad id", "", "ns", "i", ErrInvalidInput, "", ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				err := s.SetAgentHolder(ctx, tc.id, tc.ns, tc.inst)
				if tc.want == nil {
					must(t, err)
				} else {
					wantErr(t, err, tc.want)
				}
				if tc.id == "nobody" || tc.id == "" {
					return
				}
				a, err := s.GetAgent(ctx, tc.id)
				must(t, err)
				if a.HolderNamespace != tc.wantNS || a.HolderInstanceID != tc.wantInst {
					t.Fatalf("holder (%q, %q), want (%q, %q)", a.HolderNamespace, a.HolderInstanceID, tc.wantNS, tc.wantInst)
				}
			})
		}
		if a, _ := s.GetAgent(ctx, "live"); a.State != AgentRunning || !a.StateChangedAt.Equal(t0) {
			t.Fatalf("SetAgentHolder changed the state: %+v", a)
		}
	})
}

// heldLedger stores, for the registrations (ns, i) and (ns, j) and another
// namespace's (other, i), live and terminal agents, and returns which ids
// (ns, i) holds live.
func heldLedger(t *testing.T, s *Store) []string {
	t.Helper()
	ctx := context.Background()
	for _, a := range []Agent{
		heldAgent("i-spawned", AgentSpawned, "ns", "i"),
		heldAgent("i-running", AgentRunning, "ns", "i"),
		heldAgent("i-suspended", AgentSuspended, "ns", "i"),
		heldAgent("i-ended", AgentTerminal, "ns", "i"),
		heldAgent("j-running", AgentRunning, "ns", "j"),
		heldAgent("other-i-running", AgentRunning, "other", "i"),
		agent("unheld"),
	} {
		must(t, s.InsertAgent(ctx, a))
	}
	return []string{"i-running", "i-spawned", "i-suspended"}
}

// wantAbandoned fails unless exactly the agents of ids are terminal with
// reason abandoned at at, every other agent of heldLedger being as stored.
func wantAbandoned(t *testing.T, s *Store, ids []string, at time.Time) {
	t.Helper()
	page, err := s.ListAgents(context.Background(), ListAgentsArgs{})
	must(t, err)
	for _, a := range page.Agents {
		switch {
		case slices.Contains(ids, a.ID):
			if a.State != AgentTerminal || a.TerminalReason != ReasonAbandoned || !a.StateChangedAt.Equal(at) {
				t.Errorf("held agent %s: %s %s at %v, want terminal abandoned at %v", a.ID, a.State, a.TerminalReason, a.StateChangedAt, at)
			}
		case a.ID == "i-ended":
			if a.TerminalReason != ReasonCompleted || !a.StateChangedAt.Equal(t0) {
				t.Errorf("an ended agent was changed: %+v", a)
			}
		default:
			if a.State == AgentTerminal || !a.StateChangedAt.Equal(t0) {
				t.Errorf("agent %s of another holder was changed: %+v", a.ID, a)
			}
		}
	}
}

// MarkWorkerDead ends, in its transaction, exactly the live agents the
// registration holds: terminal, reason abandoned, at its Now. Its terminal
// agents, other registrations' (the same instance id in another namespace
// included) and unheld ones are untouched; Stats counts them right after.
func TestMarkWorkerDeadAbandonsHeldAgents(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		for _, tc := range []struct {
			name       string
			registered []string // instances of "ns" registered before the agents
		}{
			{"registered before", []string{"i", "j"}},
			{"registered after the agents", nil},
		} {
			t.Run(tc.name, func(t *testing.T) {
				s, _ := b.newStore(t)
				for _, inst := range tc.registered {
					worker(t, s, "ns", inst, []string{"default"}, nil)
				}
				held := heldLedger(t, s)
				if tc.registered == nil {
					worker(t, s, "ns", "i", []string{"default"}, nil)
					worker(t, s, "other", "i", []string{"default"}, nil)
				}
				wantAgentStats(t, s, map[AgentState]int{AgentSpawned: 2, AgentRunning: 3, AgentSuspended: 1, AgentTerminal: 1})
				at := t0.Add(90 * time.Second)
				must(t, s.MarkWorkerDead(ctx, MarkWorkerDeadArgs{Namespace: "ns", InstanceID: "i", Reason: "deploy", Now: at}))
				wantAbandoned(t, s, held, at)
				wantAgentStats(t, s, map[AgentState]int{AgentSpawned: 1, AgentRunning: 2, AgentTerminal: 4})
				// The registration is gone: a second mark-dead is refused and
				// writes nothing.
				wantErr(t, s.MarkWorkerDead(ctx, MarkWorkerDeadArgs{Namespace: "ns", InstanceID: "i", Now: at.Add(time.Second)}), ErrNotRegistered)
				wantAbandoned(t, s, held, at)
				// An agent moved to another holder is not the dead one's.
				must(t, s.InsertAgent(ctx, heldAgent("moved", AgentRunning, "ns", "i")))
				must(t, s.SetAgentHolder(ctx, "moved", "ns", "j"))
				worker(t, s, "ns", "i", []string{"default"}, nil)
				must(t, s.MarkWorkerDead(ctx, MarkWorkerDeadArgs{Namespace: "ns", InstanceID: "i", Now: at.Add(time.Minute)}))
				if a, _ := s.GetAgent(ctx, "moved"); a.State != AgentRunning {
					t.Fatalf("an agent moved away was abandoned: %+v", a)
				}
			})
		}
	})
}

// A sweep that removes a lapsed registration ends the live agents it holds
// at the sweep's time, in the batch's transaction; a registration still alive
// keeps its agents. Stats counts them right after.
func TestSweepAbandonsHeldAgents(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		for _, tc := range []struct {
			name  string
			sweep func(s *Store, now time.Time) error
		}{
			{"SweepExpiredWorkers", func(s *Store, now time.Time) error {
				n, err := s.SweepExpiredWorkers(ctx, now)
				if err == nil && n != 2 {
					t.Errorf("swept %d, want 2", n)
				}
				return err
			}},
			{"Sweep", func(s *Store, now time.Time) error {
				r, err := s.Sweep(ctx, now, SweeperArgs{})
				if err == nil && r.Swept != 2 {
					t.Errorf("swept %d, want 2", r.Swept)
				}
				return err
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				s, _ := b.newStore(t)
				held := heldLedger(t, s)
				// (ns, i) and (other, i) lapse after a minute; (ns, j) is
				// alive for an hour.
				for _, k := range [][2]string{{"ns", "i"}, {"other", "i"}} {
					_, err := s.RegisterWorker(ctx, RegisterWorkerArgs{Namespace: k[0], WorkerID: "w", InstanceID: k[1], TTL: time.Minute, Now: t0})
					must(t, err)
				}
				worker(t, s, "ns", "j", []string{"default"}, nil)
				now := t0.Add(5 * time.Minute)
				must(t, tc.sweep(s, now))
				wantAbandoned(t, s, append(held, "other-i-running"), now)
				if a, _ := s.GetAgent(ctx, "j-running"); a.State != AgentRunning {
					t.Fatalf("an alive registration's agent was ended: %+v", a)
				}
				wantAgentStats(t, s, map[AgentState]int{AgentSpawned: 1, AgentRunning: 1, AgentTerminal: 5})
			})
		}
	})
}

// ListAgents filters by host and holder, alone and with every other filter,
// and pages through each combination.
func TestListAgentsByHostAndHolder(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		mk := func(id string, st AgentState, owner, ns, host, hns, hinst string) Agent {
			a := heldAgent(id, st, hns, hinst)
			a.OwnerActor, a.OwnerWriteNamespace, a.OwnerVisibleNamespaces, a.Host = owner, ns, nil, host
			return a
		}
		for _, a := range []Agent{
			mk("a1", AgentRunning, "alice", "x", "h1", "ns", "i"),
			mk("a2", AgentSuspended, "alice", "x", "h1", "ns", "i"),
			mk("a3", AgentTerminal, "alice", "y", "h1", "ns", "i"),
			mk("a4", AgentRunning, "bob", "x", "h2", "ns", "i"),
			mk("a5", AgentRunning, "bob", "y", "h1", "other", "i"),
			mk("a6", AgentSpawned, "bob", "x", "h1", "", ""),
			mk("a7", AgentRunning, "alice", "x", "", "ns", "j"),
			mk("a8", AgentRunning, "alice", "x", "h1", "ns", "i"),
		} {
			must(t, s.InsertAgent(ctx, a))
		}
		for _, tc := range []struct {
			name string
			args ListAgentsArgs
			want []string
		}{
			{"host", ListAgentsArgs{Host: "h1"}, []string{"a1", "a2", "a3", "a5", "a6", "a8"}},
			{"host running", ListAgentsArgs{Host: "h1", State: AgentRunning}, []string{"a1", "a5", "a8"}},
			{"host terminal", ListAgentsArgs{Host: "h1", State: AgentTerminal}, []string{"a3"}},
			{"unknown host", ListAgentsArgs{Host: "h9"}, nil},
			{"holder", ListAgentsArgs{HolderNamespace: "ns", HolderInstanceID: "i"}, []string{"a1", "a2", "a3", "a4", "a8"}},
			{"holder in another namespace", ListAgentsArgs{HolderNamespace: "other", HolderInstanceID: "i"}, []string{"a5"}},
			{"holder running", ListAgentsArgs{HolderNamespace: "ns", HolderInstanceID: "i", State: AgentRunning}, []string{"a1", "a4", "a8"}},
			{"holder terminal", ListAgentsArgs{HolderNamespace: "ns", HolderInstanceID: "i", State: AgentTerminal}, []string{"a3"}},
			{"host and holder", ListAgentsArgs{Host: "h1", HolderNamespace: "ns", HolderInstanceID: "i"}, []string{"a1", "a2", "a3", "a8"}},
			{"host, holder, state", ListAgentsArgs{Host: "h1", HolderNamespace: "ns", HolderInstanceID: "i", State: AgentSuspended}, []string{"a2"}},
			{"owner and host", ListAgentsArgs{OwnerActor: "bob", Host: "h1"}, []string{"a5", "a6"}},
			{"owner, holder, state", ListAgentsArgs{OwnerActor: "alice", HolderNamespace: "ns", HolderInstanceID: "i", State: AgentRunning}, []string{"a1", "a8"}},
			{"visible and host", ListAgentsArgs{VisibleIn: "x", Host: "h1"}, []string{"a1", "a2", "a6", "a8"}},
			{"visible, owner, holder", ListAgentsArgs{VisibleIn: "x", OwnerActor: "alice", HolderNamespace: "ns", HolderInstanceID: "j"}, []string{"a7"}},
			{"every filter", ListAgentsArgs{VisibleIn: "y", OwnerActor: "alice", State: AgentTerminal, Host: "h1", HolderNamespace: "ns", HolderInstanceID: "i"}, []string{"a3"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				for _, limit := range []int{0, 1, 2} {
					args := tc.args
					args.Limit = limit
					var got []string
					for pages := 0; ; pages++ {
						if pages > 10 {
							t.Fatal("paging does not end")
						}
						page, err := s.ListAgents(ctx, args)
						must(t, err)
						for _, a := range page.Agents {
							got = append(got, a.ID)
						}
						if page.Next == "" {
							break
						}
						args.After = page.Next
					}
					if !slices.Equal(got, tc.want) {
						t.Fatalf("limit %d: %v, want %v", limit, got, tc.want)
					}
				}
			})
		}
	})
}
