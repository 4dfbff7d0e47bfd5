package engine

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// fakeQueries stands for a sqlc Queries type: one query per route of
// WorkerEventLists, each recording the parameters it was called with.
type fakeQueries struct{ calls []any }

type fakeRow struct{ Seq int64 }

type WorkerEventListParams0 struct {
	AfterSeq int64
	MaxRows  int32
}

type WorkerEventListByInstanceParams0 struct {
	InstanceID sql.NullString
	Namespace  string
	AfterSeq   int64
	MaxRows    int64
}

type WorkerEventListByNamespaceParams0 struct {
	Namespace string
	AfterSeq  int64
	MaxRows   int32
}

var errFake = errors.New("fake")

func (f *fakeQueries) WorkerEventList(_ context.Context, p WorkerEventListParams0) ([]fakeRow, error) {
	f.calls = append(f.calls, p)
	return []fakeRow{{p.AfterSeq}}, nil
}

func (f *fakeQueries) WorkerEventListByInstance(_ context.Context, p WorkerEventListByInstanceParams0) ([]fakeRow, error) {
	f.calls = append(f.calls, p)
	return nil, errFake
}

func (f *fakeQueries) WorkerEventListByNamespace(_ context.Context, p WorkerEventListByNamespaceParams0) ([]fakeRow, error) {
	f.calls = append(f.calls, p)
	return []fakeRow{{1}, {2}}, nil
}

// Each route calls its query by name, with the list's fields under their
// names or aliases: an int into any integer, a string into a nullable text
// (NULL when empty); rows and errors come back as the query returned them.
func TestListerCallsTheRoutesQuery(t *testing.T) {
	l := NewLister[*fakeQueries, fakeRow](WorkerEventLists)
	for _, c := range []struct {
		p       WorkerEventListParams
		want    any
		rows    int
		wantErr error
	}{
		{WorkerEventListParams{AfterSeq: 7, Limit: 5}, WorkerEventListParams0{AfterSeq: 7, MaxRows: 5}, 1, nil},
		{WorkerEventListParams{Namespace: "a", InstanceID: "i", AfterSeq: 3, Limit: 9},
			WorkerEventListByInstanceParams0{InstanceID: sql.NullString{String: "i", Valid: true}, Namespace: "a", AfterSeq: 3, MaxRows: 9}, 0, errFake},
		{WorkerEventListParams{Namespace: "a", Limit: 2}, WorkerEventListByNamespaceParams0{Namespace: "a", MaxRows: 2}, 2, nil},
	} {
		q := &fakeQueries{}
		rows, err := l.List(context.Background(), q, int(c.p.Route()), c.p)
		if len(q.calls) != 1 || q.calls[0] != c.want {
			t.Errorf("%+v: calls %+v, want %+v", c.p, q.calls, c.want)
		}
		if len(rows) != c.rows || err != c.wantErr {
			t.Errorf("%+v: %d rows, %v; want %d, %v", c.p, len(rows), err, c.rows, c.wantErr)
		}
	}
}

// The routes' queries are named after the routes, in their order.
func TestListOfNamesTheRoutes(t *testing.T) {
	for _, c := range []struct {
		of    ListOf
		route int
		name  string
	}{
		{ExecutionLists, int(ExecutionListAll), "ExecutionList"},
		{ExecutionLists, int(ExecutionListByNamespace), "ExecutionListByNamespace"},
		{ExecutionLists, int(ExecutionListRunning), "ExecutionListRunning"},
		{ExecutionLists, int(ExecutionListByState), "ExecutionListByState"},
		{ExecutionLists, int(ExecutionListByLane), "ExecutionListByLane"},
		{ExecutionLists, int(ExecutionListByUniqueKey), "ExecutionListByUniqueKey"},
		{ExecutionLists, int(ExecutionListByGroup), "ExecutionListByGroup"},
		{ExecutionLists, int(ExecutionListNewest), "ExecutionListNewest"},
		{ExecutionLists, int(ExecutionListByNamespaceNewest), "ExecutionListByNamespaceNewest"},
		{ExecutionLists, int(ExecutionListRunningNewest), "ExecutionListRunningNewest"},
		{ExecutionLists, int(ExecutionListByStateNewest), "ExecutionListByStateNewest"},
		{ExecutionLists, int(ExecutionListByLaneNewest), "ExecutionListByLaneNewest"},
		{ExecutionLists, int(ExecutionListByUniqueKeyNewest), "ExecutionListByUniqueKeyNewest"},
		{ExecutionLists, int(ExecutionListByGroupNewest), "ExecutionListByGroupNewest"},
		{AgentLists, int(AgentList), "AgentList"},
		{AgentLists, int(AgentListVisibleIn), "AgentListVisibleIn"},
		{AgentLists, int(AgentListByOwner), "AgentListByOwner"},
		{AgentLists, int(AgentListByState), "AgentListByState"},
		{AgentLists, int(AgentListLiveOnHost), "AgentListLiveOnHost"},
		{AgentLists, int(AgentListLiveByHolder), "AgentListLiveByHolder"},
		{WorkerLists, int(WorkerListAll), "WorkerListAll"},
		{WorkerLists, int(WorkerListByNamespace), "WorkerListByNamespace"},
		{WorkerEventLists, int(WorkerEventList), "WorkerEventList"},
		{WorkerEventLists, int(WorkerEventListByInstance), "WorkerEventListByInstance"},
		{WorkerEventLists, int(WorkerEventListByNamespace), "WorkerEventListByNamespace"},
	} {
		if got := c.of.Queries[c.route]; got != c.name {
			t.Errorf("route %d of %v: query %s, want %s", c.route, c.of.Params, got, c.name)
		}
	}
	for _, of := range []ListOf{ExecutionLists, AgentLists, WorkerLists, WorkerEventLists} {
		if n := map[string]int{"ExecutionListParams": int(ExecutionListByGroupNewest) + 1, "AgentListParams": int(AgentListLiveByHolder) + 1, "WorkerListParams": int(WorkerListByNamespace) + 1,
			"WorkerEventListParams": int(WorkerEventListByNamespace) + 1}[of.Params.Name()]; len(of.Queries) != n {
			t.Errorf("%v: %d queries for %d routes", of.Params, len(of.Queries), n)
		}
	}
}

// A Queries type that lacks a route's query, or whose query takes a
// parameter the list does not give, is refused when the lister is built.
func TestListerRefusesAMismatch(t *testing.T) {
	for _, c := range []struct {
		name string
		new  func()
		want string
	}{
		{"missing query", func() { NewLister[*fakeQueries, fakeRow](AgentLists) }, "has no query AgentList"},
		{"other rows", func() { NewLister[*fakeQueries, uuid.UUID](WorkerEventLists) }, "is not func"},
		{"unknown parameter", func() {
			NewLister[*fakeQueries, fakeRow](ListOf{Queries: WorkerEventLists.Queries, Params: WorkerEventLists.Params})
		}, "no field for"},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.Contains(s, c.want) {
					t.Errorf("panic %v, want one saying %q", r, c.want)
				}
			}()
			c.new()
		})
	}
}
