package service

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func agent(id string) Agent {
	return Agent{
		ID:                     id,
		State:                  AgentSpawned,
		Provider:               "anthropic",
		OwnerActor:             "alice",
		OwnerPeerClass:         "human",
		OwnerWriteNamespace:    "team-a",
		OwnerVisibleNamespaces: []string{"shared", "team-b"},
		SpawnFingerprint:       "fp-" + id,
		SpawnedAt:              t0,
		StateChangedAt:         t0,
	}
}

func TestAgentRoundTrip(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		s, _ := b.newStore(t)
		{
			ctx := context.Background()
			full := Agent{
				ID:                     "agent-1",
				State:                  AgentSuspended,
				Provider:               "anthropic",
				ProviderSessionID:      "sess-1",
				CheckpointSessionID:    "ckpt-1",
				CheckpointCursor:       42,
				OwnerActor:             "alice",
				OwnerPeerClass:         "human",
				OwnerWriteNamespace:    "team-a",
				OwnerVisibleNamespaces: []string{"z-last", "a-first", "m"},
				SpawnFingerprint:       "fp",
				SpawnedAt:              t0.Add(1500 * time.Microsecond),
				StateChangedAt:         t0.Add(time.Minute).In(time.FixedZone("Y", -3600)),
				IdempotencyKey:         "key-1",
				Host:                   "host-a",
			}
			must(t, s.InsertAgent(ctx, full))
			got, err := s.GetAgent(ctx, "agent-1")
			must(t, err)
			want := full
			want.SpawnedAt = t0.Add(time.Millisecond)
			want.StateChangedAt = t0.Add(time.Minute)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
			}
			terminal := agent("agent-2")
			terminal.State, terminal.TerminalReason = AgentTerminal, ReasonKilled
			terminal.OwnerVisibleNamespaces = nil
			must(t, s.InsertAgent(ctx, terminal))
			got, err = s.GetAgent(ctx, "agent-2")
			must(t, err)
			if !reflect.DeepEqual(got, terminal) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, terminal)
			}
			_, err = s.GetAgent(ctx, "missing")
			wantErr(t, err, ErrNotFound)
		}
	})
}

func TestAgentZeroTimesUseClock(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, clock := b.newStore(t)
		clock.Advance(time.Hour)
		a := agent("a")
		a.SpawnedAt, a.StateChangedAt = time.Time{}, time.Time{}
		must(t, s.InsertAgent(ctx, a))
		got, err := s.GetAgent(ctx, "a")
		must(t, err)
		if !got.SpawnedAt.Equal(t0.Add(time.Hour)) || !got.StateChangedAt.Equal(t0.Add(time.Hour)) {
			t.Fatalf("times %v %v", got.SpawnedAt, got.StateChangedAt)
		}
	})
}

