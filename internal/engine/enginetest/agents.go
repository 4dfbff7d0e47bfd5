package enginetest

import (
	"context"
	"slices"
	"testing"

	"github.com/rosterdb/roster/internal/engine"
)

// agentTests are the tests of the agent ledger.
func agentTests() map[string]methodTest {
	return map[string]methodTest{
		"AgentInsert":                    testAgentInsert,
		"AgentSpawn":                     testAgentSpawn,
		"AgentGet":                       testAgentGet,
		"AgentSetState":                  testAgentSetState,
		"AgentSetCheckpoint":             testAgentSetCheckpoint,
		"AgentFindByIdempotencyKey":      testAgentFindByIdempotencyKey,
		"AgentFindLiveByProviderSession": testAgentFindLiveByProviderSession,
		"AgentTerminateLive":             testAgentTerminateLive,
		"AgentTerminateLiveOnHost":       testAgentTerminateLiveOnHost,
		"AgentSetHolder":                 testAgentSetHolder,
		"AgentAbandonHeldBy":             testAgentAbandonHeldBy,
		"AgentList":                      testAgentList,
	}
}

// agent is a running agent id of owner "o", visible in "ns", with no
// session, key or host.
func agent(id string) engine.Agent {
	return engine.Agent{ID: id, State: "running", Provider: "p", OwnerActor: "o", OwnerPeerClass: "c", OwnerWriteNamespace: "ns",
		OwnerVisibleNamespaces: []string{"ns"}, SpawnFingerprint: "f", SpawnedAtMs: 1, StateChangedAtMs: 1}
}

// agentEqual compares two agents field for field.
func agentEqual(a, b engine.Agent) bool {
	return a.ID == b.ID && a.State == b.State && a.TerminalReason == b.TerminalReason && a.Provider == b.Provider &&
		a.ProviderSessionID == b.ProviderSessionID && a.CheckpointSessionID == b.CheckpointSessionID &&
		a.CheckpointCursor == b.CheckpointCursor && a.OwnerActor == b.OwnerActor && a.OwnerPeerClass == b.OwnerPeerClass &&
		a.OwnerWriteNamespace == b.OwnerWriteNamespace && slices.Equal(a.OwnerVisibleNamespaces, b.OwnerVisibleNamespaces) &&
		a.SpawnFingerprint == b.SpawnFingerprint && a.SpawnedAtMs == b.SpawnedAtMs && a.StateChangedAtMs == b.StateChangedAtMs &&
		a.IdempotencyKey == b.IdempotencyKey && a.Host == b.Host &&
		a.HolderNamespace == b.HolderNamespace && a.HolderInstanceID == b.HolderInstanceID
}

// insertAgents stores each agent with AgentInsert.
func (v *env) insertAgents(as ...engine.Agent) {
	v.t.Helper()
	v.write(func(ctx context.Context, q engine.Queries) error {
		for _, a := range as {
			if err := q.AgentInsert(ctx, a); err != nil {
				return err
			}
		}
		return nil
	})
}

// getAgent runs AgentGet.
func (v *env) getAgent(id string) (engine.Agent, error) {
	return tryRead(v, func(ctx context.Context, q engine.Queries) (engine.Agent, error) { return q.AgentGet(ctx, id) })
}

// mustAgent reads an agent that must exist.
func (v *env) mustAgent(id string) engine.Agent {
	v.t.Helper()
	a, err := v.getAgent(id)
	if err != nil {
		v.t.Fatal(err)
	}
	return a
}

// full is an agent with every optional field set.
func full(id string) engine.Agent {
	a := agent(id)
	a.State, a.TerminalReason = "terminal", "killed"
	a.ProviderSessionID, a.CheckpointSessionID, a.CheckpointCursor = "sess-"+id, "ck-"+id, 42
	a.OwnerVisibleNamespaces = []string{"a", "b"}
	a.SpawnedAtMs, a.StateChangedAtMs, a.IdempotencyKey, a.Host = 10, 20, "key-"+id, "host"
	a.HolderNamespace, a.HolderInstanceID = "hns", "hi-"+id
	return a
}

