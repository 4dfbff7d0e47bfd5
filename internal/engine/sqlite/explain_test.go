package sqlite

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/google/uuid"
	sqlitedb "github.com/rosterdb/roster/db/sqlite"
	"github.com/rosterdb/roster/internal/engine"
)

// planRecorder is a sqlitedb.DBTX that, instead of running a generated query,
// runs EXPLAIN QUERY PLAN on its exact text and arguments and records the plan.
type planRecorder struct {
	conn  *sql.DB
	plans []string
}

func (p *planRecorder) explain(ctx context.Context, query string, args ...any) {
	rows, err := p.conn.QueryContext(ctx, "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		p.plans = append(p.plans, "ERROR: "+err.Error())
		return
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			p.plans = append(p.plans, "ERROR: "+err.Error())
			return
		}
		lines = append(lines, detail)
	}
	p.plans = append(p.plans, strings.Join(lines, "\n"))
}

func (p *planRecorder) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	p.explain(ctx, query, args...)
	return p.conn.ExecContext(ctx, "SELECT 1 WHERE 0")
}

func (p *planRecorder) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return p.conn.PrepareContext(ctx, query)
}

func (p *planRecorder) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	p.explain(ctx, query, args...)
	return p.conn.QueryContext(ctx, "SELECT 1 WHERE 0")
}

func (p *planRecorder) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	p.explain(ctx, query, args...)
	return p.conn.QueryRowContext(ctx, "SELECT 1 WHERE 0")
}

// assertIndexed runs call against a plan recorder and fails unless every
// statement it issues is index-backed: no full scan of a table and no sort of
// the whole result. A "SCAN t USING INDEX i" (an index walked in order, as a
// keyset page does) is allowed only when allowOrderedScan is set.
func assertIndexed(t *testing.T, e *Engine, call func(q *sqlitedb.Queries) error, allowOrderedScan ...bool) {
	t.Helper()
	rec := &planRecorder{conn: e.writer}
	_ = call(sqlitedb.New(rec))
	if len(rec.plans) == 0 {
		t.Fatal("the call issued no query")
	}
	ordered := len(allowOrderedScan) > 0 && allowOrderedScan[0]
	for _, plan := range rec.plans {
		if strings.HasPrefix(plan, "ERROR: ") {
			t.Fatalf("EXPLAIN QUERY PLAN failed: %s", plan)
		}
		if line := planScans(plan, ordered); line != "" {
			t.Fatalf("query is not index-backed (%q):\n%s", line, plan)
		}
	}
}

// planScans returns the first step of a plan that reads a whole table or sorts
// the whole result, or "". json_each's virtual tables are not tables.
func planScans(plan string, allowOrderedScan bool) string {
	for _, line := range strings.Split(plan, "\n") {
		line = strings.TrimSpace(line)
		if strings.Contains(line, "VIRTUAL TABLE") || strings.HasPrefix(line, "SCAN CONSTANT ROW") {
			continue
		}
		scan := strings.HasPrefix(line, "SCAN ")
		if scan && allowOrderedScan && strings.Contains(line, " INDEX ") {
			continue
		}
		if scan || strings.Contains(line, "TEMP B-TREE FOR ORDER BY") {
			return line
		}
	}
	return ""
}

func TestAssertIndexedCatchesScans(t *testing.T) {
	e := openMemory(t)
	ctx := context.Background()
	for _, tc := range []struct {
		query string
		bad   bool
	}{
		{"SELECT * FROM workers WHERE worker_id = 'x'", true},
		{"SELECT * FROM workers ORDER BY worker_id LIMIT 5", true},
		{"SELECT * FROM workers WHERE namespace = 'a' AND instance_id = 'b'", false},
	} {
		rec := &planRecorder{conn: e.writer}
		rec.explain(ctx, tc.query)
		if got := planScans(rec.plans[0], false) != ""; got != tc.bad {
			t.Fatalf("%s: flagged=%v, want %v\n%s", tc.query, got, tc.bad, rec.plans[0])
		}
	}
}

