package engine

import (
	"context"
	"fmt"
	"reflect"
)

// A list operation's routes are served by generated queries named after
// them (ExecutionListByGroup, AgentListLiveOnHost, ...) whose parameters
// carry the list's filters under the same names. Both engines' generated
// packages follow that naming, so the dispatch from a route to its query is
// written once, here, and checked when an adapter's package loads: a route
// whose query is missing or takes a parameter the list does not give panics
// then, not when a page is read.

// ListOf describes a list operation: the generated query of each route, in
// route order, and the parameters its queries are filled from.
type ListOf struct {
	Queries []string
	Params  reflect.Type // the engine's parameters: ExecutionListParams, ...
	// Aliases names, for a generated parameter named otherwise, the field of
	// Params that fills it.
	Aliases map[string]string
}

// The list operations of the seam.
var (
	ExecutionLists = ListOf{
		Queries: []string{
			"ExecutionList", "ExecutionListByNamespace", "ExecutionListRunning", "ExecutionListByState",
			"ExecutionListByLane", "ExecutionListByUniqueKey", "ExecutionListByGroup",
			"ExecutionListNewest", "ExecutionListByNamespaceNewest", "ExecutionListRunningNewest",
			"ExecutionListByStateNewest", "ExecutionListByLaneNewest", "ExecutionListByUniqueKeyNewest",
			"ExecutionListByGroupNewest",
		},
		Params:  reflect.TypeFor[ExecutionListParams](),
		Aliases: map[string]string{"GroupKey": "Group", "BeforeID": "AfterID", "MaxRows": "Limit"},
	}
	AgentLists = ListOf{
		Queries: []string{
			"AgentList", "AgentListVisibleIn", "AgentListByOwner", "AgentListByState",
			"AgentListLiveOnHost", "AgentListLiveByHolder",
		},
		Params:  reflect.TypeFor[AgentListParams](),
		Aliases: map[string]string{"Namespace": "VisibleIn", "MaxRows": "Limit"},
	}
	WorkerLists = ListOf{
		Queries: []string{"WorkerListAll", "WorkerListByNamespace"},
		Params:  reflect.TypeFor[WorkerListParams](),
		Aliases: map[string]string{"MaxRows": "Limit"},
	}
	WorkerEventLists = ListOf{
		Queries: []string{"WorkerEventList", "WorkerEventListByInstance", "WorkerEventListByNamespace"},
		Params:  reflect.TypeFor[WorkerEventListParams](),
		Aliases: map[string]string{"MaxRows": "Limit"},
	}
)

// Lister calls the generated query of a list's route on a sqlc Queries
// type Q whose queries return Row.
type Lister[Q, Row any] struct {
	of     ListOf
	routes []listQuery
}

// listQuery is one route's generated query and how its parameters are
// filled.
type listQuery struct {
	call   reflect.Value // func(Q, context.Context, params) ([]Row, error)
	params reflect.Type
	fill   []fieldFill
}

// fieldFill sets the generated parameter at index to, from the list's
// parameter at index from.
type fieldFill struct {
	to, from int
	set      func(to, from reflect.Value)
}

// NewLister finds on Q the query of each of l's routes; it panics if one is
// missing or does not take what l gives.
func NewLister[Q, Row any](l ListOf) *Lister[Q, Row] {
	q := reflect.TypeFor[Q]()
	rows := reflect.TypeFor[[]Row]()
	lr := &Lister[Q, Row]{of: l, routes: make([]listQuery, len(l.Queries))}
	for i, name := range l.Queries {
		m, ok := q.MethodByName(name)
		if !ok {
			panic(fmt.Sprintf("engine: %v has no query %s", q, name))
		}
		t := m.Func.Type() // receiver, ctx, params
		if t.NumIn() != 3 || t.In(2).Kind() != reflect.Struct || t.NumOut() != 2 || t.Out(0) != rows {
			panic(fmt.Sprintf("engine: %v.%s is not func(ctx, %sParams) (%v, error)", q, name, name, rows))
		}
		r := listQuery{call: m.Func, params: t.In(2)}
		for j := 0; j < r.params.NumField(); j++ {
			to := r.params.Field(j)
			name := to.Name
			if a, ok := l.Aliases[name]; ok {
				name = a
			}
			from, ok := l.Params.FieldByName(name)
			if !ok {
				panic(fmt.Sprintf("engine: %v has no field for %s's parameter %s", l.Params, r.params, to.Name))
			}
			r.fill = append(r.fill, fieldFill{to: j, from: from.Index[0], set: setter(to.Type, from.Type, r.params)})
		}
		lr.routes[i] = r
	}
	return lr
}

// setter assigns a list parameter of type from to a generated one of type
// to: as it is, an int to any integer, or a string to a nullable text
// (struct{String string; Valid bool}, NULL when empty).
func setter(to, from reflect.Type, in reflect.Type) func(to, from reflect.Value) {
	switch {
	case from.AssignableTo(to):
		return func(t, f reflect.Value) { t.Set(f) }
	case from.Kind() == reflect.Int && to.Kind() >= reflect.Int && to.Kind() <= reflect.Int64:
		return func(t, f reflect.Value) { t.SetInt(f.Int()) }
	case from.Kind() == reflect.String && isNullText(to):
		return func(t, f reflect.Value) {
			s := f.String()
			t.FieldByName("String").SetString(s)
			t.FieldByName("Valid").SetBool(s != "")
		}
	}
	panic(fmt.Sprintf("engine: cannot fill a %v of %v from a %v", to, in, from))
}

// isNullText reports whether t is a nullable text: sql.NullString,
// pgtype.Text.
func isNullText(t reflect.Type) bool {
	if t.Kind() != reflect.Struct || t.NumField() != 2 {
		return false
	}
	s, v := t.Field(0), t.Field(1)
	return s.Name == "String" && s.Type.Kind() == reflect.String && v.Name == "Valid" && v.Type.Kind() == reflect.Bool
}

// List runs on q the query of route with its parameters filled from p,
// which must be of the list's Params type.
func (l *Lister[Q, Row]) List(ctx context.Context, q Q, route int, p any) ([]Row, error) {
	r := l.routes[route]
	src := reflect.ValueOf(p)
	if src.Type() != l.of.Params {
		panic(fmt.Sprintf("engine: %v listed with a %v", l.of.Params, src.Type()))
	}
	args := reflect.New(r.params).Elem()
	for _, f := range r.fill {
		f.set(args.Field(f.to), src.Field(f.from))
	}
	out := r.call.Call([]reflect.Value{reflect.ValueOf(q), reflect.ValueOf(ctx), args})
	rows, _ := out[0].Interface().([]Row)
	err, _ := out[1].Interface().(error)
	return rows, err
}

// On is List on q: the list operation of one generated Queries value.
func (l *Lister[Q, Row]) On(q Q) func(ctx context.Context, route int, p any) ([]Row, error) {
	return func(ctx context.Context, route int, p any) ([]Row, error) { return l.List(ctx, q, route, p) }
}
