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
// the whole result, or "". json_each's virtual tables are not tables, nor is
// a co-routine of one constant row (a FROM (SELECT 1)).
func planScans(plan string, allowOrderedScan bool) string {
	coroutines := map[string]bool{}
	for _, line := range strings.Split(plan, "\n") {
		line = strings.TrimSpace(line)
		if name, ok := strings.CutPrefix(line, "CO-ROUTINE "); ok {
			coroutines[name] = true
			continue
		}
		if strings.Contains(line, "VIRTUAL TABLE") || strings.HasPrefix(line, "SCAN CONSTANT ROW") ||
			coroutines[strings.TrimPrefix(line, "SCAN ")] {
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
		"WorkerGetClaimer": func(q *sqlitedb.Queries) error {
			_, err := q.WorkerGetClaimer(ctx, sqlitedb.WorkerGetClaimerParams{Namespace: "n", InstanceID: "i", Now: 1})
			return err
		},
		"WorkerGetClaimPlan": func(q *sqlitedb.Queries) error {
			_, err := q.WorkerGetClaimPlan(ctx, sqlitedb.WorkerGetClaimPlanParams{Namespace: "n", InstanceID: "i", Now: 1})
			return err
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
		"ExecutionInsert": func(q *sqlitedb.Queries) error {
			return q.ExecutionInsert(ctx, sqlitedb.ExecutionInsertParams{ID: id, Namespace: "n", Lane: "l", Payload: []byte{}, RequiredCapabilities: "[]", MaxAttempts: 1, Ready: true})
		},
		"ExecutionDueExists": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionDueExists(ctx, sqlitedb.ExecutionDueExistsParams{Namespace: "n", Now: 5})
			return err
		},
		"ExecutionPromoteDue": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionPromoteDue(ctx, sqlitedb.ExecutionPromoteDueParams{Namespace: "n", Now: 5, BatchSize: 1000})
			return err
		},
		"ExecutionPickOneLane": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionPickOneLane(ctx, sqlitedb.ExecutionPickOneLaneParams{Namespace: "n", Lane: "l", Capabilities: `["gpu"]`, Limit: 4})
			return err
		},
		"ExecutionPickManyLanes": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionPickManyLanes(ctx, sqlitedb.ExecutionPickManyLanesParams{Namespace: "n", InstanceID: "i", Capabilities: `["gpu"]`, Limit: 4})
			return err
		},
		"ExecutionStart": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionStart(ctx, sqlitedb.ExecutionStartParams{LeaseID: id.String(), Holder: "i", Now: 1, ExpiresAtMs: 2, ID: id})
			return err
		},
		"ExecutionNextRunAtOneLane": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionNextRunAtOneLane(ctx, sqlitedb.ExecutionNextRunAtOneLaneParams{Namespace: "n", Lane: "l", Now: 5})
			return err
		},
		"ExecutionNextRunAtManyLanes": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionNextRunAtManyLanes(ctx, sqlitedb.ExecutionNextRunAtManyLanesParams{Namespace: "n", InstanceID: "i", Now: 5})
			return err
		},
		"LeaseRenew": func(q *sqlitedb.Queries) error {
			_, err := q.LeaseRenew(ctx, sqlitedb.LeaseRenewParams{ExpiresAtMs: 2, ID: id, Epoch: 1, Now: 1})
			return err
		},
		"ExecutionStartMany": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionStartMany(ctx, sqlitedb.ExecutionStartManyParams{Leases: `{"` + id.String() + `":"` + id.String() + `"}`, Holder: "i", Now: 1, ExpiresAtMs: 2})
			return err
		},
		"LeaseCompleteBatch": func(q *sqlitedb.Queries) error {
			_, err := q.LeaseCompleteBatch(ctx, sqlitedb.LeaseCompleteBatchParams{Now: 1, Leases: `[["` + id.String() + `",1,"` + id.String() + `"]]`, Results: "{}"})
			return err
		},
		"LeaseComplete": func(q *sqlitedb.Queries) error {
			_, err := q.LeaseComplete(ctx, sqlitedb.LeaseCompleteParams{Result: []byte("x"), Now: 1, ID: id, Epoch: 1})
			return err
		},
		"LeaseFail": func(q *sqlitedb.Queries) error {
			_, err := q.LeaseFail(ctx, sqlitedb.LeaseFailParams{Now: 1, LastError: "x", ID: id, Epoch: 1})
			return err
		},
		"LeaseRelease": func(q *sqlitedb.Queries) error {
			_, err := q.LeaseRelease(ctx, sqlitedb.LeaseReleaseParams{Now: 1, ID: id, Epoch: 1})
			return err
		},
		"LeaseSnooze": func(q *sqlitedb.Queries) error {
			_, err := q.LeaseSnooze(ctx, sqlitedb.LeaseSnoozeParams{RunAt: 9, Now: 1, ID: id, Epoch: 1})
			return err
		},
		"AttemptList": func(q *sqlitedb.Queries) error {
			_, err := q.AttemptList(ctx, id)
			return err
		},
		"AttemptInsert": func(q *sqlitedb.Queries) error {
			return q.AttemptInsert(ctx, sqlitedb.AttemptInsertParams{ExecutionID: id, Epoch: 1, AttemptIndex: 1, LeaseID: id, Namespace: "n", InstanceID: "i", State: "completed"})
		},
		"AttemptInsertCancelled": func(q *sqlitedb.Queries) error {
			return q.AttemptInsertCancelled(ctx, sqlitedb.AttemptInsertCancelledParams{Now: 1, ID: id})
		},
		"LeaseGetOutcome": func(q *sqlitedb.Queries) error {
			_, err := q.LeaseGetOutcome(ctx, sqlitedb.LeaseGetOutcomeParams{ID: id, LeaseID: id.String(), Epoch: 1})
			return err
		},
		"LeaseFindHeld": func(q *sqlitedb.Queries) error {
			_, err := q.LeaseFindHeld(ctx, sqlitedb.LeaseFindHeldParams{Namespace: "n", Holder: "i", LeaseIds: `["` + id.String() + `"]`})
			return err
		},
		"LeaseHolderExpiry": func(q *sqlitedb.Queries) error {
			_, err := q.LeaseHolderExpiry(ctx, sqlitedb.LeaseHolderExpiryParams{ID: id, LeaseID: id.String(), Epoch: 1, Now: 5})
			return err
		},
		"LeaseRevokeLapsedBound": func(q *sqlitedb.Queries) error {
			_, err := q.LeaseRevokeLapsedBound(ctx, sqlitedb.LeaseRevokeLapsedBoundParams{Now: 5, BatchSize: 100})
			return err
		},
		"LeaseRevokeBoundOfLapsed": func(q *sqlitedb.Queries) error {
			return q.LeaseRevokeBoundOfLapsed(ctx, sqlitedb.LeaseRevokeBoundOfLapsedParams{Namespace: "n", InstanceID: "i", Now: 5})
		},
		"LeaseRevokeHeldBy": func(q *sqlitedb.Queries) error {
			return q.LeaseRevokeHeldBy(ctx, sqlitedb.LeaseRevokeHeldByParams{Now: 1, Holders: `[["n","i"]]`})
		},
		"LeaseListExpired": func(q *sqlitedb.Queries) error {
			_, err := q.LeaseListExpired(ctx, sqlitedb.LeaseListExpiredParams{AsOf: 5, AfterExpiresAtMs: 1, AfterID: id.String(), Limit: 10})
			return err
		},
		"LeaseListExpired namespace": func(q *sqlitedb.Queries) error {
			_, err := q.LeaseListExpired(ctx, sqlitedb.LeaseListExpiredParams{Namespace: "n", AsOf: 5, AfterExpiresAtMs: 1, AfterID: id.String(), Limit: 10})
			return err
		},
		"LeaseReclaimBatch": func(q *sqlitedb.Queries) error {
			_, err := q.LeaseReclaimBatch(ctx, sqlitedb.LeaseReclaimBatchParams{Now: 1, BatchSize: 10})
			return err
		},
		"ExecutionGetState": func(q *sqlitedb.Queries) error { _, err := q.ExecutionGetState(ctx, id); return err },
		"ExecutionCancel": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionCancel(ctx, sqlitedb.ExecutionCancelParams{Reason: "r", Now: 1, ID: id})
			return err
		},
		"ExecutionPruneBatch": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionPruneBatch(ctx, sqlitedb.ExecutionPruneBatchParams{Before: 1, BatchSize: 10})
			return err
		},
		"ExecutionFinishedPerMinute": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionFinishedPerMinute(ctx, 1)
			return err
		},
		"ExecutionList": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionList(ctx, sqlitedb.ExecutionListParams{AfterID: id, Limit: 10})
			return err
		},
		"ExecutionListByNamespace": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionListByNamespace(ctx, sqlitedb.ExecutionListByNamespaceParams{Namespace: "ns1", AfterID: id, Limit: 10})
			return err
		},
		"ExecutionListByNamespace lane state": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionListByNamespace(ctx, sqlitedb.ExecutionListByNamespaceParams{Namespace: "ns1", Lane: "l", State: "waiting", AfterID: id, Limit: 10})
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
		"ExecutionListRunning": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionListRunning(ctx, sqlitedb.ExecutionListRunningParams{Lane: "l", AfterID: id, Limit: 10})
			return err
		},
		"ExecutionListByState lane": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionListByState(ctx, sqlitedb.ExecutionListByStateParams{State: "waiting", Lane: "l", AfterID: id, Limit: 10})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			switch {
			case liveOnly[name]:
				assertLiveRowsOnly(t, e, call)
			case strings.HasPrefix(name, "LeaseListExpired"):
				assertMergedExpiry(t, e, call)
			default:
				assertIndexed(t, e, call)
			}
		})
	}
}

