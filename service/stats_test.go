package service

import (
	"context"
	"reflect"
	"testing"
	"time"
)

func TestStats(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		empty, err := s.Stats(ctx, t0)
		must(t, err)
		wantAgents := map[AgentState]int{AgentSpawned: 0, AgentRunning: 0, AgentSuspended: 0, AgentTerminal: 0}
		if len(empty.Namespaces) != 0 || !reflect.DeepEqual(empty.Agents, wantAgents) || !empty.At.Equal(t0) {
			t.Fatalf("empty fleet: %+v", empty)
		}

		// Namespace b: two alive workers, one lapsed; lane x: 2 ready (one
		// older), 1 scheduled, 1 running with an expired lease; lane y: one
		// completed (left out), lane z: nothing live.
		worker(t, s, "b", "w1", []string{"x"}, nil) // TTL 1h from t0
		worker(t, s, "b", "w2", []string{"x", "y"}, nil)
		_, err = s.RegisterWorker(ctx, RegisterWorkerArgs{Namespace: "b", WorkerID: "w", InstanceID: "w3", Lanes: []string{"q"}, TTL: time.Second, Now: t0})
		must(t, err)
		// Lane q: ready work whose only worker lapsed: unserved.
		create(t, s, CreateExecutionArgs{Namespace: "b", Lane: "q", RunAt: t0})
		create(t, s, CreateExecutionArgs{Namespace: "b", Lane: "x", RunAt: t0.Add(-time.Minute)})
		running := create(t, s, CreateExecutionArgs{Namespace: "b", Lane: "x", Priority: 9})
		create(t, s, CreateExecutionArgs{Namespace: "b", Lane: "x", RunAt: t0.Add(-time.Second)})
		create(t, s, CreateExecutionArgs{Namespace: "b", Lane: "x", RunAt: t0.Add(time.Hour)})
		done := create(t, s, CreateExecutionArgs{Namespace: "b", Lane: "y", Priority: 5})
		l, err := s.ClaimExecution(ctx, ClaimArgs{Namespace: "b", InstanceID: "w1", LeaseTTL: time.Minute, Now: t0})
		must(t, err)
		if l.ExecutionID != running {
			t.Fatal("unexpected claim")
		}
		l2, err := s.ClaimExecution(ctx, ClaimArgs{Namespace: "b", InstanceID: "w2", LeaseTTL: time.Hour, Now: t0})
		must(t, err)
		if l2.ExecutionID == done {
			must(t, s.CompleteExecution(ctx, CompleteArgs{Lease: l2, Now: t0}))
		} else {
			t.Fatalf("w2 claimed %s", l2.ExecutionID)
		}
		// Namespace a: one alive worker and nothing else.
		worker(t, s, "a", "w", []string{"x"}, nil)
		// Agents: 2 running, 1 terminal.
		for i, st := range []AgentState{AgentRunning, AgentRunning, AgentTerminal} {
			a := agent(string(rune('p' + i)))
			a.State = st
			if st == AgentTerminal {
				a.TerminalReason = ReasonKilled
			}
			must(t, s.InsertAgent(ctx, a))
		}
		must(t, s.UpdateAgentState(ctx, UpdateAgentStateArgs{ID: "p", State: AgentSuspended}))

		at := t0.Add(2 * time.Minute) // w3 lapsed; the 1-minute lease expired
		got, err := s.Stats(ctx, at)
		must(t, err)
		want := Stats{
			At: at,
			Namespaces: []NamespaceStats{
				{Namespace: "a", WorkersAlive: 1},
				{Namespace: "b", WorkersAlive: 2, WorkersLapsed: 1, ExpiredLeases: 1, Lanes: []LaneStats{
					{Lane: "q", Ready: 1, OldestReadyRunAt: t0},
					{Lane: "x", Ready: 2, Scheduled: 1, Running: 1, OldestReadyRunAt: t0.Add(-time.Minute), WorkersAlive: 2},
				}},
			},
			Agents: map[AgentState]int{AgentSpawned: 0, AgentRunning: 1, AgentSuspended: 1, AgentTerminal: 1},
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Stats:\n got %+v\nwant %+v", got, want)
		}
		if lanes := got.Namespaces[1].Lanes; !lanes[0].Unserved() || lanes[1].Unserved() {
			t.Fatalf("unserved: q %v (ready, its worker lapsed), x %v (two alive workers)", lanes[0].Unserved(), lanes[1].Unserved())
		}
		// A zero time is the Store's clock.
		now, err := s.Stats(ctx, time.Time{})
		must(t, err)
		if !now.At.Equal(t0) {
			t.Fatalf("At = %v", now.At)
		}
	})
}

func TestCheckOnASoundDatabase(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		worker(t, s, "ns", "i", []string{"default"}, nil)
		create(t, s, CreateExecutionArgs{})
		claim(t, s, "i", t0)
		must(t, s.InsertAgent(ctx, agent("a")))
		problems, err := s.Check(ctx)
		must(t, err)
		if len(problems) != 0 {
			t.Fatalf("problems on a sound database: %v", problems)
		}
	})
}