// testAgentInsert: an agent is stored as given, every field; its id, a live
// session and an owner's key are each unique.
func testAgentInsert(t *testing.T, h Harness) {
	v := setup(t, h)
	t.Run("Fields", func(t *testing.T) {
		for _, a := range []engine.Agent{full("a"), agent("b")} {
			v.insertAgents(a)
			if got := v.mustAgent(a.ID); !agentEqual(got, a) {
				t.Errorf("read back %+v, want %+v", got, a)
			}
		}
	})
	t.Run("Unique", func(t *testing.T) {
		insert := func(a engine.Agent) error {
			return v.e.Write(v.ctx, func(ctx context.Context, q engine.Queries) error { return q.AgentInsert(ctx, a) })
		}
		live := agent("live")
		live.ProviderSessionID, live.IdempotencyKey = "s", "k"
		must(t, insert(live))
		dup := agent("live")
		if err := insert(dup); !engine.IsConstraint(err, engine.UniqueAgentID) {
			t.Errorf("same id: %v", err)
		}
		dup = agent("other")
		dup.ProviderSessionID = "s"
		if err := insert(dup); !engine.IsConstraint(err, engine.UniqueAgentLiveProviderSession) {
			t.Errorf("same live session: %v", err)
		}
		dup.ProviderSessionID, dup.IdempotencyKey = "", "k"
		if err := insert(dup); !engine.IsConstraint(err, engine.UniqueAgentIdempotency) {
			t.Errorf("same owner's key: %v", err)
		}
		// A holder is both fields or neither.
		half := agent("half")
		half.HolderNamespace = "ns"
		if err := insert(half); !engine.IsConstraint(err, engine.CheckViolation) {
			t.Errorf("a holder namespace without an instance id: %v", err)
		}
		half.HolderNamespace, half.HolderInstanceID = "", "i"
		if err := insert(half); !engine.IsConstraint(err, engine.CheckViolation) {
			t.Errorf("a holder instance id without a namespace: %v", err)
		}
		// A terminal agent's session is free again.
		ended := full("ended")
		ended.ProviderSessionID, ended.IdempotencyKey = "s", ""
		must(t, insert(ended))
	})
}

// testAgentSpawn: an agent is stored unless its owner already used its key;
// another owner's same key, or no key, is stored.
func testAgentSpawn(t *testing.T, h Harness) {
	v := setup(t, h)
	spawn := func(a engine.Agent) bool {
		return writeGet(v, func(ctx context.Context, q engine.Queries) (bool, error) { return q.AgentSpawn(ctx, a) })
	}
	a := agent("a")
	a.IdempotencyKey = "k"
	if !spawn(a) {
		t.Fatal("the first spawn = false")
	}
	if got := v.mustAgent("a"); !agentEqual(got, a) {
		t.Fatalf("read back %+v, want %+v", got, a)
	}
	again := agent("b")
	again.IdempotencyKey = "k"
	if spawn(again) {
		t.Fatal("a spawn under a used key = true")
	}
	_, err := v.getAgent("b")
	wantNoRows(t, "the refused spawn", err)
	other := agent("c")
	other.OwnerActor, other.IdempotencyKey = "o2", "k"
	if !spawn(other) || !spawn(agent("d")) || !spawn(agent("e")) {
		t.Fatal("a spawn of another owner's key, or without a key = false")
	}
}

// testAgentGet: an agent by id; ErrNoRows for an unknown one.
func testAgentGet(t *testing.T, h Harness) {
	v := setup(t, h)
	v.insertAgents(full("a"), agent("b"))
	if got := v.mustAgent("a"); !agentEqual(got, full("a")) {
		t.Fatalf("read back %+v", got)
	}
	if got := v.mustAgent("b"); got.ID != "b" || got.TerminalReason != "" || got.Host != "" || got.IdempotencyKey != "" {
		t.Fatalf("read back %+v", got)
	}
	_, err := v.getAgent("nobody")
	wantNoRows(t, "unknown agent", err)
}