// liveOnly names the statements that read running executions by holder or
// all of them (a dead worker's leases, the running list): they walk a
// partial index of running executions, which holds live rows only.
var liveOnly = map[string]bool{"LeaseRevokeHeldBy": true, "LeaseFindHeld": true, "ExecutionListRunning": true}

// assertMergedExpiry checks the plan of the expired-lease list: a merge of
// the leases expired by their own expiry, in the order of executions_expiry,
// and the bound leases of lapsed holders, found through the lapsed workers
// (workers_expiry) and executions_holder and sorted among themselves only
// (they are expired: never the running work); no step scans a table.
func assertMergedExpiry(t *testing.T, e *Engine, call func(q *sqlitedb.Queries) error) {
	t.Helper()
	rec := &planRecorder{conn: e.writer}
	_ = call(sqlitedb.New(rec))
	for _, plan := range rec.plans {
		for _, want := range []string{"MERGE (UNION ALL)", "SEARCH e USING INDEX executions_expiry (expires_at_ms>? AND expires_at_ms<?)",
			"SEARCH w USING COVERING INDEX workers_expiry (<expr><?)", "SEARCH e USING INDEX executions_holder (namespace=? AND holder=?)"} {
			if !strings.Contains(plan, want) {
				t.Fatalf("the plan lacks %q:\n%s", want, plan)
			}
		}
		right := strings.Index(plan, "\nRIGHT\n")
		if right < 0 {
			t.Fatalf("no right branch:\n%s", plan)
		}
		if line := planScans(plan[:right], false); line != "" {
			t.Fatalf("the own-expiry branch is not index-backed (%q):\n%s", line, plan)
		}
		if line := planScans(strings.Replace(plan[right:], "USE TEMP B-TREE FOR ORDER BY", "", 1), false); line != "" {
			t.Fatalf("the lapsed-holder branch is not index-backed (%q):\n%s", line, plan)
		}
	}
}

