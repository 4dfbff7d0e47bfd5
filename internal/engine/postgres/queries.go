package postgres

import (
	"context"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	pgdb "github.com/rosterdb/roster/db/postgres"
	"github.com/rosterdb/roster/internal/engine"
)

// queries implements engine.Queries on the code sqlc generated from
// queries/postgres: the operations both engines run alike are engine's (WorkerOps,
// AgentOps, LaneLimitOps, ScheduleOps, LeaderOps, written once over either engine's generated
// types), the rest are the methods of this package. Each passes its driver
// error through translate.
type queries struct {
	q *pgdb.Queries
	engine.WorkerOps
	engine.AgentOps
	engine.LaneLimitOps
	engine.ScheduleOps
	engine.LeaderOps
}

// newQueries returns queries on q.
func newQueries(q *pgdb.Queries) queries {
	return queries{
		q:            q,
		WorkerOps:    engine.NewWorkerOps(q, arrays{}, translate, workerLists.On(q), workerEventLists.On(q)),
		AgentOps:     engine.NewAgentOps(q, arrays{}, translate, agentLists.On(q)),
		LaneLimitOps: engine.NewLaneLimitOps(q, translate),
		ScheduleOps:  engine.NewScheduleOps(q, arrays{}, translate),
		LeaderOps:    engine.NewLeaderOps(q, translate),
	}
}

var _ engine.Queries = queries{}

// The list operations' queries, found by their routes' names.
var (
	executionLists   = engine.NewLister[*pgdb.Queries, pgdb.Execution](engine.ExecutionLists)
	agentLists       = engine.NewLister[*pgdb.Queries, pgdb.Agent](engine.AgentLists)
	workerLists      = engine.NewLister[*pgdb.Queries, pgdb.Worker](engine.WorkerLists)
	workerEventLists = engine.NewLister[*pgdb.Queries, pgdb.WorkerEvent](engine.WorkerEventLists)
)

// Workers.

func (x queries) WorkerHeartbeat(ctx context.Context, k engine.WorkerKey, nowMs int64, logEvent bool) (int64, error) {
	ttl, err := x.q.WorkerHeartbeat(ctx, pgdb.WorkerHeartbeatParams{Now: nowMs, Namespace: k.Namespace, InstanceID: k.InstanceID, LogEvent: logEvent})
	return ttl, translate(err)
}

// WorkerDelete deletes the worker under its worker lock, taken first (the
// lock order of executions.sql): it runs in MarkWorkerDead's transaction.
func (x queries) WorkerDelete(ctx context.Context, k engine.WorkerKey) (bool, error) {
	if err := x.q.WorkerLock(ctx, pgdb.WorkerLockParams{Namespace: k.Namespace, InstanceID: k.InstanceID}); err != nil {
		return false, translate(err)
	}
	n, err := x.q.WorkerDelete(ctx, pgdb.WorkerDeleteParams{Namespace: k.Namespace, InstanceID: k.InstanceID})
	return n > 0, translate(err)
}

func (x queries) WorkerEventAppendSwept(ctx context.Context, keys []engine.WorkerKey, atMs int64) error {
	namespaces, instances := splitKeys(keys)
	return translate(x.q.WorkerEventAppendSwept(ctx, pgdb.WorkerEventAppendSweptParams{
		Namespaces: namespaces, InstanceIds: instances, AtMs: atMs,
	}))
}

func (x queries) WorkerEventLatest(ctx context.Context, namespace string, n int) ([]engine.WorkerEvent, error) {
	var rows []pgdb.WorkerEvent
	var err error
	if namespace == "" {
		rows, err = x.q.WorkerEventListLatest(ctx, int32(n))
	} else {
		rows, err = x.q.WorkerEventListLatestByNamespace(ctx, pgdb.WorkerEventListLatestByNamespaceParams{Namespace: namespace, MaxRows: int32(n)})
	}
	return engine.WorkerEvents(rows, err, translate)
}

// Executions (claims and leases: leases.go; unique keys and schedules: fleet.go).

func (x queries) ExecutionInsert(ctx context.Context, e engine.Execution) error {
	return translate(x.q.ExecutionInsert(ctx, pgdb.ExecutionInsertParams{
		ID: e.ID, Namespace: e.Namespace, Lane: e.Lane, Priority: e.Priority, Payload: engine.NonNilBytes(e.Payload),
		RequiredCapabilities: array(e.RequiredCapabilities), MaxAttempts: e.MaxAttempts, CreatedAtMs: e.CreatedAtMs,
		RunAtMs: e.RunAtMs, RetryBackoffMs: e.RetryBackoffMs, Ready: e.ReadyAtCreate(), GroupKey: e.Group, Metadata: text(e.Metadata),
		TimeoutMs: e.TimeoutMs,
	}))
}