func TestAgentUniqueness(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		withSession := func(id, provider, session string, st AgentState) Agent {
			a := agent(id)
			a.Provider, a.ProviderSessionID, a.State = provider, session, st
			if st == AgentTerminal {
				a.TerminalReason = ReasonCompleted
			}
			return a
		}
		for _, tc := range []struct {
			name   string
			first  Agent
			second Agent
			err    error
			detail string
		}{
			{"duplicate id", agent("x"), agent("x"), ErrConflict, "agent id"},
			{"live session held", withSession("a", "p", "s", AgentRunning), withSession("b", "p", "s", AgentSpawned), ErrConflict, "live agent holds session"},
			{"suspended still holds", withSession("a", "p", "s", AgentSuspended), withSession("b", "p", "s", AgentRunning), ErrConflict, "live agent holds session"},
			{"terminal frees it", withSession("a", "p", "s", AgentTerminal), withSession("b", "p", "s", AgentRunning), nil, ""},
			{"two terminal holders", withSession("a", "p", "s", AgentTerminal), withSession("b", "p", "s", AgentTerminal), nil, ""},
			{"other provider", withSession("a", "p1", "s", AgentRunning), withSession("b", "p2", "s", AgentRunning), nil, ""},
			{"no session never collides", withSession("a", "p", "", AgentRunning), withSession("b", "p", "", AgentRunning), nil, ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				s, _ := b.newStore(t)
				must(t, s.InsertAgent(ctx, tc.first))
				err := s.InsertAgent(ctx, tc.second)
				if tc.err == nil {
					must(t, err)
					return
				}
				wantErr(t, err, tc.err)
				if !strings.Contains(err.Error(), tc.detail) {
					t.Fatalf("error %q does not say %q", err, tc.detail)
				}
			})
		}

		t.Run("terminating frees the session", func(t *testing.T) {
			s, _ := b.newStore(t)
			must(t, s.InsertAgent(ctx, withSession("a", "p", "s", AgentRunning)))
			found, err := s.FindLiveAgentByProviderSession(ctx, "p", "s")
			must(t, err)
			if found.ID != "a" {
				t.Fatalf("found %q", found.ID)
			}
			must(t, s.UpdateAgentState(ctx, UpdateAgentStateArgs{ID: "a", State: AgentTerminal, Reason: ReasonFailed}))
			_, err = s.FindLiveAgentByProviderSession(ctx, "p", "s")
			wantErr(t, err, ErrNotFound)
			must(t, s.InsertAgent(ctx, withSession("b", "p", "s", AgentSpawned)))
		})

		t.Run("idempotency key per owner", func(t *testing.T) {
			s, _ := b.newStore(t)
			a := agent("a")
			a.IdempotencyKey = "k"
			must(t, s.InsertAgent(ctx, a))
			b := agent("b")
			b.IdempotencyKey = "k"
			err := s.InsertAgent(ctx, b)
			wantErr(t, err, ErrConflict)
			if !strings.Contains(err.Error(), "idempotency key") {
				t.Fatalf("error %q does not name the rule", err)
			}
			b.OwnerActor = "bob" // another owner may use the same key
			must(t, s.InsertAgent(ctx, b))
			got, err := s.FindAgentByIdempotencyKey(ctx, "bob", "k")
			must(t, err)
			if got.ID != "b" {
				t.Fatalf("found %q", got.ID)
			}
			_, err = s.FindAgentByIdempotencyKey(ctx, "carol", "k")
			wantErr(t, err, ErrNotFound)
		})
	})
}

func TestSpawnAgent(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		a := agent("a")
		a.IdempotencyKey = "k"
		got, created, err := s.SpawnAgent(ctx, a)
		must(t, err)
		if !created || !reflect.DeepEqual(got, a) {
			t.Fatalf("first spawn: created=%v %+v", created, got)
		}
		must(t, s.UpdateAgentState(ctx, UpdateAgentStateArgs{ID: "a", State: AgentRunning, At: t0.Add(time.Second)}))

		// A replay with the same fingerprint returns the stored agent, as it is now.
		replay := agent("a-retry")
		replay.IdempotencyKey, replay.SpawnFingerprint = "k", a.SpawnFingerprint
		got, created, err = s.SpawnAgent(ctx, replay)
		must(t, err)
		if created || got.ID != "a" || got.State != AgentRunning {
			t.Fatalf("replay: created=%v %+v", created, got)
		}
		if _, err := s.GetAgent(ctx, "a-retry"); err == nil {
			t.Fatal("the replay inserted a second agent")
		}

		// Another fingerprint under the same key is a conflict.
		replay.SpawnFingerprint = "different"
		_, _, err = s.SpawnAgent(ctx, replay)
		wantErr(t, err, ErrConflict)

		// Without a key, spawn is a plain insert.
		plain := agent("p")
		_, created, err = s.SpawnAgent(ctx, plain)
		must(t, err)
		if !created {
			t.Fatal("plain spawn not created")
		}
		_, _, err = s.SpawnAgent(ctx, plain)
		wantErr(t, err, ErrConflict)
	})
}

func TestAgentTransitions(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		states := []AgentState{AgentSpawned, AgentRunning, AgentSuspended, AgentTerminal}
		// allowed[from][to]: "ok" changes the agent, "noop" changes nothing, "" is refused.
		allowed := map[AgentState]map[AgentState]string{
			AgentSpawned:   {AgentRunning: "ok", AgentTerminal: "ok"},
			AgentRunning:   {AgentRunning: "ok", AgentSuspended: "ok", AgentTerminal: "ok"},
			AgentSuspended: {AgentRunning: "ok", AgentSuspended: "noop", AgentTerminal: "ok"},
			AgentTerminal:  {AgentTerminal: "noop"},
		}
		for _, from := range states {
			for _, to := range states {
				t.Run(fmt.Sprintf("%s→%s", from, to), func(t *testing.T) {
					s, _ := b.newStore(t)
					a := agent("a")
					a.State = from
					if from == AgentTerminal {
						a.TerminalReason = ReasonAbandoned
					}
					must(t, s.InsertAgent(ctx, a))
					args := UpdateAgentStateArgs{ID: "a", State: to, At: t0.Add(time.Minute)}
					if to == AgentTerminal {
						args.Reason = ReasonCompleted
					}
					err := s.UpdateAgentState(ctx, args)
					got, gerr := s.GetAgent(ctx, "a")
					must(t, gerr)
					switch allowed[from][to] {
					case "ok":
						must(t, err)
						if got.State != to || !got.StateChangedAt.Equal(t0.Add(time.Minute)) || got.TerminalReason != args.Reason {
							t.Fatalf("after %s→%s: %+v", from, to, got)
						}
					case "noop":
						must(t, err)
						if !reflect.DeepEqual(got, a) {
							t.Fatalf("no-op changed the agent: %+v", got)
						}
					default:
						wantErr(t, err, ErrInvalidTransition)
						if !reflect.DeepEqual(got, a) {
							t.Fatalf("refused transition changed the agent: %+v", got)
						}
					}
				})
			}
		}
	})
}

