package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	pgdb "github.com/rosterdb/roster/db/postgres"
	"github.com/rosterdb/roster/internal/engine"
	"github.com/rosterdb/roster/internal/engine/enginetest"
	"github.com/rosterdb/roster/internal/pgserver"
	"github.com/rosterdb/roster/internal/pgtest"
)

func testConfig() engine.Config {
	return engine.Config{
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		SyncFull:  true,
		Admission: time.Second,
		Migrate:   true,
	}
}

func openAt(t testing.TB, u string, edit ...func(*engine.Config)) *Engine {
	t.Helper()
	cfg := testConfig()
	for _, f := range edit {
		f(&cfg)
	}
	e, err := Open(context.Background(), u, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// planRecorder is a pgdb.DBTX that, instead of running a generated query,
// runs EXPLAIN on its exact text and arguments, with sequential scans
// disabled so that a plan still holding one has no index to use.
type planRecorder struct {
	tx    pgx.Tx
	plans []string
}

func (p *planRecorder) explain(ctx context.Context, query string, args ...any) {
	rows, err := p.tx.Query(ctx, "EXPLAIN "+query, args...)
	if err != nil {
		p.plans = append(p.plans, "ERROR: "+err.Error())
		return
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			p.plans = append(p.plans, "ERROR: "+err.Error())
			return
		}
		lines = append(lines, line)
	}
	if err := rows.Err(); err != nil {
		lines = append(lines, "ERROR: "+err.Error())
	}
	p.plans = append(p.plans, strings.Join(lines, "\n"))
}

func (p *planRecorder) Exec(ctx context.Context, query string, args ...any) (pgconn.CommandTag, error) {
	p.explain(ctx, query, args...)
	return pgconn.CommandTag{}, nil
}

func (p *planRecorder) Query(ctx context.Context, query string, args ...any) (pgx.Rows, error) {
	p.explain(ctx, query, args...)
	return p.tx.Query(ctx, "SELECT 1 WHERE false")
}

func (p *planRecorder) QueryRow(ctx context.Context, query string, args ...any) pgx.Row {
	p.explain(ctx, query, args...)
	return p.tx.QueryRow(ctx, "SELECT 1 WHERE false")
}

// seed fills the tables with enough rows that a plan means something.
func seed(t *testing.T, e *Engine) {
	t.Helper()
	ctx := context.Background()
	_, err := e.pool.Exec(ctx, `
		INSERT INTO workers SELECT 'ns' || (i % 10), 'i' || i, 'w', '{default}', '{}', i, 60000, i FROM generate_series(1, 20000) AS i;
		INSERT INTO worker_events (namespace, instance_id, kind, at_ms) SELECT 'ns' || (i % 10), 'i' || (i % 500), 'heartbeat', i FROM generate_series(1, 20000) AS i;
		-- Executions: k 0 ready, 1 scheduled, 2 running, else completed.
		INSERT INTO executions (id, namespace, lane, state, priority, payload, max_attempts, created_at_ms, run_at_ms, ready,
		                        attempts, epoch, lease_id, holder, claimed_at_ms, expires_at_ms, finished_at_ms)
			SELECT gen_random_uuid(), 'ns' || (i % 10), 'lane' || (i % 5),
			       CASE WHEN k < 2 THEN 'waiting' WHEN k = 2 THEN 'running' ELSE 'completed' END, i % 7, '', 1, i,
			       CASE WHEN k = 1 THEN i + 1000000 ELSE i END, k <> 1,
			       CASE WHEN k < 2 THEN 0 ELSE 1 END, CASE WHEN k < 2 THEN 0 ELSE 1 END,
			       CASE WHEN k >= 2 THEN gen_random_uuid() END, CASE WHEN k >= 2 THEN 'i' || (i % 500) END,
			       CASE WHEN k >= 2 THEN i END, CASE WHEN k >= 2 THEN i + 60000 END, CASE WHEN k > 2 THEN i + 10 END
			FROM (SELECT i, i % 10 AS k FROM generate_series(1, 20000) AS i) AS g;
		INSERT INTO agents (id, state, terminal_reason, provider, owner_actor, owner_peer_class, owner_write_namespace, spawn_fingerprint, spawned_at_ms, state_changed_at_ms, host)
			SELECT 'a' || i, CASE WHEN i % 4 = 0 THEN 'running' ELSE 'terminal' END, CASE WHEN i % 4 = 0 THEN NULL ELSE 'completed' END,
			       'p', 'o' || (i % 50), 'c', 'ns' || (i % 10), 'f', i, i, 'h' || (i % 20)
			FROM generate_series(1, 20000) AS i;
		ANALYZE;`)
	must(t, err)
}

// plansOf returns the plan of every statement call issues, with sequential
// scans disabled.
func plansOf(t *testing.T, e *Engine, call func(q *pgdb.Queries) error) []string {
	t.Helper()
	ctx := context.Background()
	tx, err := e.pool.Begin(ctx)
	must(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, "SET LOCAL enable_seqscan = off")
	must(t, err)
	rec := &planRecorder{tx: tx}
	_ = call(pgdb.New(rec))
	if len(rec.plans) == 0 {
		t.Fatal("the call issued no query")
	}
	return rec.plans
}

// assertIndexed fails unless every statement call issues is planned on
// indexes: no sequential scan of a table (json and unnest functions are not
// tables).
func assertIndexed(t *testing.T, e *Engine, call func(q *pgdb.Queries) error) {
	t.Helper()
	for _, plan := range plansOf(t, e, call) {
		if strings.Contains(plan, "ERROR: ") {
			t.Fatalf("EXPLAIN failed: %s", plan)
		}
		if strings.Contains(plan, "Seq Scan") {
			t.Fatalf("query is not index-backed:\n%s", plan)
		}
	}
}

func TestQueriesUseIndexes(t *testing.T) {
	e := openAt(t, pgtest.Fresh(t))
	seed(t, e)
	ctx := context.Background()
	id := uuid.New()
	for name, call := range map[string]func(q *pgdb.Queries) error{
		"WorkerGet": func(q *pgdb.Queries) error {
			_, err := q.WorkerGet(ctx, pgdb.WorkerGetParams{Namespace: "ns1", InstanceID: "i1"})
			return err
		},
		"WorkerGetAlive": func(q *pgdb.Queries) error {
			_, err := q.WorkerGetAlive(ctx, pgdb.WorkerGetAliveParams{Namespace: "ns1", InstanceID: "i1", Now: 5})
			return err
		},
		"WorkerRefresh": func(q *pgdb.Queries) error {
			_, err := q.WorkerRefresh(ctx, pgdb.WorkerRefreshParams{Lanes: []string{}, Capabilities: []string{}, Now: 5, TtlMs: 5, Namespace: "ns1", InstanceID: "i1", WorkerID: "w"})
			return err
		},
		"WorkerHeartbeat": func(q *pgdb.Queries) error {
			_, err := q.WorkerHeartbeat(ctx, pgdb.WorkerHeartbeatParams{Now: 5, Namespace: "ns1", InstanceID: "i1"})
			return err
		},
		"WorkerDelete": func(q *pgdb.Queries) error {
			_, err := q.WorkerDelete(ctx, pgdb.WorkerDeleteParams{Namespace: "ns1", InstanceID: "i1"})
			return err
		},
		"WorkerListByNamespace": func(q *pgdb.Queries) error {
			_, err := q.WorkerListByNamespace(ctx, pgdb.WorkerListByNamespaceParams{Namespace: "ns1", AfterInstanceID: "i5", MaxRows: 100})
			return err
		},
		"WorkerListAll": func(q *pgdb.Queries) error {
			_, err := q.WorkerListAll(ctx, pgdb.WorkerListAllParams{AfterNamespace: "ns1", AfterInstanceID: "i5", MaxRows: 100})
			return err
		},
		"WorkerSweepBatch": func(q *pgdb.Queries) error {
			_, err := q.WorkerSweepBatch(ctx, pgdb.WorkerSweepBatchParams{Now: 100, BatchSize: 256})
			return err
		},
		"WorkerEventList": func(q *pgdb.Queries) error {
			_, err := q.WorkerEventList(ctx, pgdb.WorkerEventListParams{AfterSeq: 100, MaxRows: 100})
			return err
		},
		"WorkerEventListByNamespace": func(q *pgdb.Queries) error {
			_, err := q.WorkerEventListByNamespace(ctx, pgdb.WorkerEventListByNamespaceParams{Namespace: "ns1", AfterSeq: 100, MaxRows: 100})
			return err
		},
		"WorkerEventListByInstance": func(q *pgdb.Queries) error {
			_, err := q.WorkerEventListByInstance(ctx, pgdb.WorkerEventListByInstanceParams{InstanceID: "i1", Namespace: "ns1", AfterSeq: 100, MaxRows: 100})
			return err
		},
		"WorkerEventListLatest": func(q *pgdb.Queries) error { _, err := q.WorkerEventListLatest(ctx, 20); return err },
		"WorkerEventListLatestByNamespace": func(q *pgdb.Queries) error {
			_, err := q.WorkerEventListLatestByNamespace(ctx, pgdb.WorkerEventListLatestByNamespaceParams{Namespace: "ns1", MaxRows: 20})
			return err
		},
		"WorkerEventPruneBatch": func(q *pgdb.Queries) error {
			_, err := q.WorkerEventPruneBatch(ctx, pgdb.WorkerEventPruneBatchParams{BeforeMs: 100, BatchSize: 256})
			return err
		},
		"ExecutionInsert": func(q *pgdb.Queries) error {
			return q.ExecutionInsert(ctx, pgdb.ExecutionInsertParams{ID: id, Namespace: "ns1", Lane: "lane1", Payload: []byte{}, RequiredCapabilities: []string{}, MaxAttempts: 1})
		},
		"ExecutionInsertMany": func(q *pgdb.Queries) error {
			return q.ExecutionInsertMany(ctx, pgdb.ExecutionInsertManyParams{
				Ids: []uuid.UUID{id}, Namespaces: []string{"ns1"}, Lanes: []string{"lane1"}, Priorities: []int64{0},
				Payloads: [][]byte{{}}, Capabilities: []string{""}, MaxAttempts: []int64{1}, RunAtMs: []int64{1},
				RetryBackoffMs: []int64{0}, Ready: []bool{true}, CreatedAtMs: []int64{1},
			})
		},
		"ExecutionGet": func(q *pgdb.Queries) error { _, err := q.ExecutionGet(ctx, id); return err },
		"ExecutionClaim": func(q *pgdb.Queries) error {
			_, err := q.ExecutionClaim(ctx, pgdb.ExecutionClaimParams{Namespace: "ns1", InstanceID: "i1", Now: 5, LeaseIds: []uuid.UUID{uuid.New(), uuid.New()}, ExpiresAtMs: 9, Promote: true})
			return err
		},
		"LeaseRenew": func(q *pgdb.Queries) error {
			_, err := q.LeaseRenew(ctx, pgdb.LeaseRenewParams{ExpiresAtMs: 9, ID: id, Epoch: 1, Now: 5})
			return err
		},
		"LeaseComplete": func(q *pgdb.Queries) error {
			_, err := q.LeaseComplete(ctx, pgdb.LeaseCompleteParams{Result: []byte("x"), Now: 5, ID: id, Epoch: 1})
			return err
		},
		"LeaseCompleteMany": func(q *pgdb.Queries) error {
			_, err := q.LeaseCompleteMany(ctx, pgdb.LeaseCompleteManyParams{Ids: []uuid.UUID{id, uuid.New()}, Epochs: []int64{1, 2}, Results: [][]byte{nil, []byte("x")}, Now: 5})
			return err
		},
		"LeaseFail": func(q *pgdb.Queries) error {
			_, err := q.LeaseFail(ctx, pgdb.LeaseFailParams{LastError: "x", Now: 5, ID: id, Epoch: 1})
			return err
		},
		"LeaseRelease": func(q *pgdb.Queries) error {
			_, err := q.LeaseRelease(ctx, pgdb.LeaseReleaseParams{ID: id, Epoch: 1, Now: 5})
			return err
		},
		"LeaseSnooze": func(q *pgdb.Queries) error {
			_, err := q.LeaseSnooze(ctx, pgdb.LeaseSnoozeParams{RunAt: 9, ID: id, Epoch: 1, Now: 5})
			return err
		},
		"AttemptList": func(q *pgdb.Queries) error {
			_, err := q.AttemptList(ctx, id)
			return err
		},
		"LeaseGetOutcome": func(q *pgdb.Queries) error {
			_, err := q.LeaseGetOutcome(ctx, pgdb.LeaseGetOutcomeParams{ID: id, LeaseID: id, Epoch: 1})
			return err
		},
		"LeaseFindHeld": func(q *pgdb.Queries) error {
			_, err := q.LeaseFindHeld(ctx, pgdb.LeaseFindHeldParams{Namespace: "ns1", Holder: "i1", LeaseIds: []uuid.UUID{id}})
			return err
		},
		"LeaseHolderExpiry": func(q *pgdb.Queries) error {
			_, err := q.LeaseHolderExpiry(ctx, pgdb.LeaseHolderExpiryParams{ID: id, LeaseID: id, Epoch: 1, Now: 5})
			return err
		},
		"LeaseRevokeLapsedBound": func(q *pgdb.Queries) error {
			_, err := q.LeaseRevokeLapsedBound(ctx, pgdb.LeaseRevokeLapsedBoundParams{Now: 5, BatchSize: 100})
			return err
		},
		"LeaseRevokeBoundOfLapsed": func(q *pgdb.Queries) error {
			return q.LeaseRevokeBoundOfLapsed(ctx, pgdb.LeaseRevokeBoundOfLapsedParams{Namespace: "ns1", InstanceID: "i1", Now: 5})
		},
		"WorkerNextRunAt": func(q *pgdb.Queries) error {
			_, err := q.WorkerNextRunAt(ctx, pgdb.WorkerNextRunAtParams{Namespace: "ns1", InstanceID: "i1", Now: 5})
			return err
		},
		"WorkerHeartbeat logged": func(q *pgdb.Queries) error {
			_, err := q.WorkerHeartbeat(ctx, pgdb.WorkerHeartbeatParams{Now: 5, Namespace: "ns1", InstanceID: "i1", LogEvent: true})
			return err
		},
		"LeaseRevokeHeldBy": func(q *pgdb.Queries) error {
			return q.LeaseRevokeHeldBy(ctx, pgdb.LeaseRevokeHeldByParams{Now: 5, Namespaces: []string{"ns1"}, Holders: []string{"i1"}})
		},
		"LeaseListExpired": func(q *pgdb.Queries) error {
			_, err := q.LeaseListExpired(ctx, pgdb.LeaseListExpiredParams{AsOf: 5, AfterExpiresAtMs: 1, AfterID: id, MaxRows: 100})
			return err
		},
		"LeaseListExpired namespace": func(q *pgdb.Queries) error {
			_, err := q.LeaseListExpired(ctx, pgdb.LeaseListExpiredParams{Namespace: "ns1", AsOf: 5, AfterExpiresAtMs: 1, AfterID: id, MaxRows: 100})
			return err
		},
		"LeaseReclaimBatch": func(q *pgdb.Queries) error {
			_, err := q.LeaseReclaimBatch(ctx, pgdb.LeaseReclaimBatchParams{Now: 5, BatchSize: 256})
			return err
		},
		"ExecutionGetState": func(q *pgdb.Queries) error { _, err := q.ExecutionGetState(ctx, id); return err },
		"ExecutionCancel": func(q *pgdb.Queries) error {
			_, err := q.ExecutionCancel(ctx, pgdb.ExecutionCancelParams{Reason: "r", ID: id, Now: 5})
			return err
		},
		"ExecutionPruneBatch": func(q *pgdb.Queries) error {
			_, err := q.ExecutionPruneBatch(ctx, pgdb.ExecutionPruneBatchParams{Before: 100, BatchSize: 256})
			return err
		},
		"ExecutionFinishedPerMinute": func(q *pgdb.Queries) error {
			_, err := q.ExecutionFinishedPerMinute(ctx, 100)
			return err
		},
		"ExecutionList": func(q *pgdb.Queries) error {
			_, err := q.ExecutionList(ctx, pgdb.ExecutionListParams{AfterID: id, MaxRows: 100})
			return err
		},
		"ExecutionListByNamespace": func(q *pgdb.Queries) error {
			_, err := q.ExecutionListByNamespace(ctx, pgdb.ExecutionListByNamespaceParams{Namespace: "ns1", AfterID: id, MaxRows: 100})
			return err
		},
		"ExecutionListByNamespace lane state": func(q *pgdb.Queries) error {
			_, err := q.ExecutionListByNamespace(ctx, pgdb.ExecutionListByNamespaceParams{Namespace: "ns1", Lane: "lane1", State: "waiting", AfterID: id, MaxRows: 100})
			return err
		},
		"ExecutionListByLane": func(q *pgdb.Queries) error {
			_, err := q.ExecutionListByLane(ctx, pgdb.ExecutionListByLaneParams{Lane: "lane1", AfterID: id, MaxRows: 100})
			return err
		},
		"ExecutionListByState": func(q *pgdb.Queries) error {
			_, err := q.ExecutionListByState(ctx, pgdb.ExecutionListByStateParams{State: "waiting", AfterID: id, MaxRows: 100})
			return err
		},
		"ExecutionListRunning": func(q *pgdb.Queries) error {
			_, err := q.ExecutionListRunning(ctx, pgdb.ExecutionListRunningParams{Lane: "lane1", AfterID: id, MaxRows: 100})
			return err
		},
		"ExecutionListByState lane": func(q *pgdb.Queries) error {
			_, err := q.ExecutionListByState(ctx, pgdb.ExecutionListByStateParams{State: "waiting", Lane: "lane1", AfterID: id, MaxRows: 100})
			return err
		},
		"StatsLanes":         func(q *pgdb.Queries) error { _, err := q.StatsLanes(ctx, 5); return err },
		"StatsExpiredLeases": func(q *pgdb.Queries) error { _, err := q.StatsExpiredLeases(ctx, 5); return err },

		"AgentGet": func(q *pgdb.Queries) error { _, err := q.AgentGet(ctx, "a1"); return err },
		"AgentSetState": func(q *pgdb.Queries) error {
			_, err := q.AgentSetState(ctx, pgdb.AgentSetStateParams{ID: "a4", State: "suspended", FromState: "running"})
			return err
		},
		"AgentSetCheckpoint": func(q *pgdb.Queries) error {
			_, err := q.AgentSetCheckpoint(ctx, pgdb.AgentSetCheckpointParams{ID: "a4"})
			return err
		},
		"AgentFindByIdempotencyKey": func(q *pgdb.Queries) error {
			_, err := q.AgentFindByIdempotencyKey(ctx, pgdb.AgentFindByIdempotencyKeyParams{OwnerActor: "o1", IdempotencyKey: text("k")})
			return err
		},
		"AgentFindLiveByProviderSession": func(q *pgdb.Queries) error {
			_, err := q.AgentFindLiveByProviderSession(ctx, pgdb.AgentFindLiveByProviderSessionParams{Provider: "p", ProviderSessionID: text("s")})
			return err
		},
		"AgentTerminateLive": func(q *pgdb.Queries) error { _, err := q.AgentTerminateLive(ctx, 5); return err },
		"AgentTerminateLiveOnHost": func(q *pgdb.Queries) error {
			_, err := q.AgentTerminateLiveOnHost(ctx, pgdb.AgentTerminateLiveOnHostParams{AtMs: 5, Host: text("h1")})
			return err
		},
		"AgentList": func(q *pgdb.Queries) error {
			_, err := q.AgentList(ctx, pgdb.AgentListParams{AfterID: "a5", MaxRows: 100})
			return err
		},
		"AgentListByState": func(q *pgdb.Queries) error {
			_, err := q.AgentListByState(ctx, pgdb.AgentListByStateParams{State: "running", AfterID: "a5", MaxRows: 100})
			return err
		},
		"AgentListByOwner": func(q *pgdb.Queries) error {
			_, err := q.AgentListByOwner(ctx, pgdb.AgentListByOwnerParams{OwnerActor: "o1", State: "running", MaxRows: 100})
			return err
		},
		"AgentListVisibleIn": func(q *pgdb.Queries) error {
			_, err := q.AgentListVisibleIn(ctx, pgdb.AgentListVisibleInParams{Namespace: "ns1", State: "running", OwnerActor: "o1", MaxRows: 100})
			return err
		},
		"AgentSetHolder": func(q *pgdb.Queries) error {
			_, err := q.AgentSetHolder(ctx, pgdb.AgentSetHolderParams{ID: "a4", HolderNamespace: text("ns1"), HolderInstanceID: text("i1")})
			return err
		},
		"AgentListLiveOnHost": func(q *pgdb.Queries) error {
			_, err := q.AgentListLiveOnHost(ctx, pgdb.AgentListLiveOnHostParams{Host: text("h1"), State: "running",
				HolderNamespace: "ns1", HolderInstanceID: text("i1"), MaxRows: 100})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) { assertIndexed(t, e, call) })
	}
}

