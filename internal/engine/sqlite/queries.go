package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
	sqlitedb "github.com/rosterdb/roster/db/sqlite"
	"github.com/rosterdb/roster/internal/engine"
)

// queries implements engine.Queries on the code sqlc generated from
// queries/sqlite: the operations both engines run alike are engine's (WorkerOps,
// AgentOps, LaneLimitOps, ScheduleOps, LeaderOps, written once over either engine's generated
// types), the rest are the methods of this package. Each passes its driver
// error through translate.
type queries struct {
	q *sqlitedb.Queries
	engine.WorkerOps
	engine.AgentOps
	engine.LaneLimitOps
	engine.ScheduleOps
	engine.LeaderOps
}

// newQueries returns queries on q.
func newQueries(q *sqlitedb.Queries) queries {
	return queries{
		q:            q,
		WorkerOps:    engine.NewWorkerOps(q, jsonArrays{}, translate, workerLists.On(q), workerEventLists.On(q)),
		AgentOps:     engine.NewAgentOps(q, jsonArrays{}, translate, agentLists.On(q)),
		LaneLimitOps: engine.NewLaneLimitOps(q, translate),
		ScheduleOps:  engine.NewScheduleOps(q, jsonArrays{}, translate),
		LeaderOps:    engine.NewLeaderOps(q, translate),
	}
}

var _ engine.Queries = queries{}

// The list operations' queries, found by their routes' names.
var (
	executionLists   = engine.NewLister[*sqlitedb.Queries, sqlitedb.Execution](engine.ExecutionLists)
	agentLists       = engine.NewLister[*sqlitedb.Queries, sqlitedb.Agent](engine.AgentLists)
	workerLists      = engine.NewLister[*sqlitedb.Queries, sqlitedb.Worker](engine.WorkerLists)
	workerEventLists = engine.NewLister[*sqlitedb.Queries, sqlitedb.WorkerEvent](engine.WorkerEventLists)
)

// Workers.

func (x queries) WorkerHeartbeat(ctx context.Context, k engine.WorkerKey, nowMs int64, logEvent bool) (int64, error) {
	ttl, err := x.q.WorkerHeartbeat(ctx, sqlitedb.WorkerHeartbeatParams{Now: nowMs, Namespace: k.Namespace, InstanceID: k.InstanceID})
	if err != nil || !logEvent {
		return ttl, translate(err)
	}
	return ttl, x.WorkerEventAppend(ctx, engine.WorkerEvent{
		Namespace: k.Namespace, InstanceID: k.InstanceID, Kind: "heartbeat", AtMs: nowMs,
	})
}

func (x queries) WorkerDelete(ctx context.Context, k engine.WorkerKey) (bool, error) {
	n, err := x.q.WorkerDelete(ctx, sqlitedb.WorkerDeleteParams{Namespace: k.Namespace, InstanceID: k.InstanceID})
	return n > 0, translate(err)
}

func (x queries) WorkerEventAppendSwept(ctx context.Context, keys []engine.WorkerKey, atMs int64) error {
	return translate(x.q.WorkerEventAppendSwept(ctx, sqlitedb.WorkerEventAppendSweptParams{AtMs: atMs, Instances: keyPairs(keys)}))
}

func (x queries) WorkerEventLatest(ctx context.Context, namespace string, n int) ([]engine.WorkerEvent, error) {
	var rows []sqlitedb.WorkerEvent
	var err error
	if namespace == "" {
		rows, err = x.q.WorkerEventListLatest(ctx, int64(n))
	} else {
		rows, err = x.q.WorkerEventListLatestByNamespace(ctx, sqlitedb.WorkerEventListLatestByNamespaceParams{Namespace: namespace, Limit: int64(n)})
	}
	return engine.WorkerEvents(rows, err, translate)
}

// Executions (claims and leases: leases.go; unique keys and schedules: fleet.go).

func (x queries) ExecutionInsert(ctx context.Context, e engine.Execution) error {
	return translate(x.q.ExecutionInsert(ctx, sqlitedb.ExecutionInsertParams{
		ID: e.ID, Namespace: e.Namespace, Lane: e.Lane, Priority: e.Priority, Payload: engine.NonNilBytes(e.Payload),
		RequiredCapabilities: jsonArray(e.RequiredCapabilities), MaxAttempts: e.MaxAttempts, CreatedAtMs: e.CreatedAtMs,
		RunAtMs: e.RunAtMs, RetryBackoffMs: e.RetryBackoffMs, Ready: e.ReadyAtCreate(), GroupKey: e.Group,
		Metadata: nullString(e.Metadata), TimeoutMs: e.TimeoutMs,
	}))
}

// ExecutionInsertMany inserts one by one in the writer's transaction: the
// single writer makes a prepared insert per row cheap.
func (x queries) ExecutionInsertMany(ctx context.Context, es []engine.Execution) error {
	for _, e := range es {
		if err := x.ExecutionInsert(ctx, e); err != nil {
			return err
		}
	}
	return nil
}

func (x queries) ExecutionGet(ctx context.Context, id uuid.UUID) (engine.Execution, error) {
	r, err := x.q.ExecutionGet(ctx, id)
	if err != nil {
		return engine.Execution{}, translate(err)
	}
	return executionFromRow(r)
}