func TestWorkerQueriesUseIndexes(t *testing.T) {
	e := openMemory(t)
	ctx := context.Background()
	for name, call := range map[string]func(q *sqlitedb.Queries) error{
		"WorkerGet": func(q *sqlitedb.Queries) error {
			_, err := q.WorkerGet(ctx, sqlitedb.WorkerGetParams{Namespace: "n", InstanceID: "i"})
			return err
		},
		"WorkerHeartbeat": func(q *sqlitedb.Queries) error {
			_, err := q.WorkerHeartbeat(ctx, sqlitedb.WorkerHeartbeatParams{Now: 1, Namespace: "n", InstanceID: "i"})
			return err
		},
		"WorkerListByNamespace": func(q *sqlitedb.Queries) error {
			_, err := q.WorkerListByNamespace(ctx, sqlitedb.WorkerListByNamespaceParams{Namespace: "n", AfterInstanceID: "", Limit: 10})
			return err
		},
		"WorkerListAll": func(q *sqlitedb.Queries) error {
			_, err := q.WorkerListAll(ctx, sqlitedb.WorkerListAllParams{AfterNamespace: "a", AfterInstanceID: "b", Limit: 10})
			return err
		},
		"WorkerSweepBatch": func(q *sqlitedb.Queries) error {
			_, err := q.WorkerSweepBatch(ctx, sqlitedb.WorkerSweepBatchParams{Now: 1, BatchSize: 10})
			return err
		},
		"WorkerEventList": func(q *sqlitedb.Queries) error {
			_, err := q.WorkerEventList(ctx, sqlitedb.WorkerEventListParams{AfterSeq: 1, Limit: 10})
			return err
		},
		"WorkerEventListByNamespace": func(q *sqlitedb.Queries) error {
			_, err := q.WorkerEventListByNamespace(ctx, sqlitedb.WorkerEventListByNamespaceParams{Namespace: "n", AfterSeq: 1, Limit: 10})
			return err
		},
		"WorkerEventListByInstance": func(q *sqlitedb.Queries) error {
			_, err := q.WorkerEventListByInstance(ctx, sqlitedb.WorkerEventListByInstanceParams{InstanceID: "i", Namespace: "n", AfterSeq: 1, Limit: 10})
			return err
		},
		"WorkerEventPruneBatch": func(q *sqlitedb.Queries) error {
			_, err := q.WorkerEventPruneBatch(ctx, sqlitedb.WorkerEventPruneBatchParams{BeforeMs: 1, BatchSize: 10})
			return err
		},
		"WorkerGetAlive": func(q *sqlitedb.Queries) error {
			_, err := q.WorkerGetAlive(ctx, sqlitedb.WorkerGetAliveParams{Namespace: "n", InstanceID: "i", Now: 1})
			return err
		},
		"WorkerRefresh": func(q *sqlitedb.Queries) error {
			_, err := q.WorkerRefresh(ctx, sqlitedb.WorkerRefreshParams{Lanes: "[]", Capabilities: "[]", Now: 1, TtlMs: 5, Namespace: "n", InstanceID: "i", WorkerID: "w"})
			return err
		},
		"WorkerDelete": func(q *sqlitedb.Queries) error {
			_, err := q.WorkerDelete(ctx, sqlitedb.WorkerDeleteParams{Namespace: "n", InstanceID: "i"})
			return err
		},
		"AttemptRevokeHeldBy": func(q *sqlitedb.Queries) error {
			return q.AttemptRevokeHeldBy(ctx, sqlitedb.AttemptRevokeHeldByParams{Now: 1, Instances: `[["n","i"]]`})
		},
	} {
		t.Run(name, func(t *testing.T) { assertIndexed(t, e, call) })
	}
}