// The end of a registration finds the live agents it holds through the index
// of live agents by holder, as does a list of one holder's live agents: on a
// ledger of 20,000 agents, 5,000 live and held by 500 registrations, neither
// reads another agent.
func TestAgentHolderQueriesUseTheLiveHolderIndex(t *testing.T) {
	e := openAt(t, pgtest.Fresh(t))
	seed(t, e)
	ctx := context.Background()
	_, err := e.pool.Exec(ctx, `
		UPDATE agents SET holder_namespace = 'ns' || (substr(id, 2)::int % 10), holder_instance_id = 'i' || (substr(id, 2)::int % 500);
		ANALYZE agents;`)
	must(t, err)
	for name, call := range map[string]func(q *pgdb.Queries) error{
		"AgentAbandonHeldBy": func(q *pgdb.Queries) error {
			_, err := q.AgentAbandonHeldBy(ctx, pgdb.AgentAbandonHeldByParams{AtMs: 5, Namespaces: []string{"ns4", "ns8"}, InstanceIds: []string{"i4", "i8"}})
			return err
		},
		"AgentListLiveByHolder": func(q *pgdb.Queries) error {
			_, err := q.AgentListLiveByHolder(ctx, pgdb.AgentListLiveByHolderParams{
				HolderNamespace: text("ns4"), HolderInstanceID: text("i4"), State: "running", MaxRows: 100})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			plans := plansOf(t, e, call)
			if len(plans) != 1 {
				t.Fatalf("%d statements, want 1", len(plans))
			}
			if strings.Contains(plans[0], "ERROR: ") || strings.Contains(plans[0], "Seq Scan") ||
				!strings.Contains(plans[0], "agents_live_holder") {
				t.Fatalf("the live agents are not found through agents_live_holder:\n%s", plans[0])
			}
		})
	}
}