// assertLiveRowsOnly fails unless every table step of call's statements
// reads a partial index of live executions (a sort of those rows is fine).
func assertLiveRowsOnly(t *testing.T, e *Engine, call func(q *sqlitedb.Queries) error) {
	t.Helper()
	rec := &planRecorder{conn: e.writer}
	_ = call(sqlitedb.New(rec))
	for _, plan := range rec.plans {
		for _, line := range strings.Split(plan, "\n") {
			if !strings.HasPrefix(line, "SCAN ") && !strings.HasPrefix(line, "SEARCH ") || strings.Contains(line, "VIRTUAL TABLE") {
				continue
			}
			if !strings.Contains(line, "INDEX executions_expiry") && !strings.Contains(line, "INDEX executions_holder") {
				t.Fatalf("a step may read finished history: %q\n%s", line, plan)
			}
		}
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
		"AgentSetHolder": func(q *sqlitedb.Queries) error {
			_, err := q.AgentSetHolder(ctx, sqlitedb.AgentSetHolderParams{ID: "a", HolderNamespace: nullString("n"), HolderInstanceID: nullString("i")})
			return err
		},
		"AgentTerminateLiveOnHost": func(q *sqlitedb.Queries) error {
			_, err := q.AgentTerminateLiveOnHost(ctx, sqlitedb.AgentTerminateLiveOnHostParams{AtMs: 1, Host: nullString("h")})
			return err
		},
		"AgentListLiveOnHost": func(q *sqlitedb.Queries) error {
			_, err := q.AgentListLiveOnHost(ctx, sqlitedb.AgentListLiveOnHostParams{Host: nullString("h"), State: "running",
				HolderNamespace: "n", HolderInstanceID: nullString("i"), Limit: 10})
			return err
		},
	} {
		// The host-restart scan walks the partial index of live agents only.
		t.Run(name, func(t *testing.T) { assertIndexed(t, e, call, name == "AgentTerminateLive") })
	}
}

