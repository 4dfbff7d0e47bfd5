package engine

// A list operation is served by one of several generated queries, each
// walking the index of its leading filter; the others are applied along the
// way. Which query serves a page is decided here, once for both engines:
// each engine maps a route to its own generated query of the same name
// (queries/ENGINE).

// ExecutionRoute is the query that serves an ExecutionList page.
type ExecutionRoute int

// The routes of ExecutionList, by leading filter (a namespace's unique key,
// else its group, else the namespace, else state, running executions apart,
// else lane, else none), oldest or newest first: each newest-first route is
// its oldest-first one plus ExecutionListNewest, in the same order.
const (
	ExecutionListAll ExecutionRoute = iota
	ExecutionListByNamespace
	ExecutionListRunning
	ExecutionListByState
	ExecutionListByLane
	ExecutionListByUniqueKey
	ExecutionListByGroup
	ExecutionListNewest
	ExecutionListByNamespaceNewest
	ExecutionListRunningNewest
	ExecutionListByStateNewest
	ExecutionListByLaneNewest
	ExecutionListByUniqueKeyNewest
	ExecutionListByGroupNewest
)

// Route is the query of p's leading filter (a namespace's unique key, else
// its group, else the namespace, else state, else lane), each walking an
// index in id order (running executions: the live rows of the running
// index, sorted), the other way when p.Newest. A unique key or a group
// comes with its namespace.
func (p ExecutionListParams) Route() ExecutionRoute {
	var r ExecutionRoute
	switch {
	case p.UniqueKey != "":
		r = ExecutionListByUniqueKey
	case p.Group != "":
		r = ExecutionListByGroup
	case p.Namespace != "":
		r = ExecutionListByNamespace
	case p.State == "running":
		r = ExecutionListRunning
	case p.State != "":
		r = ExecutionListByState
	case p.Lane != "":
		r = ExecutionListByLane
	default:
		r = ExecutionListAll
	}
	if p.Newest {
		r += ExecutionListNewest
	}
	return r
}

// AgentRoute is the query that serves an AgentList page.
type AgentRoute int

// The routes of AgentList, by leading filter.
const (
	AgentList AgentRoute = iota
	AgentListVisibleIn
	AgentListByOwner
	AgentListByState
	AgentListLiveOnHost
	AgentListLiveByHolder
)

// Route is the query of p's leading filter: the namespace agents are visible
// in, else the owner, else (for a live state) the host, walking the index of
// live agents by host, or the holder, reading the live agents of that
// registration, else the state. The other filters are applied along the way:
// a host or holder of any state (or of terminal agents) alone walks the
// agents (of that state) in id order.
func (p AgentListParams) Route() AgentRoute {
	live := p.State == "spawned" || p.State == "running" || p.State == "suspended"
	switch {
	case p.VisibleIn != "":
		return AgentListVisibleIn
	case p.OwnerActor != "":
		return AgentListByOwner
	case live && p.Host != "":
		return AgentListLiveOnHost
	case live && p.HolderNamespace != "":
		return AgentListLiveByHolder
	case p.State != "":
		return AgentListByState
	}
	return AgentList
}

// WorkerEventRoute is the query that serves a WorkerEventList page.
type WorkerEventRoute int

// The routes of WorkerEventList, by leading filter.
const (
	WorkerEventList WorkerEventRoute = iota
	WorkerEventListByInstance
	WorkerEventListByNamespace
)

// Route is the query of p's leading filter: the instance (within its
// namespace), else the namespace.
func (p WorkerEventListParams) Route() WorkerEventRoute {
	switch {
	case p.InstanceID != "":
		return WorkerEventListByInstance
	case p.Namespace != "":
		return WorkerEventListByNamespace
	}
	return WorkerEventList
}

// WorkerRoute is the query that serves a WorkerList page.
type WorkerRoute int

// The routes of WorkerList, by leading filter.
const (
	WorkerListAll WorkerRoute = iota
	WorkerListByNamespace
)

// Route is the query of p's leading filter: the namespace, else none (the
// workers in (namespace, instance) order).
func (p WorkerListParams) Route() WorkerRoute {
	if p.Namespace != "" {
		return WorkerListByNamespace
	}
	return WorkerListAll
}