func TestAssertIndexedCatchesScans(t *testing.T) {
	e := openAt(t, pgtest.Fresh(t))
	ctx := context.Background()
	tx, err := e.pool.Begin(ctx)
	must(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, "SET LOCAL enable_seqscan = off")
	must(t, err)
	rec := &planRecorder{tx: tx}
	rec.explain(ctx, "SELECT * FROM workers WHERE worker_id = 'x'")
	rec.explain(ctx, "SELECT * FROM workers WHERE namespace = 'a' AND instance_id = 'b'")
	if !strings.Contains(rec.plans[0], "Seq Scan") || strings.Contains(rec.plans[1], "Seq Scan") {
		t.Fatalf("plans:\n%s\n--\n%s", rec.plans[0], rec.plans[1])
	}
}

func TestOverloadedWhenThePoolStaysBusy(t *testing.T) {
	u := pgtest.Fresh(t) + "&pool_max_conns=1"
	e := openAt(t, u, func(c *engine.Config) { c.Admission = 30 * time.Millisecond })
	ctx := context.Background()
	release, started := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = e.Write(ctx, func(context.Context, engine.Queries) error { close(started); <-release; return nil })
	})
	<-started
	ran := false
	err := e.Write(ctx, func(context.Context, engine.Queries) error { ran = true; return nil })
	close(release)
	wg.Wait()
	if !errors.Is(err, engine.ErrOverloaded) || ran {
		t.Fatalf("err = %v, ran = %v; want ErrOverloaded without running", err, ran)
	}
}