// testAgentSetState: an agent still in fromState moves (state, reason,
// time); any other is false and unchanged.
func testAgentSetState(t *testing.T, h Harness) {
	v := setup(t, h)
	v.insertAgents(agent("a"))
	set := func(id, from, to, reason string, at int64) bool {
		return writeGet(v, func(ctx context.Context, q engine.Queries) (bool, error) {
			return q.AgentSetState(ctx, id, from, to, reason, at)
		})
	}
	if !set("a", "running", "suspended", "", 5) {
		t.Fatal("move from the current state = false")
	}
	if a := v.mustAgent("a"); a.State != "suspended" || a.TerminalReason != "" || a.StateChangedAtMs != 5 {
		t.Fatalf("after the move %+v", a)
	}
	if set("a", "running", "terminal", "killed", 6) {
		t.Fatal("move from a state it left = true")
	}
	if a := v.mustAgent("a"); a.State != "suspended" || a.StateChangedAtMs != 5 {
		t.Fatalf("the refused move changed it: %+v", a)
	}
	if !set("a", "suspended", "terminal", "killed", 7) {
		t.Fatal("move to terminal = false")
	}
	if a := v.mustAgent("a"); a.State != "terminal" || a.TerminalReason != "killed" || a.StateChangedAtMs != 7 {
		t.Fatalf("after the move %+v", a)
	}
	if set("nobody", "running", "suspended", "", 8) {
		t.Fatal("move of an unknown agent = true")
	}
}

// testAgentSetCheckpoint: the checkpoint is recorded; an unknown agent is
// false.
func testAgentSetCheckpoint(t *testing.T, h Harness) {
	v := setup(t, h)
	v.insertAgents(agent("a"))
	set := func(id, session string, cursor int64) bool {
		return writeGet(v, func(ctx context.Context, q engine.Queries) (bool, error) {
			return q.AgentSetCheckpoint(ctx, id, session, cursor)
		})
	}
	if !set("a", "ck", 9) {
		t.Fatal("checkpoint of an agent = false")
	}
	if a := v.mustAgent("a"); a.CheckpointSessionID != "ck" || a.CheckpointCursor != 9 || a.State != "running" {
		t.Fatalf("after the checkpoint %+v", a)
	}
	if !set("a", "ck2", 10) {
		t.Fatal("second checkpoint = false")
	}
	if a := v.mustAgent("a"); a.CheckpointSessionID != "ck2" || a.CheckpointCursor != 10 {
		t.Fatalf("after the second checkpoint %+v", a)
	}
	if set("nobody", "ck", 1) {
		t.Fatal("checkpoint of an unknown agent = true")
	}
}

// testAgentFindByIdempotencyKey: the agent an owner spawned under a key,
// live or ended; ErrNoRows for another owner or key.
func testAgentFindByIdempotencyKey(t *testing.T, h Harness) {
	v := setup(t, h)
	a, b := agent("a"), full("b")
	a.IdempotencyKey = "k"
	b.IdempotencyKey = "k2"
	v.insertAgents(a, b)
	find := func(owner, key string) (engine.Agent, error) {
		return tryRead(v, func(ctx context.Context, q engine.Queries) (engine.Agent, error) {
			return q.AgentFindByIdempotencyKey(ctx, owner, key)
		})
	}
	if got, err := find("o", "k"); err != nil || !agentEqual(got, a) {
		t.Fatalf("found %+v, %v", got, err)
	}
	if got, err := find("o", "k2"); err != nil || got.ID != "b" {
		t.Fatalf("found %+v, %v; want the terminal agent b", got, err)
	}
	_, err := find("o2", "k")
	wantNoRows(t, "another owner", err)
	_, err = find("o", "none")
	wantNoRows(t, "an unknown key", err)
}

// testAgentFindLiveByProviderSession: the live agent holding a session;
// ErrNoRows once it ended, or for another provider or session.
func testAgentFindLiveByProviderSession(t *testing.T, h Harness) {
	v := setup(t, h)
	a := agent("a")
	a.ProviderSessionID = "s"
	old := full("old")
	old.ProviderSessionID, old.IdempotencyKey = "s", ""
	v.insertAgents(old, a)
	find := func(provider, session string) (engine.Agent, error) {
		return tryRead(v, func(ctx context.Context, q engine.Queries) (engine.Agent, error) {
			return q.AgentFindLiveByProviderSession(ctx, provider, session)
		})
	}
	if got, err := find("p", "s"); err != nil || !agentEqual(got, a) {
		t.Fatalf("found %+v, %v; want the live agent a", got, err)
	}
	_, err := find("other", "s")
	wantNoRows(t, "another provider", err)
	_, err = find("p", "none")
	wantNoRows(t, "another session", err)
	writeGet(v, func(ctx context.Context, q engine.Queries) (bool, error) {
		return q.AgentSetState(ctx, "a", "running", "terminal", "completed", 5)
	})
	_, err = find("p", "s")
	wantNoRows(t, "the session's agent ended", err)
}