// The end of a registration finds the live agents it holds by a seek of the
// index of live agents by holder, one per registration of the batch, as does
// a list of one holder's live agents (which sorts only that holder's live
// agents by id): neither reads another agent.
func TestAgentHolderQueriesSeekTheLiveHolderIndex(t *testing.T) {
	e := openMemory(t)
	ctx := context.Background()
	for name, call := range map[string]func(q *sqlitedb.Queries) error{
		"AgentAbandonHeldBy": func(q *sqlitedb.Queries) error {
			_, err := q.AgentAbandonHeldBy(ctx, sqlitedb.AgentAbandonHeldByParams{AtMs: 1, Holders: `[["n","i"],["n","j"]]`})
			return err
		},
		"AgentListLiveByHolder": func(q *sqlitedb.Queries) error {
			_, err := q.AgentListLiveByHolder(ctx, sqlitedb.AgentListLiveByHolderParams{
				HolderNamespace: nullString("n"), HolderInstanceID: nullString("i"), State: "running", Limit: 10})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			rec := &planRecorder{conn: e.writer}
			_ = call(sqlitedb.New(rec))
			if len(rec.plans) != 1 {
				t.Fatalf("%d statements, want 1", len(rec.plans))
			}
			plan := rec.plans[0]
			if !strings.Contains(plan, "SEARCH agents USING INDEX agents_live_holder (holder_namespace=? AND holder_instance_id=?)") {
				t.Fatalf("the live holder index is not sought:\n%s", plan)
			}
			for _, line := range strings.Split(plan, "\n") {
				line = strings.TrimSpace(line)
				if strings.HasPrefix(line, "SCAN ") && !strings.Contains(line, "VIRTUAL TABLE") {
					t.Fatalf("a step reads a whole table (%q):\n%s", line, plan)
				}
			}
		})
	}
}

