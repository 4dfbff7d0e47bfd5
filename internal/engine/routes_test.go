package engine

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

// The leading filter picks the query: a unique key, else a group, else
// namespace, else state (running apart), else lane; Newest the same the
// other way.
func TestExecutionListRoute(t *testing.T) {
	for _, c := range []struct {
		p    ExecutionListParams
		want ExecutionRoute
	}{
		{ExecutionListParams{}, ExecutionListAll},
		{ExecutionListParams{Namespace: "a", State: "running", Lane: "x"}, ExecutionListByNamespace},
		{ExecutionListParams{State: "running", Lane: "x"}, ExecutionListRunning},
		{ExecutionListParams{State: "waiting", Lane: "x"}, ExecutionListByState},
		{ExecutionListParams{Lane: "x"}, ExecutionListByLane},
		{ExecutionListParams{Newest: true}, ExecutionListNewest},
		{ExecutionListParams{Newest: true, Namespace: "a", State: "running"}, ExecutionListByNamespaceNewest},
		{ExecutionListParams{Newest: true, State: "running"}, ExecutionListRunningNewest},
		{ExecutionListParams{Newest: true, State: "failed", Lane: "x"}, ExecutionListByStateNewest},
		{ExecutionListParams{Newest: true, Lane: "x"}, ExecutionListByLaneNewest},
		{ExecutionListParams{Namespace: "a", UniqueKey: "k", Group: "g", State: "running"}, ExecutionListByUniqueKey},
		{ExecutionListParams{Namespace: "a", Group: "g", Lane: "x"}, ExecutionListByGroup},
		{ExecutionListParams{Newest: true, Namespace: "a", UniqueKey: "k"}, ExecutionListByUniqueKeyNewest},
		{ExecutionListParams{Newest: true, Namespace: "a", Group: "g", State: "failed"}, ExecutionListByGroupNewest},
	} {
		if got := c.p.Route(); got != c.want {
			t.Errorf("%+v: route %d, want %d", c.p, got, c.want)
		}
	}
	if r := (AgentListParams{VisibleIn: "a", OwnerActor: "o", State: "live"}).Route(); r != AgentListVisibleIn {
		t.Errorf("agents: route %d, want VisibleIn", r)
	}
	if r := (AgentListParams{OwnerActor: "o", State: "live"}).Route(); r != AgentListByOwner {
		t.Errorf("agents: route %d, want ByOwner", r)
	}
	for _, c := range []struct {
		p    AgentListParams
		want AgentRoute
	}{
		{AgentListParams{}, AgentList},
		{AgentListParams{Host: "h", HolderNamespace: "n", HolderInstanceID: "i"}, AgentList},
		{AgentListParams{VisibleIn: "a", Host: "h", State: "running"}, AgentListVisibleIn},
		{AgentListParams{OwnerActor: "o", Host: "h", State: "running"}, AgentListByOwner},
		{AgentListParams{Host: "h", HolderNamespace: "n", HolderInstanceID: "i", State: "spawned"}, AgentListLiveOnHost},
		{AgentListParams{Host: "h", State: "terminal"}, AgentListByState},
		{AgentListParams{HolderNamespace: "n", HolderInstanceID: "i", State: "suspended"}, AgentListLiveByHolder},
		{AgentListParams{HolderNamespace: "n", HolderInstanceID: "i", State: "terminal"}, AgentListByState},
	} {
		if got := c.p.Route(); got != c.want {
			t.Errorf("agents %+v: route %d, want %d", c.p, got, c.want)
		}
	}
	if r := (WorkerListParams{Namespace: "a", AfterNamespace: "b"}).Route(); r != WorkerListByNamespace {
		t.Errorf("workers: route %d, want ByNamespace", r)
	}
	if r := (WorkerListParams{AfterNamespace: "b"}).Route(); r != WorkerListAll {
		t.Errorf("workers: route %d, want all", r)
	}
	if r := (WorkerEventListParams{Namespace: "a", InstanceID: "i"}).Route(); r != WorkerEventListByInstance {
		t.Errorf("events: route %d, want ByInstance", r)
	}
	if r := (WorkerEventListParams{}).Route(); r != WorkerEventList {
		t.Errorf("events: route %d, want all", r)
	}
}

func TestFound(t *testing.T) {
	other := errors.New("boom")
	for _, c := range []struct {
		err   error
		found bool
		want  error
	}{{nil, true, nil}, {ErrNoRows, false, nil}, {other, false, other}} {
		if found, err := Found(c.err); found != c.found || err != c.want {
			t.Errorf("Found(%v) = %v, %v", c.err, found, err)
		}
	}
}

// A Loop runs one goroutine at most, never once closed, and Stop waits for it.
func TestLoop(t *testing.T) {
	var l Loop
	var runs, running atomic.Int32
	run := func(ctx context.Context) {
		runs.Add(1)
		running.Add(1)
		<-ctx.Done()
		running.Add(-1)
	}
	open := func() bool { return false }
	l.Start(open, run)
	l.Start(open, run)
	if !l.Running() {
		t.Fatal("not running after Start")
	}
	l.Stop()
	if running.Load() != 0 || l.Running() {
		t.Fatal("Stop returned before the loop ended")
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("%d runs, want 1", n)
	}
	l.Start(func() bool { return true }, run)
	if l.Running() {
		t.Fatal("started while closed")
	}
	l.Stop()
}