// testAgentTerminateLive: every live agent ends with reason host_restart at
// the time; ended ones are untouched; the count comes back.
func testAgentTerminateLive(t *testing.T, h Harness) {
	v := setup(t, h)
	spawned, suspended := agent("b"), agent("c")
	spawned.State, suspended.State = "spawned", "suspended"
	v.insertAgents(agent("a"), spawned, suspended, full("d"))
	terminate := func(at int64) int {
		return writeGet(v, func(ctx context.Context, q engine.Queries) (int, error) { return q.AgentTerminateLive(ctx, at) })
	}
	if n := terminate(50); n != 3 {
		t.Fatalf("terminated %d, want 3", n)
	}
	for _, id := range []string{"a", "b", "c"} {
		if a := v.mustAgent(id); a.State != "terminal" || a.TerminalReason != "host_restart" || a.StateChangedAtMs != 50 {
			t.Errorf("agent %s: %+v", id, a)
		}
	}
	if a := v.mustAgent("d"); a.TerminalReason != "killed" || a.StateChangedAtMs != 20 {
		t.Errorf("an ended agent was changed: %+v", a)
	}
	if n := terminate(60); n != 0 {
		t.Fatalf("second call terminated %d, want 0", n)
	}
}

// testAgentTerminateLiveOnHost: the live agents of one host end with reason
// host_restart; other hosts' and ended ones are untouched.
func testAgentTerminateLiveOnHost(t *testing.T, h Harness) {
	v := setup(t, h)
	a, b, c, d := agent("a"), agent("b"), agent("c"), full("d")
	a.Host, b.Host, c.Host, d.Host = "h1", "h1", "h2", "h1"
	b.State = "suspended"
	v.insertAgents(a, b, c, d, agent("nohost"))
	terminate := func(host string, at int64) int {
		return writeGet(v, func(ctx context.Context, q engine.Queries) (int, error) {
			return q.AgentTerminateLiveOnHost(ctx, host, at)
		})
	}
	if n := terminate("h1", 50); n != 2 {
		t.Fatalf("terminated %d on h1, want 2", n)
	}
	for _, id := range []string{"a", "b"} {
		if a := v.mustAgent(id); a.State != "terminal" || a.TerminalReason != "host_restart" || a.StateChangedAtMs != 50 {
			t.Errorf("agent %s: %+v", id, a)
		}
	}
	for _, id := range []string{"c", "nohost"} {
		if a := v.mustAgent(id); a.State != "running" {
			t.Errorf("an agent of another host was ended: %+v", a)
		}
	}
	if a := v.mustAgent("d"); a.TerminalReason != "killed" {
		t.Errorf("an ended agent was changed: %+v", a)
	}
	if n := terminate("h3", 60); n != 0 {
		t.Fatalf("terminated %d on an unknown host", n)
	}
}

// testAgentSetHolder: a live agent's holder moves (or is cleared); a terminal
// or unknown agent is false and unchanged.
func testAgentSetHolder(t *testing.T, h Harness) {
	v := setup(t, h)
	v.insertAgents(agent("a"), full("d"))
	set := func(id, ns, inst string) bool {
		return writeGet(v, func(ctx context.Context, q engine.Queries) (bool, error) {
			return q.AgentSetHolder(ctx, id, ns, inst)
		})
	}
	if !set("a", "ns", "i") {
		t.Fatal("holder of a live agent = false")
	}
	if a := v.mustAgent("a"); a.HolderNamespace != "ns" || a.HolderInstanceID != "i" || a.State != "running" {
		t.Fatalf("after the move %+v", a)
	}
	if !set("a", "", "") {
		t.Fatal("clearing the holder = false")
	}
	if a := v.mustAgent("a"); a.HolderNamespace != "" || a.HolderInstanceID != "" {
		t.Fatalf("after clearing %+v", a)
	}
	if set("d", "ns", "i") {
		t.Fatal("holder of a terminal agent = true")
	}
	if d := v.mustAgent("d"); !agentEqual(d, full("d")) {
		t.Fatalf("the refused move changed it: %+v", d)
	}
	if set("nobody", "ns", "i") {
		t.Fatal("holder of an unknown agent = true")
	}
}