// The schema's own rules hold for SQL written outside roster.
func TestSchemaEnforcesInvariants(t *testing.T) {
	e := openAt(t, pgtest.Fresh(t))
	ctx := context.Background()
	insert := func(id, state, reason, session, key string) error {
		_, err := e.pool.Exec(ctx, `INSERT INTO agents (id, state, terminal_reason, provider,
			provider_session_id, owner_actor, owner_peer_class, owner_write_namespace,
			spawn_fingerprint, spawned_at_ms, state_changed_at_ms, idempotency_key)
			VALUES ($1, $2, $3, 'p', $4, 'o', 'c', 'ns', 'fp', 0, 0, $5)`,
			id, state, text(reason), text(session), text(key))
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

func TestMigrations(t *testing.T) {
	ctx := context.Background()
	u := pgtest.Fresh(t)
	// Many Opens of one new schema at once: each waits for the advisory
	// lock and finds the work of the one before.
	const n = 6
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			e, err := Open(ctx, u, testConfig())
			if err == nil {
				err = e.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Open #%d: %v", i, err)
		}
	}
	a, err := Admin(ctx, u, testConfig())
	must(t, err)
	defer a.Close()
	v, latest, err := a.Version(ctx)
	must(t, err)
	if v != latest || latest < 5 {
		t.Fatalf("version %d, latest %d", v, latest)
	}
	// Read-only and WithoutMigrate refuse an outdated schema, unchanged.
	must(t, a.Down(ctx, 1))
	for name, edit := range map[string]func(*engine.Config){
		"verify":    func(c *engine.Config) { c.Migrate = false },
		"read-only": func(c *engine.Config) { c.ReadOnly = true },
	} {
		cfg := testConfig()
		edit(&cfg)
		if _, err := Open(ctx, u, cfg); !errors.Is(err, engine.ErrSchemaOutdated) {
			t.Fatalf("%s: err = %v, want ErrSchemaOutdated", name, err)
		}
	}
	if v, _, _ := a.Version(ctx); v != latest-1 {
		t.Fatalf("refused Opens changed the version to %d", v)
	}
	// A newer schema is refused by every mode.
	must(t, a.Force(ctx, latest))
	e := openAt(t, u)
	_, err = e.pool.Exec(ctx, "UPDATE schema_migrations SET version = 999")
	must(t, err)
	for _, edit := range []func(*engine.Config){func(*engine.Config) {}, func(c *engine.Config) { c.ReadOnly = true }} {
		cfg := testConfig()
		edit(&cfg)
		if _, err := Open(ctx, u, cfg); !errors.Is(err, engine.ErrSchemaTooNew) {
			t.Fatalf("err = %v, want ErrSchemaTooNew", err)
		}
	}
	// A read-only engine never writes.
	_, err = e.pool.Exec(ctx, fmt.Sprintf("UPDATE schema_migrations SET version = %d", latest))
	must(t, err)
	r := openAt(t, u, func(c *engine.Config) { c.ReadOnly = true })
	err = r.Write(ctx, func(context.Context, engine.Queries) error { return nil })
	if !errors.Is(err, engine.ErrReadOnly) {
		t.Fatalf("write on read-only: %v", err)
	}
}

func TestFailedMigrationRollsBackWhole(t *testing.T) {
	ctx := context.Background()
	u := pgtest.Fresh(t)
	broken := map[string]string{
		"0001_ok.up.sql":       "CREATE TABLE one (x int);",
		"0001_ok.down.sql":     "DROP TABLE one;",
		"0002_broken.up.sql":   "CREATE TABLE half_done (x int); INSERT INTO no_such_table VALUES (1);",
		"0002_broken.down.sql": "DROP TABLE half_done;",
	}
	cfg := testConfig()
	cfg.Migrations = mapFS(broken)
	if _, err := Open(ctx, u, cfg); err == nil {
		t.Fatal("a failing migration succeeded")
	}
	e, err := connect(ctx, u, testConfig())
	must(t, err)
	close(e.done)
	defer e.Close()
	var tables int
	must(t, e.pool.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename IN ('one', 'half_done', 'schema_migrations')").Scan(&tables))
	if tables != 0 {
		t.Fatalf("the failed run left %d tables behind", tables)
	}
}

func TestPasswordNeverInErrors(t *testing.T) {
	const secret = "s3cr3t-Pa55"
	ctx := context.Background()
	for _, u := range []string{
		"postgres://postgres:" + secret + "@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2",
		"postgres://postgres:" + secret + "@127.0.0.1:notaport/postgres",
		"postgres://postgres:" + secret + "@127.0.0.1:5432/postgres?sslmode=disable&pool_max_conns=zero",
	} {
		_, err := Open(ctx, u, testConfig())
		if err == nil {
			t.Fatalf("Open(%s) succeeded", strings.ReplaceAll(u, secret, "…"))
		}
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("the error shows the password: %v", err)
		}
	}
}

func TestClockFollowsTheServer(t *testing.T) {
	u := pgtest.Fresh(t)
	for _, skew := range []time.Duration{-5 * time.Minute, 7 * time.Minute} {
		e := openAt(t, u, func(c *engine.Config) { c.LocalClock = func() time.Time { return time.Now().Add(skew) } })
		if d := time.Since(e.Clock()()); d < -time.Second || d > time.Second {
			t.Fatalf("skew %v: the engine's clock is %v from the server's", skew, d)
		}
	}
}

// TestClockTakesTheQuickestRoundTrip: one round trip of the measurement is
// delayed 200 ms on its way back (the local clock reads 200 ms late at its
// end, as a descheduled client or a retransmission would make it): the
// offset comes from a quick round trip, not off by half the delay.
func TestClockTakesTheQuickestRoundTrip(t *testing.T) {
	u := pgtest.Fresh(t)
	var calls atomic.Int64
	local := func() time.Time {
		// Open reads the local clock before and after each round trip: the
		// second read is the end of the first round trip.
		if calls.Add(1) == 2 {
			return time.Now().Add(200 * time.Millisecond)
		}
		return time.Now()
	}
	e := openAt(t, u, func(c *engine.Config) { c.LocalClock = local })
	if off := time.Duration(e.offset.Load()); off < -20*time.Millisecond || off > 20*time.Millisecond {
		t.Fatalf("offset %v from a server on this machine, with one round trip delayed 200 ms", off)
	}
}

func TestCheckFindsDamage(t *testing.T) {
	ctx := context.Background()
	e := openAt(t, pgtest.Fresh(t))
	problems, err := e.Check(ctx)
	must(t, err)
	if len(problems) != 0 {
		t.Fatalf("a new database has problems: %v", problems)
	}
	// A running execution whose current attempt is already recorded as
	// ended, and a recorded attempt of an epoch its execution never reached.
	_, err = e.pool.Exec(ctx, `
		INSERT INTO executions (id, namespace, lane, state, priority, payload, attempts, max_attempts, epoch, created_at_ms, run_at_ms,
			lease_id, holder, claimed_at_ms, expires_at_ms)
		VALUES ('00000000-0000-7000-8000-000000000001', 'ns', 'l', 'running', 0, '', 1, 1, 1, 0, 0, gen_random_uuid(), 'i', 0, 10);
		INSERT INTO attempts (execution_id, epoch, attempt_index, lease_id, namespace, instance_id, state, claimed_at_ms, expires_at_ms, ended_at_ms)
		VALUES ('00000000-0000-7000-8000-000000000001', 1, 1, gen_random_uuid(), 'ns', 'i', 'completed', 0, 10, 5),
		       ('00000000-0000-7000-8000-000000000001', 7, 1, gen_random_uuid(), 'ns', 'i', 'failed', 0, 10, 5)`)
	must(t, err)
	problems, err = e.Check(ctx)
	must(t, err)
	if len(problems) != 2 || !strings.Contains(problems[0], "running executions whose attempt is recorded as ended") ||
		!strings.Contains(problems[1], "recorded attempts of a missing execution or of an epoch it never reached") {
		t.Fatalf("problems = %v", problems)
	}
}

// The seam tests every engine passes (internal/engine/enginetest).
func TestSeam(t *testing.T) {
	enginetest.Run(t, enginetest.Harness{
		Fresh: func(t *testing.T) string { return pgtest.Fresh(t) },
		Open:  func(t *testing.T, loc string) engine.Engine { return openAt(t, loc) },
		Exec: func(t *testing.T, loc, query string) {
			conn, err := pgx.Connect(context.Background(), loc)
			must(t, err)
			defer conn.Close(context.Background())
			_, err = conn.Exec(context.Background(), query)
			must(t, err)
		},
		Refuse: `CREATE FUNCTION refuse_boom() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN
				IF NEW.result = 'boom'::bytea THEN RAISE EXCEPTION 'refused'; END IF;
				RETURN NEW;
			END $$;
			CREATE TRIGGER refuse_boom BEFORE UPDATE ON executions FOR EACH ROW EXECUTE FUNCTION refuse_boom();`,
	})
}

// A claim that finds nothing claimable takes no transaction id (so it writes
// no WAL and idle workers never push the database toward a wraparound
// vacuum); one that claims does.
func TestIdleClaimTakesNoTransactionID(t *testing.T) {
	e := openAt(t, pgtest.Fresh(t))
	ctx := context.Background()
	_, err := e.pool.Exec(ctx, `
		INSERT INTO workers VALUES ('ns', 'i', 'w', '{default}', '{}', 1, 1000000, 1);
		INSERT INTO executions (id, namespace, lane, priority, payload, max_attempts, created_at_ms, run_at_ms, ready)
			VALUES (gen_random_uuid(), 'ns', 'default', 0, '', 1, 1, 500000, false), (gen_random_uuid(), 'ns', 'other', 0, '', 1, 1, 1, true)`)
	must(t, err)
	claimIn := func(now int64) (claimed int, xid *int64) {
		tx, err := e.pool.Begin(ctx)
		must(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		rows, err := newQueries(pgdb.New(tx)).executionClaim(ctx, engine.ClaimParams{
			Namespace: "ns", InstanceID: "i", NowMs: now, ExpiresAtMs: now + 1000, LeaseIDs: []uuid.UUID{uuid.New()},
		})
		must(t, err)
		must(t, tx.QueryRow(ctx, "SELECT pg_current_xact_id_if_assigned()::text::bigint").Scan(&xid))
		return len(rows.Leases), xid
	}
	// Nothing claimable yet (the one execution of its lane runs at 500000).
	if n, xid := claimIn(100); n != 0 || xid != nil {
		t.Fatalf("an idle claim claimed %d and took transaction id %v", n, *xid)
	}
	if n, xid := claimIn(600000); n != 1 || xid == nil {
		t.Fatalf("a claim that claimed %d took transaction id %v", n, xid)
	}
}

// The listening connection is opened again after it is killed, and hears
// the next notification: a worker never goes deaf for good.
func TestListenerReopensAfterLoss(t *testing.T) {
	loc := pgtest.Fresh(t)
	a, b := openAt(t, loc), openAt(t, loc)
	sub := a.Subscribe("ns")
	defer sub.Close()
	sub.Arm()
	ctx := context.Background()
	var channel string
	must(t, a.pool.QueryRow(ctx, "SELECT 'roster_' || md5(current_schema())").Scan(&channel))
	listener := func() (pid int32) {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			err := a.pool.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE query = $1`, "LISTEN "+pgx.Identifier{channel}.Sanitize()).Scan(&pid)
			if err == nil {
				return pid
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatal("no listening connection")
		return 0
	}
	first := listener()
	_, err := a.pool.Exec(ctx, "SELECT pg_terminate_backend($1)", first)
	must(t, err)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if pid := listener(); pid != first {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the listening connection was not opened again")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Drain the wake-ups of the loss and of the reopening, then a new
	// execution through the other engine must be heard.
	for drained := false; !drained; {
		select {
		case <-sub.C():
		case <-time.After(300 * time.Millisecond):
			drained = true
		}
	}
	id, _ := uuid.NewV7()
	must(t, b.Write(ctx, func(ctx context.Context, q engine.Queries) error {
		return q.ExecutionInsert(ctx, engine.Execution{ID: id, Namespace: "ns", Lane: "l", MaxAttempts: 1, CreatedAtMs: 1, RunAtMs: 1})
	}))
	select {
	case <-sub.C():
	case <-time.After(10 * time.Second):
		t.Fatal("the reopened listener did not hear the new execution")
	}
}

// While the server is away, the listener keeps trying it at a short
// interval without waking its subscribers at each failed try; once the
// server is back after an outage long enough for a doubling backoff to have
// reached seconds, it is heard within a second (a worker waiting to retry a
// failed write is woken by it), and it hears notifications again.
func TestListenerHearsTheServerComeBack(t *testing.T) {
	srv := pgserver.Start(t)
	a, b := openAt(t, srv.URL), openAt(t, srv.URL)
	sub := a.Subscribe("ns")
	defer sub.Close()
	sub.Arm()
	drain := func(quiet time.Duration) {
		for {
			select {
			case <-sub.C():
			case <-time.After(quiet):
				return
			}
		}
	}
	drain(300 * time.Millisecond) // the listener's opening
	must(t, srv.Down("immediate"))
	select {
	case <-sub.C():
	case <-time.After(10 * time.Second):
		t.Fatal("the loss of the listening connection woke no subscriber")
	}
	select {
	case <-sub.C():
		t.Fatal("a failed try to open the listening connection again woke the subscribers")
	case <-time.After(4 * time.Second):
	}
	must(t, srv.Up())
	up := time.Now()
	select {
	case <-sub.C():
		if d := time.Since(up); d > time.Second {
			t.Fatalf("the listener heard the server %v after it came back", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the listener did not hear the server come back")
	}
	drain(300 * time.Millisecond)
	id, _ := uuid.NewV7()
	must(t, b.Write(context.Background(), func(ctx context.Context, q engine.Queries) error {
		return q.ExecutionInsert(ctx, engine.Execution{ID: id, Namespace: "ns", Lane: "l", MaxAttempts: 1, CreatedAtMs: 1, RunAtMs: 1})
	}))
	select {
	case <-sub.C():
	case <-time.After(10 * time.Second):
		t.Fatal("the listener did not hear a new execution after the server came back")
	}
}

// TestLeaseFencesSeekByID: a lease fence (renew, complete, fail, release)
// finds its execution by primary key. The fence compares expires_at_ms, so a
// careless predicate lets the planner walk executions_expiry instead, which
// holds every running execution: the cost of a settle would grow with the
// running set.
func TestLeaseFencesSeekByID(t *testing.T) {
	e := openAt(t, pgtest.Fresh(t))
	seed(t, e)
	ctx := context.Background()
	id := uuid.New()
	for name, call := range map[string]func(q *pgdb.Queries) error{
		"LeaseRenew": func(q *pgdb.Queries) error {
			_, err := q.LeaseRenew(ctx, pgdb.LeaseRenewParams{ExpiresAtMs: 9, ID: id, Epoch: 1, Now: 5})
			return err
		},
		"LeaseComplete": func(q *pgdb.Queries) error {
			_, err := q.LeaseComplete(ctx, pgdb.LeaseCompleteParams{Result: []byte("x"), Now: 5, ID: id, Epoch: 1})
			return err
		},
		"LeaseCompleteMany": func(q *pgdb.Queries) error {
			_, err := q.LeaseCompleteMany(ctx, pgdb.LeaseCompleteManyParams{Ids: []uuid.UUID{id, uuid.New()}, Epochs: []int64{1, 2}, Results: [][]byte{nil, []byte("x")}, Now: 5})
			return err
		},
		"LeaseFail": func(q *pgdb.Queries) error {
			_, err := q.LeaseFail(ctx, pgdb.LeaseFailParams{LastError: "x", Now: 5, ID: id, Epoch: 1})
			return err
		},
		"LeaseRelease": func(q *pgdb.Queries) error {
			_, err := q.LeaseRelease(ctx, pgdb.LeaseReleaseParams{ID: id, Epoch: 1, Now: 5})
			return err
		},
		"LeaseSnooze": func(q *pgdb.Queries) error {
			_, err := q.LeaseSnooze(ctx, pgdb.LeaseSnoozeParams{RunAt: 9, ID: id, Epoch: 1, Now: 5})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			for _, plan := range plansOf(t, e, call) {
				if strings.Contains(plan, "executions_expiry") || !strings.Contains(plan, "executions_pkey") {
					t.Fatalf("the fence does not seek by primary key:\n%s", plan)
				}
			}
		})
	}
}

// genericPlanRecorder is a planRecorder that shows the generic plan of a
// statement (the one every connection runs under plan_cache_mode =
// force_generic_plan): it prepares the statement's text and explains its
// execution with the arguments bound.
type genericPlanRecorder struct{ planRecorder }

func (p *genericPlanRecorder) record(ctx context.Context, query string, args ...any) {
	name := fmt.Sprintf("generic_%d", genericPlans.Add(1))
	if _, err := p.tx.Exec(ctx, "PREPARE "+name+" AS "+query); err != nil {
		p.plans = append(p.plans, "ERROR: "+err.Error())
		return
	}
	defer func() { _, _ = p.tx.Exec(ctx, "DEALLOCATE "+name) }()
	// EXECUTE takes no bind parameters: the arguments are written as
	// literals (the calls explained here pass only integers and text).
	literals := make([]string, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case int64, int32, int:
			literals[i] = fmt.Sprintf("%d", v)
		case string:
			literals[i] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
		default:
			p.plans = append(p.plans, fmt.Sprintf("ERROR: argument %d of type %T", i+1, a))
			return
		}
	}
	p.explain(ctx, "EXECUTE "+name+"("+strings.Join(literals, ", ")+")")
}

// genericPlans numbers the statements genericPlanRecorder prepares.
var genericPlans atomic.Int64

func (p *genericPlanRecorder) Exec(ctx context.Context, query string, args ...any) (pgconn.CommandTag, error) {
	p.record(ctx, query, args...)
	return pgconn.CommandTag{}, nil
}

func (p *genericPlanRecorder) Query(ctx context.Context, query string, args ...any) (pgx.Rows, error) {
	p.record(ctx, query, args...)
	return p.tx.Query(ctx, "SELECT 1 WHERE false")
}

func (p *genericPlanRecorder) QueryRow(ctx context.Context, query string, args ...any) pgx.Row {
	p.record(ctx, query, args...)
	return p.tx.QueryRow(ctx, "SELECT 1 WHERE false")
}

// TestBatchesSeekByKeyUnderGenericPlans: a batch that picks its rows with a
// LIMIT and then deletes or updates them must reach them by primary key in
// the generic plan too (LIMIT unknown), never by hash-joining the picked ids
// against a scan of the whole table: the prune of 1,000 finished executions
// took 0.73 s beside a million live ones that way.
func TestBatchesSeekByKeyUnderGenericPlans(t *testing.T) {
	e := openAt(t, pgtest.Fresh(t))
	seed(t, e)
	ctx := context.Background()
	_, err := e.pool.Exec(ctx, `
		INSERT INTO executions (id, namespace, lane, priority, payload, max_attempts, created_at_ms, run_at_ms, ready)
			SELECT gen_random_uuid(), 'ns1', 'lane1', 0, '', 1, i, i, true FROM generate_series(1, 200000) AS i;
		INSERT INTO worker_events (namespace, instance_id, kind, at_ms) SELECT 'ns1', 'i1', 'heartbeat', i FROM generate_series(1, 200000) AS i;
		ANALYZE;`)
	must(t, err)
	for name, call := range map[string]func(q *pgdb.Queries) error{
		"ExecutionPruneBatch": func(q *pgdb.Queries) error {
			_, err := q.ExecutionPruneBatch(ctx, pgdb.ExecutionPruneBatchParams{Before: 100, BatchSize: 1000})
			return err
		},
		"ExecutionPromoteDue": func(q *pgdb.Queries) error {
			_, err := q.ExecutionPromoteDue(ctx, pgdb.ExecutionPromoteDueParams{Namespace: "ns1", Now: 5})
			return err
		},
		"WorkerEventPruneBatch": func(q *pgdb.Queries) error {
			_, err := q.WorkerEventPruneBatch(ctx, pgdb.WorkerEventPruneBatchParams{BeforeMs: 100, BatchSize: 1000})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			tx, err := e.pool.Begin(ctx)
			must(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			_, err = tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan")
			must(t, err)
			rec := &genericPlanRecorder{planRecorder{tx: tx}}
			_ = call(pgdb.New(rec))
			if len(rec.plans) == 0 {
				t.Fatal("the call issued no query")
			}
			for _, plan := range rec.plans {
				if strings.Contains(plan, "ERROR: ") {
					t.Fatalf("EXPLAIN failed: %s", plan)
				}
				if strings.Contains(plan, "Seq Scan on executions") || strings.Contains(plan, "Seq Scan on worker_events") {
					t.Fatalf("the batch scans the whole table in the generic plan:\n%s", plan)
				}
			}
		})
	}
}

func TestFleetQueriesUseIndexes(t *testing.T) {
	e := openAt(t, pgtest.Fresh(t))
	seed(t, e)
	ctx := context.Background()
	_, err := e.pool.Exec(ctx, `
		UPDATE executions SET unique_key = 'k' || (random() * 1000000)::bigint WHERE state IN ('completed', 'failed', 'cancelled');
		UPDATE executions SET group_key = 'g' || (random() * 100)::bigint WHERE random() < 0.3;
		INSERT INTO execution_keys SELECT 'ns' || (i % 10), 'k' || i, gen_random_uuid(), i FROM generate_series(1, 20000) AS i;
		INSERT INTO schedules (namespace, name, every_ms, lane, priority, max_attempts, retry_backoff_ms, paused, next_run_at_ms, updated_at_ms, payload)
			SELECT 'ns' || (i % 10), 's' || i, 60000, 'l', 0, 1, 0, i % 3 = 0, i, i, '' FROM generate_series(1, 20000) AS i;
		ANALYZE;`)
	must(t, err)
	id := uuid.New()
	for name, call := range map[string]func(q *pgdb.Queries) error{
		"ExecutionInsertUnique": func(q *pgdb.Queries) error {
			_, err := q.ExecutionInsertUnique(ctx, pgdb.ExecutionInsertUniqueParams{ID: id, Namespace: "ns1", Lane: "l", Payload: []byte{},
				RequiredCapabilities: []string{}, MaxAttempts: 1, Ready: true, UniqueKey: pgtype.Text{String: "k", Valid: true}})
			return err
		},
		"ExecutionFindLiveByKey": func(q *pgdb.Queries) error {
			_, err := q.ExecutionFindLiveByKey(ctx, pgdb.ExecutionFindLiveByKeyParams{Namespace: "ns1", UniqueKey: pgtype.Text{String: "k", Valid: true}})
			return err
		},
		"ExecutionKeyGet": func(q *pgdb.Queries) error {
			_, err := q.ExecutionKeyGet(ctx, pgdb.ExecutionKeyGetParams{Namespace: "ns1", UniqueKey: "k1", Now: 5})
			return err
		},
		"ExecutionKeyPut": func(q *pgdb.Queries) error {
			_, err := q.ExecutionKeyPut(ctx, pgdb.ExecutionKeyPutParams{Namespace: "ns1", UniqueKey: "k1", ExecutionID: id, UntilMs: 5, Now: 5})
			return err
		},
		"ExecutionKeyPruneBatch": func(q *pgdb.Queries) error {
			_, err := q.ExecutionKeyPruneBatch(ctx, pgdb.ExecutionKeyPruneBatchParams{Before: 5, BatchSize: 10})
			return err
		},
		"ExecutionRetry": func(q *pgdb.Queries) error {
			_, err := q.ExecutionRetry(ctx, pgdb.ExecutionRetryParams{RunAt: 5, Ready: true, ID: id})
			return err
		},
		"LeaderTake": func(q *pgdb.Queries) error {
			_, err := q.LeaderTake(ctx, pgdb.LeaderTakeParams{Name: "maintenance", Holder: "h", ExpiresAtMs: 9, Epoch: 1, Now: 5})
			return err
		},
		"LeaderResign": func(q *pgdb.Queries) error {
			return q.LeaderResign(ctx, pgdb.LeaderResignParams{Now: 5, Name: "maintenance", Holder: "h", Epoch: 1})
		},
		"LeaderGet": func(q *pgdb.Queries) error { _, err := q.LeaderGet(ctx, "maintenance"); return err },
		"SchedulePut": func(q *pgdb.Queries) error {
			return q.SchedulePut(ctx, pgdb.SchedulePutParams{Namespace: "ns1", Name: "s1", EveryMs: pgtype.Int8{Int64: 1000, Valid: true},
				Lane: "l", RequiredCapabilities: []string{}, NextRunAtMs: 5, Payload: []byte{}})
		},
		"ScheduleDelete": func(q *pgdb.Queries) error {
			_, err := q.ScheduleDelete(ctx, pgdb.ScheduleDeleteParams{Namespace: "ns1", Name: "s1"})
			return err
		},
		"ScheduleList": func(q *pgdb.Queries) error { _, err := q.ScheduleList(ctx, "ns1"); return err },
		"ScheduleListDue": func(q *pgdb.Queries) error {
			_, err := q.ScheduleListDue(ctx, pgdb.ScheduleListDueParams{Now: 5, AfterMs: 2, AfterNamespace: "ns1", AfterName: "s1", MaxRows: 10})
			return err
		},
		"ExecutionInsertManyUnique": func(q *pgdb.Queries) error {
			_, err := q.ExecutionInsertManyUnique(ctx, pgdb.ExecutionInsertManyUniqueParams{Ords: []int32{0, 1}, Ids: []uuid.UUID{id, uuid.New()},
				Namespaces: []string{"ns1", "ns1"}, Lanes: []string{"l", "l"}, Priorities: []int64{0, 0}, Payloads: [][]byte{{}, {}},
				Capabilities: []string{"", ""}, MaxAttempts: []int64{1, 1}, RunAtMs: []int64{1, 1}, RetryBackoffMs: []int64{0, 0},
				Ready: []bool{true, true}, CreatedAtMs: []int64{1, 1}, UniqueKeys: []string{"k1", ""}, UntilMs: []int64{5, 0}})
			return err
		},
		"LeaderHolds": func(q *pgdb.Queries) error {
			_, err := q.LeaderHolds(ctx, pgdb.LeaderHoldsParams{Name: "maintenance", Holder: "h", Epoch: 1})
			return err
		},
		"ExecutionListNewest": func(q *pgdb.Queries) error {
			_, err := q.ExecutionListNewest(ctx, pgdb.ExecutionListNewestParams{BeforeID: id, MaxRows: 10})
			return err
		},
		"ExecutionListByNamespaceNewest": func(q *pgdb.Queries) error {
			_, err := q.ExecutionListByNamespaceNewest(ctx, pgdb.ExecutionListByNamespaceNewestParams{Namespace: "ns1", BeforeID: id, Lane: "l", State: "failed", MaxRows: 10})
			return err
		},
		"ExecutionListByStateNewest": func(q *pgdb.Queries) error {
			_, err := q.ExecutionListByStateNewest(ctx, pgdb.ExecutionListByStateNewestParams{State: "failed", BeforeID: id, MaxRows: 10})
			return err
		},
		"ExecutionListRunningNewest": func(q *pgdb.Queries) error {
			_, err := q.ExecutionListRunningNewest(ctx, pgdb.ExecutionListRunningNewestParams{BeforeID: id, MaxRows: 10})
			return err
		},
		"ExecutionListByLaneNewest": func(q *pgdb.Queries) error {
			_, err := q.ExecutionListByLaneNewest(ctx, pgdb.ExecutionListByLaneNewestParams{Lane: "lane1", BeforeID: id, MaxRows: 10})
			return err
		},
		"ExecutionListByUniqueKey": func(q *pgdb.Queries) error {
			_, err := q.ExecutionListByUniqueKey(ctx, pgdb.ExecutionListByUniqueKeyParams{Namespace: "ns1", UniqueKey: "k1", AfterID: id, Lane: "l", State: "failed", MaxRows: 10})
			return err
		},
		"ExecutionListByUniqueKeyNewest": func(q *pgdb.Queries) error {
			_, err := q.ExecutionListByUniqueKeyNewest(ctx, pgdb.ExecutionListByUniqueKeyNewestParams{Namespace: "ns1", UniqueKey: "k1", BeforeID: id, MaxRows: 10})
			return err
		},
		"ExecutionListByGroup": func(q *pgdb.Queries) error {
			_, err := q.ExecutionListByGroup(ctx, pgdb.ExecutionListByGroupParams{Namespace: "ns1", GroupKey: "g1", AfterID: id, Lane: "l", State: "failed", MaxRows: 10})
			return err
		},
		"ExecutionListByGroupNewest": func(q *pgdb.Queries) error {
			_, err := q.ExecutionListByGroupNewest(ctx, pgdb.ExecutionListByGroupNewestParams{Namespace: "ns1", GroupKey: "g1", BeforeID: id, MaxRows: 10})
			return err
		},
		"ScheduleAdvance": func(q *pgdb.Queries) error {
			_, err := q.ScheduleAdvance(ctx, pgdb.ScheduleAdvanceParams{NextRunAtMs: 9, Namespace: "ns1", Name: "s1", FromMs: 5})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) { assertIndexed(t, e, call) })
	}
}

// TestClaimStartsItsPicksByID: the claim starts the executions it picked by
// primary key, whatever the statistics say. On a table not yet analyzed (a
// new schema's first burst, before autovacuum looks) the planner, given the
// state as a plain condition, walked the state index's every waiting entry
// comparing ids: each claim read the whole backlog.
func TestClaimStartsItsPicksByID(t *testing.T) {
	e := openAt(t, pgtest.Fresh(t))
	ctx := context.Background()
	_, err := e.pool.Exec(ctx, `
		INSERT INTO workers VALUES ('ns', 'i', 'w', '{default}', '{}', 0, 60000, 0);
		INSERT INTO executions (id, namespace, lane, priority, payload, max_attempts, created_at_ms, run_at_ms, ready)
			SELECT gen_random_uuid(), 'ns', 'default', 0, '', 1, i, i, true FROM generate_series(1, 2000) AS i;`)
	must(t, err)
	plans := plansOf(t, e, func(q *pgdb.Queries) error {
		_, err := q.ExecutionClaim(ctx, pgdb.ExecutionClaimParams{
			Namespace: "ns", InstanceID: "i", Now: 5, LeaseIds: []uuid.UUID{uuid.New()}, ExpiresAtMs: 9, Promote: true,
		})
		return err
	})
	for _, plan := range plans {
		if strings.Contains(plan, "on executions x") && !strings.Contains(plan, "Index Scan using executions_pkey on executions x") {
			t.Fatalf("the claim does not start its picks by primary key:\n%s", plan)
		}
	}
}