func TestUpdateAgentStateCheckOrder(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		must(t, s.InsertAgent(ctx, agent("a"))) // spawned
		for _, tc := range []struct {
			name string
			args UpdateAgentStateArgs
			err  error
		}{
			{"reason with a live state beats not found", UpdateAgentStateArgs{ID: "missing", State: AgentRunning, Reason: ReasonFailed}, ErrInvalidInput},
			{"no reason with terminal", UpdateAgentStateArgs{ID: "a", State: AgentTerminal}, ErrInvalidInput},
			{"unknown state", UpdateAgentStateArgs{ID: "a", State: "sleeping"}, ErrInvalidInput},
			{"unknown reason", UpdateAgentStateArgs{ID: "a", State: AgentTerminal, Reason: "bored"}, ErrInvalidInput},
			{"unknown expect state", UpdateAgentStateArgs{ID: "a", State: AgentRunning, ExpectState: "x"}, ErrInvalidInput},
			{"not found beats expect mismatch", UpdateAgentStateArgs{ID: "missing", State: AgentRunning, ExpectState: AgentRunning}, ErrNotFound},
			{"expect mismatch beats transition", UpdateAgentStateArgs{ID: "a", State: AgentSuspended, ExpectState: AgentRunning}, ErrConflict},
			{"transition", UpdateAgentStateArgs{ID: "a", State: AgentSuspended, ExpectState: AgentSpawned}, ErrInvalidTransition},
			{"to spawned", UpdateAgentStateArgs{ID: "a", State: AgentSpawned}, ErrInvalidTransition},
		} {
			t.Run(tc.name, func(t *testing.T) {
				wantErr(t, s.UpdateAgentState(ctx, tc.args), tc.err)
			})
		}
		// Compare-and-set succeeds on a match.
		must(t, s.UpdateAgentState(ctx, UpdateAgentStateArgs{ID: "a", State: AgentRunning, ExpectState: AgentSpawned}))
		wantErr(t, s.UpdateAgentState(ctx, UpdateAgentStateArgs{ID: "a", State: AgentRunning, ExpectState: AgentSpawned}), ErrConflict)
		got, err := s.GetAgent(ctx, "a")
		must(t, err)
		if got.State != AgentRunning {
			t.Fatalf("state %s", got.State)
		}
	})
}

func TestSetAgentCheckpoint(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		must(t, s.InsertAgent(ctx, agent("a")))
		must(t, s.SetAgentCheckpoint(ctx, "a", "ckpt", 7))
		got, err := s.GetAgent(ctx, "a")
		must(t, err)
		if got.CheckpointSessionID != "ckpt" || got.CheckpointCursor != 7 {
			t.Fatalf("checkpoint %q %d", got.CheckpointSessionID, got.CheckpointCursor)
		}
		must(t, s.SetAgentCheckpoint(ctx, "a", "", 0))
		got, err = s.GetAgent(ctx, "a")
		must(t, err)
		if got.CheckpointSessionID != "" || got.CheckpointCursor != 0 {
			t.Fatalf("cleared checkpoint %q %d", got.CheckpointSessionID, got.CheckpointCursor)
		}
		wantErr(t, s.SetAgentCheckpoint(ctx, "missing", "c", 1), ErrNotFound)
		wantErr(t, s.SetAgentCheckpoint(ctx, "a", "bad\x01", 1), ErrInvalidInput)
	})
}