// testAgentAbandonHeldBy: the live agents of the given holders end with
// reason abandoned at the time; ended ones, other holders' (the same instance
// id in another namespace included) and unheld ones are untouched.
func testAgentAbandonHeldBy(t *testing.T, h Harness) {
	v := setup(t, h)
	held := func(id, state, ns, inst string) engine.Agent {
		a := agent(id)
		a.State, a.HolderNamespace, a.HolderInstanceID = state, ns, inst
		return a
	}
	ended := full("ended")
	ended.HolderNamespace, ended.HolderInstanceID = "ns", "i"
	v.insertAgents(held("a", "running", "ns", "i"), held("b", "spawned", "ns", "i"), held("c", "suspended", "other", "j"),
		held("d", "running", "other", "i"), held("e", "running", "ns", "j"), ended, agent("unheld"))
	abandon := func(at int64, keys ...engine.WorkerKey) int {
		return writeGet(v, func(ctx context.Context, q engine.Queries) (int, error) { return q.AgentAbandonHeldBy(ctx, keys, at) })
	}
	if n := abandon(50, wk("ns", "i"), wk("other", "j")); n != 3 {
		t.Fatalf("abandoned %d, want 3", n)
	}
	for _, id := range []string{"a", "b", "c"} {
		if a := v.mustAgent(id); a.State != "terminal" || a.TerminalReason != "abandoned" || a.StateChangedAtMs != 50 ||
			a.HolderNamespace == "" {
			t.Errorf("agent %s: %+v", id, a)
		}
	}
	for _, id := range []string{"d", "e", "unheld"} {
		if a := v.mustAgent(id); a.State != "running" || a.StateChangedAtMs != 1 {
			t.Errorf("an agent of another holder was ended: %+v", a)
		}
	}
	if a := v.mustAgent("ended"); a.TerminalReason != "killed" || a.StateChangedAtMs != 20 {
		t.Errorf("an ended agent was changed: %+v", a)
	}
	if n := abandon(60, wk("ns", "i")); n != 0 {
		t.Fatalf("second call abandoned %d, want 0", n)
	}
	if n := abandon(60); n != 0 {
		t.Fatalf("no holders abandoned %d, want 0", n)
	}
}