func executionFromRow(r sqlitedb.Execution) (engine.Execution, error) {
	caps, err := parseJSONArray(r.RequiredCapabilities)
	if err != nil {
		return engine.Execution{}, err
	}
	return engine.Execution{
		ID: r.ID, Namespace: r.Namespace, Lane: r.Lane, State: r.State, Priority: r.Priority,
		Payload: r.Payload, Result: r.Result, RequiredCapabilities: caps,
		Attempts: r.Attempts, MaxAttempts: r.MaxAttempts, ReclaimCount: r.ReclaimCount,
		LastError: r.LastError, CreatedAtMs: r.CreatedAtMs, RunAtMs: r.RunAtMs, RetryBackoffMs: r.RetryBackoffMs,
		Holder: r.Holder.String, ClaimedAtMs: r.ClaimedAtMs.Int64, ExpiresAtMs: r.ExpiresAtMs.Int64,
		FinishedAtMs: r.FinishedAtMs.Int64, UniqueKey: r.UniqueKey.String, Group: r.GroupKey, Metadata: r.Metadata.String,
		TimeoutMs: r.TimeoutMs, DeadlineMs: r.DeadlineMs.Int64, Bound: r.Bound,
	}, nil
}

// ExecutionList runs the query of p's route (engine.ExecutionLists).
func (x queries) ExecutionList(ctx context.Context, p engine.ExecutionListParams) ([]engine.Execution, error) {
	rows, err := executionLists.List(ctx, x.q, int(p.Route()), p)
	return engine.RowsErr(len(rows), err, translate, func(i int) (engine.Execution, error) { return executionFromRow(rows[i]) })
}

// ExecutionCancel records a running execution's attempt as cancelled, then
// ends the execution, in the writer's transaction.
func (x queries) ExecutionCancel(ctx context.Context, id uuid.UUID, reason string, nowMs int64) (bool, error) {
	if err := x.q.AttemptInsertCancelled(ctx, sqlitedb.AttemptInsertCancelledParams{Now: nowMs, Reason: reason, ID: id}); err != nil {
		return false, translate(err)
	}
	_, err := x.q.ExecutionCancel(ctx, sqlitedb.ExecutionCancelParams{Reason: reason, Now: nowMs, ID: id})
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
	n, err := x.q.ExecutionPruneBatch(ctx, sqlitedb.ExecutionPruneBatchParams{Before: beforeMs, BatchSize: int64(batch)})
	return int(n), translate(err)
}

// promoteBatch is how many due scheduled executions a claim makes ready at
// once.
const promoteBatch = 1000

// candidate is an execution a claim may take, with its payload's size.
type candidate struct {
	id    uuid.UUID
	bytes int64
}

// ended is the lease of an attempt that just ended, to record.
type ended struct {
	id                       uuid.UUID
	attempts, epoch          int64
	leaseID                  uuid.NullUUID
	namespace                string
	holder                   sql.NullString
	claimedAtMs, expiresAtMs sql.NullInt64
	revokedAtMs              sql.NullInt64
	err                      string // the attempt's error: the fail reason, "lease expired"
}

// Stats.

// Stats reads the five aggregates of Stats.
func (x queries) Stats(ctx context.Context, atMs int64) (engine.StatsRows, error) {
	// sqlc types StatsLanes' @at as interface{} (it is only compared within
	// expressions), hence the closure.
	lanes := func(ctx context.Context, at int64) ([]sqlitedb.StatsLanesRow, error) { return x.q.StatsLanes(ctx, at) }
	return engine.ReadStats(ctx, atMs, translate, x.q.StatsWorkers, x.q.StatsExpiredLeases, lanes, x.q.StatsAgents, x.q.StatsLaneWorkers)
}

// Row mapping.

// sqliteBool is b as SQLite stores a boolean: 1 or 0.
func sqliteBool(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// nullString maps "" to NULL (engine.Text).
func nullString(s string) sql.NullString { return engine.Text[sql.NullString](s) }

// Lanes, capabilities and visible namespaces are stored as JSON arrays of
// strings, so that any identifier (commas included) round-trips.

// jsonArrays is how SQLite stores lists of strings: as JSON arrays.
type jsonArrays struct{}

var _ engine.Lists[string] = jsonArrays{}

// Store encodes a list as a JSON array (jsonArray).
func (jsonArrays) Store(vs []string) string { return jsonArray(vs) }

// Load decodes a stored JSON array (parseJSONArray).
func (jsonArrays) Load(s string) ([]string, error) { return parseJSONArray(s) }

// jsonArray encodes a string list as a JSON array ("[]" when empty).
func jsonArray(vs []string) string {
	if len(vs) == 0 {
		return "[]"
	}
	return mustJSON(vs)
}

// keyPairs encodes worker keys as a JSON array of [namespace, instance_id] pairs.
func keyPairs(keys []engine.WorkerKey) string {
	pairs := make([][2]string, len(keys))
	for i, k := range keys {
		pairs[i] = [2]string{k.Namespace, k.InstanceID}
	}
	return mustJSON(pairs)
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic("roster: encoding JSON: " + err.Error()) // only strings and uuids are encoded
	}
	return string(b)
}

// parseJSONArray decodes a stored JSON array of strings (nil when empty).
func parseJSONArray(s string) ([]string, error) {
	var vs []string
	if err := json.Unmarshal([]byte(s), &vs); err != nil {
		return nil, fmt.Errorf("roster: corrupt JSON array %q: %w", s, err)
	}
	if len(vs) == 0 {
		return nil, nil
	}
	return vs, nil
}