// Stats reads live rows only: executions through the partial indexes of
// ready, scheduled and running ones (or a seek of the state index), expired
// leases through a partial index of running executions. Workers are all live: their scan is the live
// rows.
func TestStatsReadsLiveRowsOnly(t *testing.T) {
	e := openMemory(t)
	ctx := context.Background()
	for name, tc := range map[string]struct {
		call    func(q *sqlitedb.Queries) error
		allowed []string // plan steps that read only live rows
	}{
		"StatsLanes": {func(q *sqlitedb.Queries) error { _, err := q.StatsLanes(ctx, 5); return err },
			[]string{"INDEX executions_ready", "INDEX executions_scheduled", "INDEX executions_expiry", "INDEX executions_state (state=?)"}},
		"StatsExpiredLeases": {func(q *sqlitedb.Queries) error { _, err := q.StatsExpiredLeases(ctx, 5); return err },
			[]string{"INDEX executions_expiry", "INDEX workers_expiry (<expr><?)", "INDEX executions_holder (namespace=? AND holder=?)"}},
		"StatsAgents": {func(q *sqlitedb.Queries) error { _, err := q.StatsAgents(ctx); return err },
			[]string{"agent_state_counts"}},
		// The registry and its lanes' rows: live, as the workers are.
		"StatsLaneWorkers": {func(q *sqlitedb.Queries) error { _, err := q.StatsLaneWorkers(ctx, 5); return err },
			[]string{"SCAN w", "SEARCH w", "SCAN wl", "SEARCH wl"}},
	} {
		t.Run(name, func(t *testing.T) {
			rec := &planRecorder{conn: e.writer}
			_ = tc.call(sqlitedb.New(rec))
			for _, line := range strings.Split(rec.plans[0], "\n") {
				if !strings.HasPrefix(line, "SCAN ") && !strings.HasPrefix(line, "SEARCH ") || line == "SCAN l" || line == "SCAN x" {
					continue // temp b-trees of GROUP BY over the live rows, the scan of their union
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

func TestFleetQueriesUseIndexes(t *testing.T) {
	e := openMemory(t)
	ctx := context.Background()
	id := uuid.New()
	for name, call := range map[string]func(q *sqlitedb.Queries) error{
		"ExecutionInsertUnique": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionInsertUnique(ctx, sqlitedb.ExecutionInsertUniqueParams{ID: id, Namespace: "n", Lane: "l", Payload: []byte{},
				RequiredCapabilities: "[]", MaxAttempts: 1, Ready: true, UniqueKey: sql.NullString{String: "k", Valid: true}})
			return err
		},
		"ExecutionFindLiveByKey": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionFindLiveByKey(ctx, sqlitedb.ExecutionFindLiveByKeyParams{Namespace: "n", UniqueKey: sql.NullString{String: "k", Valid: true}})
			return err
		},
		"ExecutionKeyGet": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionKeyGet(ctx, sqlitedb.ExecutionKeyGetParams{Namespace: "n", UniqueKey: "k", Now: 5})
			return err
		},
		"ExecutionKeyPut": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionKeyPut(ctx, sqlitedb.ExecutionKeyPutParams{Namespace: "n", UniqueKey: "k", ExecutionID: id, UntilMs: 5, Now: 5})
			return err
		},
		"ExecutionKeyPruneBatch": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionKeyPruneBatch(ctx, sqlitedb.ExecutionKeyPruneBatchParams{Before: 5, BatchSize: 10})
			return err
		},
		"ExecutionRetry": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionRetry(ctx, sqlitedb.ExecutionRetryParams{RunAt: 5, Ready: 1, ID: id})
			return err
		},
		"LeaderTake": func(q *sqlitedb.Queries) error {
			_, err := q.LeaderTake(ctx, sqlitedb.LeaderTakeParams{Holder: "h", Epoch: 1, Now: 5, ExpiresAtMs: 9, Name: "maintenance"})
			return err
		},
		"LeaderInsert": func(q *sqlitedb.Queries) error {
			_, err := q.LeaderInsert(ctx, sqlitedb.LeaderInsertParams{Name: "maintenance", Holder: "h", ExpiresAtMs: 9})
			return err
		},
		"LeaderResign": func(q *sqlitedb.Queries) error {
			return q.LeaderResign(ctx, sqlitedb.LeaderResignParams{Now: 5, Name: "maintenance", Holder: "h", Epoch: 1})
		},
		"LeaderGet": func(q *sqlitedb.Queries) error { _, err := q.LeaderGet(ctx, "maintenance"); return err },
		"SchedulePut": func(q *sqlitedb.Queries) error {
			return q.SchedulePut(ctx, sqlitedb.SchedulePutParams{Namespace: "n", Name: "s", EveryMs: sql.NullInt64{Int64: 1000, Valid: true},
				Lane: "l", RequiredCapabilities: "[]", NextRunAtMs: 5, Payload: []byte{}})
		},
		"ScheduleDelete": func(q *sqlitedb.Queries) error {
			_, err := q.ScheduleDelete(ctx, sqlitedb.ScheduleDeleteParams{Namespace: "n", Name: "s"})
			return err
		},
		"ScheduleList": func(q *sqlitedb.Queries) error { _, err := q.ScheduleList(ctx, "n"); return err },
		"ScheduleListDue": func(q *sqlitedb.Queries) error {
			_, err := q.ScheduleListDue(ctx, sqlitedb.ScheduleListDueParams{Now: 5, AfterMs: 2, AfterNamespace: "ns1", AfterName: "s1", MaxRows: 10})
			return err
		},
		"LeaderHolds": func(q *sqlitedb.Queries) error {
			_, err := q.LeaderHolds(ctx, sqlitedb.LeaderHoldsParams{Name: "maintenance", Holder: "h", Epoch: 1})
			return err
		},
		"ExecutionListNewest": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionListNewest(ctx, sqlitedb.ExecutionListNewestParams{BeforeID: id, Limit: 10})
			return err
		},
		"ExecutionListByNamespaceNewest": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionListByNamespaceNewest(ctx, sqlitedb.ExecutionListByNamespaceNewestParams{Namespace: "n", BeforeID: id, Lane: "l", State: "failed", Limit: 10})
			return err
		},
		"ExecutionListByStateNewest": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionListByStateNewest(ctx, sqlitedb.ExecutionListByStateNewestParams{State: "failed", BeforeID: id, Limit: 10})
			return err
		},
		"ExecutionListByLaneNewest": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionListByLaneNewest(ctx, sqlitedb.ExecutionListByLaneNewestParams{Lane: "l", BeforeID: id, Limit: 10})
			return err
		},
		"ExecutionListRunningNewest": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionListRunningNewest(ctx, sqlitedb.ExecutionListRunningNewestParams{BeforeID: id, Limit: 10})
			return err
		},
		"ExecutionListByUniqueKey": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionListByUniqueKey(ctx, sqlitedb.ExecutionListByUniqueKeyParams{Namespace: "n", UniqueKey: "k", AfterID: id, Lane: "l", State: "failed", Limit: 10})
			return err
		},
		"ExecutionListByUniqueKeyNewest": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionListByUniqueKeyNewest(ctx, sqlitedb.ExecutionListByUniqueKeyNewestParams{Namespace: "n", UniqueKey: "k", BeforeID: id, Limit: 10})
			return err
		},
		"ExecutionListByGroup": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionListByGroup(ctx, sqlitedb.ExecutionListByGroupParams{Namespace: "n", GroupKey: "g", AfterID: id, Lane: "l", State: "failed", Limit: 10})
			return err
		},
		"ExecutionListByGroupNewest": func(q *sqlitedb.Queries) error {
			_, err := q.ExecutionListByGroupNewest(ctx, sqlitedb.ExecutionListByGroupNewestParams{Namespace: "n", GroupKey: "g", BeforeID: id, Limit: 10})
			return err
		},
		"ScheduleAdvance": func(q *sqlitedb.Queries) error {
			_, err := q.ScheduleAdvance(ctx, sqlitedb.ScheduleAdvanceParams{NextRunAtMs: 9, Namespace: "n", Name: "s", FromMs: 5})
			return err
		},
	} {
		// Listing every namespace's schedules walks the table in key order:
		// schedules are few, and the page is all of them.
		t.Run(name, func(t *testing.T) {
			if name == "ExecutionListRunningNewest" {
				assertLiveRowsOnly(t, e, call)
				return
			}
			assertIndexed(t, e, call, name == "ScheduleList")
		})
	}
}