// testAgentList: keyset pages in id order, filtered by state, owner and the
// namespace agents are visible in, alone or together.
func testAgentList(t *testing.T, h Harness) {
	v := setup(t, h)
	mk := func(id, state, owner string, visible ...string) engine.Agent {
		a := agent(id)
		a.State, a.OwnerActor, a.OwnerVisibleNamespaces = state, owner, visible
		if state == "terminal" {
			a.TerminalReason = "completed"
		}
		return a
	}
	on := func(a engine.Agent, host, ns, inst string) engine.Agent {
		a.Host, a.HolderNamespace, a.HolderInstanceID = host, ns, inst
		return a
	}
	v.insertAgents(on(mk("e", "running", "o1", "x"), "h1", "ns", "i"), on(mk("a", "running", "o1", "x", "y"), "h1", "", ""),
		on(mk("c", "terminal", "o2", "y"), "h1", "ns", "i"), on(mk("b", "suspended", "o2", "x"), "h2", "ns", "i"),
		on(mk("d", "running", "o2"), "", "other", "i"))
	list := func(p engine.AgentListParams) []string {
		as := readGet(v, func(ctx context.Context, q engine.Queries) ([]engine.Agent, error) { return q.AgentList(ctx, p) })
		out := make([]string, len(as))
		for i, a := range as {
			out[i] = a.ID
		}
		return out
	}
	for _, tc := range []struct {
		name string
		p    engine.AgentListParams
		want []string
	}{
		{"All", engine.AgentListParams{Limit: 10}, []string{"a", "b", "c", "d", "e"}},
		{"Page", engine.AgentListParams{AfterID: "b", Limit: 2}, []string{"c", "d"}},
		{"State", engine.AgentListParams{State: "running", Limit: 10}, []string{"a", "d", "e"}},
		{"StatePage", engine.AgentListParams{State: "running", AfterID: "a", Limit: 1}, []string{"d"}},
		{"Owner", engine.AgentListParams{OwnerActor: "o2", Limit: 10}, []string{"b", "c", "d"}},
		{"OwnerState", engine.AgentListParams{OwnerActor: "o2", State: "running", Limit: 10}, []string{"d"}},
		{"OwnerPage", engine.AgentListParams{OwnerActor: "o2", AfterID: "b", Limit: 10}, []string{"c", "d"}},
		{"VisibleIn", engine.AgentListParams{VisibleIn: "x", Limit: 10}, []string{"a", "b", "e"}},
		{"VisibleInState", engine.AgentListParams{VisibleIn: "x", State: "running", Limit: 10}, []string{"a", "e"}},
		{"VisibleInOwner", engine.AgentListParams{VisibleIn: "y", OwnerActor: "o2", Limit: 10}, []string{"c"}},
		{"VisibleInPage", engine.AgentListParams{VisibleIn: "x", AfterID: "a", Limit: 1}, []string{"b"}},
		{"None", engine.AgentListParams{VisibleIn: "z", Limit: 10}, []string{}},
		{"Host", engine.AgentListParams{Host: "h1", Limit: 10}, []string{"a", "c", "e"}},
		{"HostPage", engine.AgentListParams{Host: "h1", AfterID: "a", Limit: 1}, []string{"c"}},
		{"HostLiveState", engine.AgentListParams{Host: "h1", State: "running", Limit: 10}, []string{"a", "e"}},
		{"HostLiveStatePage", engine.AgentListParams{Host: "h1", State: "running", AfterID: "a", Limit: 10}, []string{"e"}},
		{"HostTerminal", engine.AgentListParams{Host: "h1", State: "terminal", Limit: 10}, []string{"c"}},
		{"HostHolder", engine.AgentListParams{Host: "h1", HolderNamespace: "ns", HolderInstanceID: "i", Limit: 10}, []string{"c", "e"}},
		{"HostHolderLive", engine.AgentListParams{Host: "h1", HolderNamespace: "ns", HolderInstanceID: "i", State: "running", Limit: 10}, []string{"e"}},
		{"Holder", engine.AgentListParams{HolderNamespace: "ns", HolderInstanceID: "i", Limit: 10}, []string{"b", "c", "e"}},
		{"HolderOtherNamespace", engine.AgentListParams{HolderNamespace: "other", HolderInstanceID: "i", Limit: 10}, []string{"d"}},
		{"HolderLive", engine.AgentListParams{HolderNamespace: "ns", HolderInstanceID: "i", State: "suspended", Limit: 10}, []string{"b"}},
		{"HolderLivePage", engine.AgentListParams{HolderNamespace: "ns", HolderInstanceID: "i", State: "running", AfterID: "b", Limit: 1}, []string{"e"}},
		{"HolderTerminal", engine.AgentListParams{HolderNamespace: "ns", HolderInstanceID: "i", State: "terminal", Limit: 10}, []string{"c"}},
		{"HolderPage", engine.AgentListParams{HolderNamespace: "ns", HolderInstanceID: "i", AfterID: "b", Limit: 1}, []string{"c"}},
		{"OwnerHost", engine.AgentListParams{OwnerActor: "o2", Host: "h1", Limit: 10}, []string{"c"}},
		{"OwnerHolder", engine.AgentListParams{OwnerActor: "o2", HolderNamespace: "ns", HolderInstanceID: "i", State: "suspended", Limit: 10}, []string{"b"}},
		{"VisibleInHost", engine.AgentListParams{VisibleIn: "x", Host: "h1", Limit: 10}, []string{"a", "e"}},
		{"VisibleInHolder", engine.AgentListParams{VisibleIn: "x", HolderNamespace: "ns", HolderInstanceID: "i", State: "running", Limit: 10}, []string{"e"}},
		{"StateHolder", engine.AgentListParams{State: "spawned", HolderNamespace: "ns", HolderInstanceID: "i", Limit: 10}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := list(tc.p); !slices.Equal(got, tc.want) {
				t.Fatalf("AgentList(%+v) = %v, want %v", tc.p, got, tc.want)
			}
		})
	}
	t.Run("Fields", func(t *testing.T) {
		as := readGet(v, func(ctx context.Context, q engine.Queries) ([]engine.Agent, error) {
			return q.AgentList(ctx, engine.AgentListParams{AfterID: "", Limit: 1})
		})
		if len(as) != 1 || !agentEqual(as[0], on(mk("a", "running", "o1", "x", "y"), "h1", "", "")) {
			t.Fatalf("listed %+v", as)
		}
	})
}