func TestLeaseQueriesUseIndexes(t *testing.T) {
	e := openMemory(t)
	ctx := context.Background()
	id := uuid.New()
	for name, call := range map[string]func(q *sqlitedb.Queries) error{
		"ExecutionPickInLane": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionPickInLane(ctx, sqlitedb.ExecutionPickInLaneParams{Namespace: "n", Lane: "l", Priority: 3, Now: 5, Capabilities: `["gpu"]`, Limit: 4})
			return err
		},
		"ExecutionTopPriority": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionTopPriority(ctx, sqlitedb.ExecutionTopPriorityParams{Namespace: "n", Lane: "l", AtMost: 9})
			return err
		},
		"ExecutionStart": func(q *sqlitedb.Queries) error { _, err := q.ExecutionStart(ctx, id); return err },
		"AttemptRenew": func(q *sqlitedb.Queries) error {
			_, err := q.AttemptRenew(ctx, sqlitedb.AttemptRenewParams{ExpiresAtMs: 2, ExecutionID: id, Epoch: 1, Now: 1})
			return err
		},
		"AttemptEnd": func(q *sqlitedb.Queries) error {
			_, err := q.AttemptEnd(ctx, sqlitedb.AttemptEndParams{State: "completed", Now: 1, ExecutionID: id, Epoch: 1})
			return err
		},
		"AttemptDeleteCurrent": func(q *sqlitedb.Queries) error {
			_, err := q.AttemptDeleteCurrent(ctx, sqlitedb.AttemptDeleteCurrentParams{ExecutionID: id, Epoch: 1, Now: 1})
			return err
		},
		"ExecutionRelease":  func(q *sqlitedb.Queries) error { return q.ExecutionRelease(ctx, id) },
		"AttemptGetByLease": func(q *sqlitedb.Queries) error { _, err := q.AttemptGetByLease(ctx, id); return err },
		"ExecutionNextRunAt": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionNextRunAt(ctx, sqlitedb.ExecutionNextRunAtParams{Namespace: "n", Lane: "l", Now: 5})
			return err
		},
		"AttemptListExpired": func(q *sqlitedb.Queries) error {
			_, err := q.AttemptListExpired(ctx, sqlitedb.AttemptListExpiredParams{AsOf: 5, AfterExpiresAtMs: 1, AfterExecutionID: id.String(), Limit: 10})
			return err
		},
		"AttemptListExpiredByNamespace": func(q *sqlitedb.Queries) error {
			_, err := q.AttemptListExpiredByNamespace(ctx, sqlitedb.AttemptListExpiredByNamespaceParams{Namespace: "n", AsOf: 5, AfterExpiresAtMs: 1, AfterExecutionID: id.String(), Limit: 10})
			return err
		},
		"AttemptReclaimBatch": func(q *sqlitedb.Queries) error {
			_, err := q.AttemptReclaimBatch(ctx, sqlitedb.AttemptReclaimBatchParams{Now: 1, BatchSize: 10})
			return err
		},
		"ExecutionRequeueReclaimed": func(q *sqlitedb.Queries) error {
			return q.ExecutionRequeueReclaimed(ctx, sqlitedb.ExecutionRequeueReclaimedParams{Now: 1, Ids: `["` + id.String() + `"]`})
		},
		"ExecutionGetState": func(q *sqlitedb.Queries) error { _, err := q.ExecutionGetState(ctx, id); return err },
		"ExecutionCancel": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionCancel(ctx, sqlitedb.ExecutionCancelParams{Reason: "r", ID: id})
			return err
		},
		"AttemptCancelRunning": func(q *sqlitedb.Queries) error {
			return q.AttemptCancelRunning(ctx, sqlitedb.AttemptCancelRunningParams{Now: 1, ExecutionID: id})
		},
		"ExecutionFail": func(q *sqlitedb.Queries) error {
			return q.ExecutionFail(ctx, sqlitedb.ExecutionFailParams{Now: 1, LastError: "x", ID: id})
		},
		"ExecutionComplete": func(q *sqlitedb.Queries) error {
			return q.ExecutionComplete(ctx, sqlitedb.ExecutionCompleteParams{Result: []byte("x"), ID: id})
		},
		"ExecutionList": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionList(ctx, sqlitedb.ExecutionListParams{AfterID: id, Limit: 10})
			return err
		},
		"ExecutionListByNamespace": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionListByNamespace(ctx, sqlitedb.ExecutionListByNamespaceParams{Namespace: "ns1", AfterID: id, Limit: 10})
			return err
		},
		"ExecutionListByLane": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionListByLane(ctx, sqlitedb.ExecutionListByLaneParams{Lane: "lane1", AfterID: id, Limit: 10})
			return err
		},
		"ExecutionListByState": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionListByState(ctx, sqlitedb.ExecutionListByStateParams{State: "waiting", AfterID: id, Limit: 10})
			return err
		},
		"ExecutionListByNamespaceLane": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionListByNamespaceLane(ctx, sqlitedb.ExecutionListByNamespaceLaneParams{Namespace: "ns1", Lane: "lane1", AfterID: id, Limit: 10})
			return err
		},
		"ExecutionListByNamespaceState": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionListByNamespaceState(ctx, sqlitedb.ExecutionListByNamespaceStateParams{Namespace: "ns1", State: "waiting", AfterID: id, Limit: 10})
			return err
		},
		"ExecutionListByLaneState": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionListByLaneState(ctx, sqlitedb.ExecutionListByLaneStateParams{Lane: "lane1", State: "waiting", AfterID: id, Limit: 10})
			return err
		},
		"ExecutionListByNamespaceLaneState": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionListByNamespaceLaneState(ctx, sqlitedb.ExecutionListByNamespaceLaneStateParams{Namespace: "ns1", Lane: "lane1", State: "waiting", AfterID: id, Limit: 10})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) { assertIndexed(t, e, call) })
	}
}