// ExecutionInsertMany sends every execution in one statement, column by
// column (unnest), so a batch costs one round trip.
func (x queries) ExecutionInsertMany(ctx context.Context, es []engine.Execution) error {
	n := len(es)
	p := pgdb.ExecutionInsertManyParams{
		Ids: make([]uuid.UUID, n), Namespaces: make([]string, n), Lanes: make([]string, n),
		Priorities: make([]int64, n), Payloads: make([][]byte, n), Capabilities: make([]string, n),
		MaxAttempts: make([]int64, n), RunAtMs: make([]int64, n), RetryBackoffMs: make([]int64, n),
		Ready: make([]bool, n), CreatedAtMs: make([]int64, n), GroupKeys: make([]string, n), Metadata: make([]string, n),
		TimeoutsMs: make([]int64, n),
	}
	for i, e := range es {
		p.Ids[i], p.Namespaces[i], p.Lanes[i], p.Priorities[i] = e.ID, e.Namespace, e.Lane, e.Priority
		p.Payloads[i] = engine.NonNilBytes(e.Payload)
		p.Capabilities[i] = strings.Join(e.RequiredCapabilities, "\x1f")
		p.MaxAttempts[i], p.RunAtMs[i], p.RetryBackoffMs[i] = e.MaxAttempts, e.RunAtMs, e.RetryBackoffMs
		p.Ready[i], p.CreatedAtMs[i], p.GroupKeys[i], p.Metadata[i] = e.ReadyAtCreate(), e.CreatedAtMs, e.Group, e.Metadata
		p.TimeoutsMs[i] = e.TimeoutMs
	}
	return translate(x.q.ExecutionInsertMany(ctx, p))
}

func (x queries) ExecutionGet(ctx context.Context, id uuid.UUID) (engine.Execution, error) {
	r, err := x.q.ExecutionGet(ctx, id)
	if err != nil {
		return engine.Execution{}, translate(err)
	}
	return executionFromRow(r), nil
}

func executionFromRow(r pgdb.Execution) engine.Execution {
	return engine.Execution{
		ID: r.ID, Namespace: r.Namespace, Lane: r.Lane, State: r.State, Priority: r.Priority,
		Payload: r.Payload, Result: r.Result, RequiredCapabilities: list(r.RequiredCapabilities),
		Attempts: r.Attempts, MaxAttempts: r.MaxAttempts, ReclaimCount: r.ReclaimCount,
		LastError: r.LastError, CreatedAtMs: r.CreatedAtMs, RunAtMs: r.RunAtMs, RetryBackoffMs: r.RetryBackoffMs,
		Holder: r.Holder.String, ClaimedAtMs: r.ClaimedAtMs.Int64, ExpiresAtMs: r.ExpiresAtMs.Int64,
		FinishedAtMs: r.FinishedAtMs.Int64, UniqueKey: r.UniqueKey.String, Group: r.GroupKey, Metadata: r.Metadata.String,
		TimeoutMs: r.TimeoutMs, DeadlineMs: r.DeadlineMs.Int64, Bound: r.Bound,
	}
}

// ExecutionList runs the query of p's route (engine.ExecutionLists).
func (x queries) ExecutionList(ctx context.Context, p engine.ExecutionListParams) ([]engine.Execution, error) {
	rows, err := executionLists.List(ctx, x.q, int(p.Route()), p)
	return engine.Rows(len(rows), err, translate, func(i int) engine.Execution { return executionFromRow(rows[i]) })
}

func (x queries) ExecutionCancel(ctx context.Context, id uuid.UUID, reason string, nowMs int64) (bool, error) {
	_, err := x.q.ExecutionCancel(ctx, pgdb.ExecutionCancelParams{Reason: reason, ID: id, Now: nowMs})
	return engine.Found(translate(err))
}

func (x queries) ExecutionGetState(ctx context.Context, id uuid.UUID) (string, error) {
	st, err := x.q.ExecutionGetState(ctx, id)
	return st, translate(err)
}

func (x queries) ExecutionFinishedPerMinute(ctx context.Context, sinceMs int64) ([]engine.FinishedCount, error) {
	rows, err := x.q.ExecutionFinishedPerMinute(ctx, sinceMs)
	return engine.Rows(len(rows), err, translate, func(i int) engine.FinishedCount { return engine.FinishedCount(rows[i]) })
}

func (x queries) ExecutionPruneBatch(ctx context.Context, beforeMs int64, batch int) (int, error) {
	n, err := x.q.ExecutionPruneBatch(ctx, pgdb.ExecutionPruneBatchParams{Before: beforeMs, BatchSize: int32(batch)})
	return int(n), translate(err)
}

// maxPromotions bounds how many times a claim makes due scheduled
// executions ready and looks again before it claims from what is ready.
const maxPromotions = 4

// Stats.

// Stats reads the five aggregates of Stats.
func (x queries) Stats(ctx context.Context, atMs int64) (engine.StatsRows, error) {
	return engine.ReadStats(ctx, atMs, translate, x.q.StatsWorkers, x.q.StatsExpiredLeases, x.q.StatsLanes, x.q.StatsAgents, x.q.StatsLaneWorkers)
}

// Row mapping.

// text maps "" to NULL (engine.Text).
func text(s string) pgtype.Text { return engine.Text[pgtype.Text](s) }

// arrays is how PostgreSQL stores lists of strings: as text[].
type arrays struct{}

var _ engine.Lists[[]string] = arrays{}

// Store encodes a list for a text[] parameter (array).
func (arrays) Store(vs []string) []string { return array(vs) }

// Load decodes a stored text[] (list).
func (arrays) Load(vs []string) ([]string, error) { return list(vs), nil }

// array returns a non-nil slice: a nil one would be NULL, not '{}'.
func array(vs []string) []string {
	if vs == nil {
		return []string{}
	}
	return vs
}

// list maps an empty array to nil, as the service's types say.
func list(vs []string) []string {
	if len(vs) == 0 {
		return nil
	}
	return vs
}

func splitKeys(keys []engine.WorkerKey) (namespaces, instances []string) {
	namespaces = make([]string, len(keys))
	instances = make([]string, len(keys))
	for i, k := range keys {
		namespaces[i], instances[i] = k.Namespace, k.InstanceID
	}
	return namespaces, instances
}