func TestTerminateLiveAgents(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		for i, st := range []AgentState{AgentSpawned, AgentRunning, AgentSuspended, AgentTerminal} {
			a := agent(fmt.Sprintf("a%d", i))
			a.State = st
			a.ProviderSessionID = fmt.Sprintf("s%d", i)
			if st == AgentTerminal {
				a.TerminalReason = ReasonCompleted
			}
			must(t, s.InsertAgent(ctx, a))
		}
		at := t0.Add(time.Hour)
		n, err := s.TerminateLiveAgents(ctx, at)
		must(t, err)
		if n != 3 {
			t.Fatalf("terminated %d, want 3", n)
		}
		page, err := s.ListAgents(ctx, ListAgentsArgs{})
		must(t, err)
		for _, a := range page.Agents {
			if a.State != AgentTerminal {
				t.Fatalf("%s still %s", a.ID, a.State)
			}
			if a.ID == "a3" {
				if a.TerminalReason != ReasonCompleted || !a.StateChangedAt.Equal(t0) {
					t.Fatalf("terminal agent touched: %+v", a)
				}
			} else if a.TerminalReason != ReasonHostRestart || !a.StateChangedAt.Equal(at) {
				t.Fatalf("%+v", a)
			}
		}
		// Their sessions are free again.
		_, err = s.FindLiveAgentByProviderSession(ctx, "anthropic", "s1")
		wantErr(t, err, ErrNotFound)
		n, err = s.TerminateLiveAgents(ctx, at)
		must(t, err)
		if n != 0 {
			t.Fatalf("second scan terminated %d", n)
		}
	})
}

func TestListAgents(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		// 12 agents: owners alternate, states cycle, visibility varies.
		for i := range 12 {
			a := agent(fmt.Sprintf("a%02d", i))
			a.OwnerActor = []string{"alice", "bob"}[i%2]
			a.State = []AgentState{AgentSpawned, AgentRunning, AgentSuspended}[i%3]
			a.OwnerWriteNamespace = fmt.Sprintf("w%d", i%4)
			a.OwnerVisibleNamespaces = nil
			if i%3 == 0 {
				a.OwnerVisibleNamespaces = []string{"shared", "w0"} // w0 twice for some: listed once
			}
			must(t, s.InsertAgent(ctx, a))
		}
		ids := func(f func(i int) bool) []string {
			var out []string
			for i := range 12 {
				if f(i) {
					out = append(out, fmt.Sprintf("a%02d", i))
				}
			}
			return out
		}
		for _, tc := range []struct {
			name string
			args ListAgentsArgs
			want []string
		}{
			{"all", ListAgentsArgs{}, ids(func(int) bool { return true })},
			{"state", ListAgentsArgs{State: AgentRunning}, ids(func(i int) bool { return i%3 == 1 })},
			{"owner", ListAgentsArgs{OwnerActor: "bob"}, ids(func(i int) bool { return i%2 == 1 })},
			{"owner and state", ListAgentsArgs{OwnerActor: "bob", State: AgentSpawned}, ids(func(i int) bool { return i%2 == 1 && i%3 == 0 })},
			{"visible in write namespace", ListAgentsArgs{VisibleIn: "w1"}, ids(func(i int) bool { return i%4 == 1 })},
			{"visible in shared", ListAgentsArgs{VisibleIn: "shared"}, ids(func(i int) bool { return i%3 == 0 })},
			{"visible in w0", ListAgentsArgs{VisibleIn: "w0"}, ids(func(i int) bool { return i%4 == 0 || i%3 == 0 })},
			{"visible, owner and state", ListAgentsArgs{VisibleIn: "shared", OwnerActor: "alice", State: AgentSpawned}, ids(func(i int) bool { return i%6 == 0 })},
			{"nothing", ListAgentsArgs{VisibleIn: "nowhere"}, nil},
		} {
			for _, limit := range []int{0, 1, 2, 3, 5} {
				t.Run(fmt.Sprintf("%s/limit=%d", tc.name, limit), func(t *testing.T) {
					var got []string
					args := tc.args
					args.Limit = limit
					for {
						page, err := s.ListAgents(ctx, args)
						must(t, err)
						for _, a := range page.Agents {
							got = append(got, a.ID)
						}
						if page.Next == "" {
							break
						}
						if len(page.Agents) != limit {
							t.Fatalf("short page with a cursor")
						}
						args.After = page.Next
					}
					if !slices.Equal(got, tc.want) {
						t.Fatalf("got %v, want %v", got, tc.want)
					}
				})
			}
		}
		for name, args := range map[string]ListAgentsArgs{
			"unknown state":  {State: "x"},
			"bad owner":      {OwnerActor: "\x00"},
			"negative limit": {Limit: -5},
			"garbage cursor": {After: "zz"},
			"worker cursor":  {After: encodeCursor(workersCursor, "a", "b")},
		} {
			t.Run("invalid/"+name, func(t *testing.T) {
				_, err := s.ListAgents(ctx, args)
				wantErr(t, err, ErrInvalidInput)
			})
		}
	})
}