func TestAgentSchemaEnforcesInvariants(t *testing.T) {
	ctx := context.Background()
	e := openMemory(t)
	insert := func(id, state, reason, session, key string) error {
		_, err := e.writer.ExecContext(ctx, `INSERT INTO agents (id, state, terminal_reason, provider,
			provider_session_id, owner_actor, owner_peer_class, owner_write_namespace,
			spawn_fingerprint, spawned_at_ms, state_changed_at_ms, idempotency_key)
			VALUES (?, ?, ?, 'p', ?, 'o', 'c', 'ns', 'fp', 0, 0, ?)`,
			id, state, nullString(reason), nullString(session), nullString(key))
		return err
	}
	must(t, insert("ok", "running", "", "s1", "k1"))
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"terminal without reason", insert("a", "terminal", "", "", "")},
		{"live with reason", insert("b", "running", "killed", "", "")},
		{"unknown reason", insert("c", "terminal", "bored", "", "")},
		{"unknown state", insert("d", "zombie", "", "", "")},
		{"live session taken", insert("e", "spawned", "", "s1", "")},
		{"idempotency key reused", insert("f", "spawned", "", "", "k1")},
	} {
		if tc.err == nil {
			t.Errorf("%s: raw insert accepted", tc.name)
		}
	}
	// A raw insert that is valid is visible through roster, with its visibility rows.
	must(t, insert("raw", "terminal", "killed", "s1", ""))
	var agents []engine.Agent
	must(t, e.Read(ctx, func(ctx context.Context, q engine.Queries) error {
		var err error
		agents, err = q.AgentList(ctx, engine.AgentListParams{VisibleIn: "ns", Limit: 10})
		return err
	}))
	if len(agents) != 2 {
		t.Fatalf("visible in ns: %d agents", len(agents))
	}
}

func TestAgentQueriesUseIndexes(t *testing.T) {
	e := openMemory(t)
	ctx := context.Background()
	for name, call := range map[string]func(q *sqlitedb.Queries) error{
		"AgentGet": func(q *sqlitedb.Queries) error { _, err := q.AgentGet(ctx, "a"); return err },
		"AgentFindByIdempotencyKey": func(q *sqlitedb.Queries) error {
			_, err := q.AgentFindByIdempotencyKey(ctx, sqlitedb.AgentFindByIdempotencyKeyParams{OwnerActor: "o", IdempotencyKey: nullString("k")})
			return err
		},
		"AgentFindLiveByProviderSession": func(q *sqlitedb.Queries) error {
			_, err := q.AgentFindLiveByProviderSession(ctx, sqlitedb.AgentFindLiveByProviderSessionParams{Provider: "p", ProviderSessionID: nullString("s")})
			return err
		},
		"AgentTerminateLive": func(q *sqlitedb.Queries) error { _, err := q.AgentTerminateLive(ctx, 1); return err },
		"AgentList": func(q *sqlitedb.Queries) error {
			_, err := q.AgentList(ctx, sqlitedb.AgentListParams{AfterID: "", Limit: 10})
			return err
		},
		"AgentListByState": func(q *sqlitedb.Queries) error {
			_, err := q.AgentListByState(ctx, sqlitedb.AgentListByStateParams{State: "running", Limit: 10})
			return err
		},
		"AgentListByOwner": func(q *sqlitedb.Queries) error {
			_, err := q.AgentListByOwner(ctx, sqlitedb.AgentListByOwnerParams{OwnerActor: "o", State: "running", Limit: 10})
			return err
		},
		"AgentListVisibleIn": func(q *sqlitedb.Queries) error {
			_, err := q.AgentListVisibleIn(ctx, sqlitedb.AgentListVisibleInParams{Namespace: "n", State: "running", OwnerActor: "o", Limit: 10})
			return err
		},
		"AgentSetState": func(q *sqlitedb.Queries) error {
			_, err := q.AgentSetState(ctx, sqlitedb.AgentSetStateParams{ID: "a", State: "running", FromState: "spawned"})
			return err
		},
		"AgentSetCheckpoint": func(q *sqlitedb.Queries) error {
			_, err := q.AgentSetCheckpoint(ctx, sqlitedb.AgentSetCheckpointParams{ID: "a"})
			return err
		},
	} {
		// The host-restart scan walks the partial index of live agents only.
		t.Run(name, func(t *testing.T) { assertIndexed(t, e, call, name == "AgentTerminateLive") })
	}
}

// Stats reads live rows only: executions through an index that holds (or
// seeks) just the waiting and running ones, expired leases through a partial
// index of running attempts. Workers are all live: their scan is the live
// rows.
func TestStatsReadsLiveRowsOnly(t *testing.T) {
	e := openMemory(t)
	ctx := context.Background()
	for name, tc := range map[string]struct {
		call    func(q *sqlitedb.Queries) error
		allowed []string // plan steps that read only live rows
	}{
		"StatsLanes": {func(q *sqlitedb.Queries) error { _, err := q.StatsLanes(ctx, 5); return err },
			[]string{"INDEX executions_live", "INDEX executions_state (state=?)"}},
		"StatsExpiredLeases": {func(q *sqlitedb.Queries) error { _, err := q.StatsExpiredLeases(ctx, 5); return err },
			[]string{"INDEX attempts_namespace_expiry", "INDEX attempts_expiry", "INDEX attempts_holder", "INDEX attempts_running"}},
		"StatsAgents": {func(q *sqlitedb.Queries) error { _, err := q.StatsAgents(ctx); return err },
			[]string{"agent_state_counts"}},
	} {
		t.Run(name, func(t *testing.T) {
			rec := &planRecorder{conn: e.writer}
			_ = tc.call(sqlitedb.New(rec))
			for _, line := range strings.Split(rec.plans[0], "\n") {
				if !strings.HasPrefix(line, "SCAN ") && !strings.HasPrefix(line, "SEARCH ") {
					continue // temp b-trees of GROUP BY over the live rows
				}
				ok := false
				for _, a := range tc.allowed {
					ok = ok || strings.Contains(line, a)
				}
				if !ok {
					t.Fatalf("a step may read finished history: %q\n%s", line, rec.plans[0])
				}
			}
		})
	}
}

// The newest events are read backwards along the rowid (seq) or the
// namespace index, stopping at the limit: never a sort of the log.
func TestLatestEventsReadBackwards(t *testing.T) {
	e := openMemory(t)
	ctx := context.Background()
	for name, call := range map[string]func(q *sqlitedb.Queries) error{
		"WorkerEventListLatest": func(q *sqlitedb.Queries) error { _, err := q.WorkerEventListLatest(ctx, 20); return err },
		"WorkerEventListLatestByNamespace": func(q *sqlitedb.Queries) error {
			_, err := q.WorkerEventListLatestByNamespace(ctx, sqlitedb.WorkerEventListLatestByNamespaceParams{Namespace: "n", Limit: 20})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			rec := &planRecorder{conn: e.writer}
			_ = call(sqlitedb.New(rec))
			plan := rec.plans[0]
			if strings.Contains(plan, "TEMP B-TREE") || !(plan == "SCAN worker_events" || strings.Contains(plan, "USING INDEX worker_events_namespace")) {
				t.Fatalf("plan:\n%s", plan)
			}
		})
	}
}