func TestAgentInputValidation(t *testing.T) {
	validationOnly(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		cases := map[string]func(a *Agent){
			"empty id":                  func(a *Agent) { a.ID = "" },
			"long provider":             func(a *Agent) { a.Provider = strings.Repeat("p", 257) },
			"empty owner actor":         func(a *Agent) { a.OwnerActor = "" },
			"empty peer class":          func(a *Agent) { a.OwnerPeerClass = "" },
			"control in write ns":       func(a *Agent) { a.OwnerWriteNamespace = "a\tb" },
			"empty fingerprint":         func(a *Agent) { a.SpawnFingerprint = "" },
			"bad session id":            func(a *Agent) { a.ProviderSessionID = "\xff" },
			"bad checkpoint session":    func(a *Agent) { a.CheckpointSessionID = "x\n" },
			"bad idempotency key":       func(a *Agent) { a.IdempotencyKey = strings.Repeat("k", 300) },
			"empty visible namespace":   func(a *Agent) { a.OwnerVisibleNamespaces = []string{"ok", ""} },
			"unknown state":             func(a *Agent) { a.State = "zombie" },
			"empty state":               func(a *Agent) { a.State = "" },
			"unknown reason":            func(a *Agent) { a.State, a.TerminalReason = AgentTerminal, "bored" },
			"terminal without a reason": func(a *Agent) { a.State = AgentTerminal },
			"live with a reason":        func(a *Agent) { a.TerminalReason = ReasonKilled },
		}
		for name, mutate := range cases {
			t.Run(name, func(t *testing.T) {
				a := agent("x")
				mutate(&a)
				wantErr(t, s.InsertAgent(ctx, a), ErrInvalidInput)
				_, _, err := s.SpawnAgent(ctx, a)
				wantErr(t, err, ErrInvalidInput)
			})
		}
		page, err := s.ListAgents(ctx, ListAgentsArgs{})
		must(t, err)
		if len(page.Agents) != 0 {
			t.Fatalf("invalid records were written: %+v", page.Agents)
		}
	})
}

// The schema refuses records that break the ledger's invariants even when
// they are written with raw SQL, bypassing roster.

func TestTerminateLiveAgentsOnHost(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		for i, tc := range []struct {
			host  string
			state AgentState
		}{
			{"h1", AgentRunning}, {"h1", AgentSuspended}, {"h1", AgentTerminal},
			{"h2", AgentRunning}, {"", AgentSpawned},
		} {
			a := agent(fmt.Sprintf("a%d", i))
			a.Host, a.State = tc.host, tc.state
			if tc.state == AgentTerminal {
				a.TerminalReason = ReasonCompleted
			}
			must(t, s.InsertAgent(ctx, a))
		}
		at := t0.Add(time.Hour)
		n, err := s.TerminateLiveAgentsOnHost(ctx, "h1", at)
		must(t, err)
		if n != 2 {
			t.Fatalf("terminated %d on h1, want 2", n)
		}
		want := map[string]struct {
			state  AgentState
			reason TerminalReason
		}{
			"a0": {AgentTerminal, ReasonHostRestart}, "a1": {AgentTerminal, ReasonHostRestart},
			"a2": {AgentTerminal, ReasonCompleted}, "a3": {AgentRunning, ""}, "a4": {AgentSpawned, ""},
		}
		for id, w := range want {
			a, err := s.GetAgent(ctx, id)
			must(t, err)
			if a.State != w.state || a.TerminalReason != w.reason {
				t.Fatalf("%s: %s/%s, want %s/%s", id, a.State, a.TerminalReason, w.state, w.reason)
			}
		}
		for _, bad := range []string{"", "h\x00", strings.Repeat("h", 257)} {
			_, err := s.TerminateLiveAgentsOnHost(ctx, bad, at)
			wantErr(t, err, ErrInvalidInput)
		}
		bad := agent("bad-host")
		bad.Host = "tab\there"
		wantErr(t, s.InsertAgent(ctx, bad), ErrInvalidInput)
	})
}
