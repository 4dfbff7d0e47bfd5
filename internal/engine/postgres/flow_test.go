package postgres

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	pgdb "github.com/rosterdb/roster/db/postgres"
	"github.com/rosterdb/roster/internal/pgtest"
)

// The statements of a flow claim, and the lane limits', read indexes: a
// claim of a limited lane costs the same beside a million finished
// executions or a thousand other lanes.
func TestFlowQueriesUseIndexes(t *testing.T) {
	e := openAt(t, pgtest.Fresh(t))
	seedFlow(t, e, "")
	ctx := context.Background()
	for name, call := range map[string]func(q *pgdb.Queries) error{
		"LaneLimitsPut": func(q *pgdb.Queries) error {
			return q.LaneLimitsPut(ctx, pgdb.LaneLimitsPutParams{Namespace: "ns1", Lane: "lane1", MaxRunning: 3})
		},
		"LaneLimitsList": func(q *pgdb.Queries) error { _, err := q.LaneLimitsList(ctx, "ns1"); return err },
		"LaneLimitsDelete": func(q *pgdb.Queries) error {
			_, err := q.LaneLimitsDelete(ctx, pgdb.LaneLimitsDeleteParams{Namespace: "ns1", Lane: "lane1"})
			return err
		},
		"LaneTurnsTouch": func(q *pgdb.Queries) error {
			return q.LaneTurnsTouch(ctx, pgdb.LaneTurnsTouchParams{Namespaces: []string{"ns1"}, Lanes: []string{"lane1"}})
		},
	} {
		t.Run(name, func(t *testing.T) { assertIndexed(t, e, call) })
	}
}

// seedFlow seeds the engine as seed does, with 2,000 limited lanes and a
// lane with turns between 2,000 groups of ready executions, then runs more
// (SQL) and analyzes.
func seedFlow(t *testing.T, e *Engine, more string) {
	t.Helper()
	seed(t, e)
	_, err := e.pool.Exec(context.Background(), `
		INSERT INTO lane_limits (namespace, lane, max_running, max_running_per_group, rate, rate_period_ms, paused)
			SELECT 'ns' || (i % 10), 'lane' || i, 4, 1, 10, 1000, false FROM generate_series(1, 2000) AS i;
		INSERT INTO lane_turns (namespace, lane, priority, capabilities) VALUES ('ns1', 'lane1', 0, '{}');
		INSERT INTO executions (id, namespace, lane, group_key, priority, payload, max_attempts, created_at_ms, run_at_ms, ready)
			SELECT gen_random_uuid(), 'ns1', 'lane1', 'g' || i, 0, '', 1, 1, 1, true FROM generate_series(1, 2000) AS i;
		`+more+`
		ANALYZE;`)
	must(t, err)
}

// Every statement roster_flow_claim runs reads indexes: its plans, as
// auto_explain reports each nested statement, have no sequential scan, with
// due scheduled work (made ready first), a lane with a cap, a cap per group,
// a rate and 2,000 groups beside 2,000 limited lanes, a lane without limits,
// and a claim that takes fewer than asked (it then reads when to look again).
func TestFlowClaimStatementsUseIndexes(t *testing.T) {
	u := pgtest.Fresh(t)
	e := openAt(t, u)
	seedFlow(t, e, `
		INSERT INTO workers VALUES ('ns1', 'flow', 'w', '{lane1,lane4,other}', '{}', 1, 100000000, 1);
		INSERT INTO executions (id, namespace, lane, group_key, priority, payload, max_attempts, created_at_ms, run_at_ms, ready)
			VALUES (gen_random_uuid(), 'ns1', 'lane1', 'g1', 0, '', 1, 1, 1, true),
			       (gen_random_uuid(), 'ns1', 'other', '', 0, '', 1, 1, 1, true),
			       (gen_random_uuid(), 'ns1', 'lane1', 'g2', 0, '', 1, 1, 50, false);`)
	plans, n := flowClaimPlans(t, u, 1, 8, "SET enable_seqscan = off")
	if n != 6 { // the cap's four of lane1 (one made ready first), other's one, and what held the claim back
		t.Fatalf("the claim returned %d rows, want 6", n)
	}
	for _, want := range []string{"UPDATE executions SET ready = true", "x.group_key > coalesce(lt.last_group", "x.group_key > w.group_key", "INSERT INTO lane_turns", "UPDATE lane_limits", "sc.run_at_ms > p_now"} {
		found := false
		for _, p := range plans {
			found = found || strings.Contains(p, want)
		}
		if !found {
			t.Errorf("no plan of the statement with %q among the %d reported", want, len(plans))
		}
	}
	for _, p := range plans {
		if strings.Contains(p, "Seq Scan") {
			t.Errorf("a statement of roster_flow_claim is not index-backed:\n%s", p)
		}
	}
}

// A group's backlog is not read whole: once PL/pgSQL plans the function's
// statements generically (from the sixth call of a session on), each step
// of the turns still reads the ready index in its order, stopping at the
// first it needs, and what is started is looked up by id, with 200 ready
// executions in each of 10 groups of a lane with caps and a rate.
func TestFlowClaimGenericPlansReadTheHeadsOnly(t *testing.T) {
	u := pgtest.Fresh(t)
	e := openAt(t, u)
	seedFlow(t, e, `
		INSERT INTO workers VALUES ('ns1', 'flow', 'w', '{wide}', '{}', 1, 100000000, 1);
		INSERT INTO lane_limits (namespace, lane, max_running, max_running_per_group, rate, rate_period_ms, paused)
			VALUES ('ns1', 'wide', 1000, 1000, 1000, 1000, false);
		INSERT INTO lane_turns (namespace, lane, priority, capabilities) VALUES ('ns1', 'wide', 0, '{}');
		INSERT INTO executions (id, namespace, lane, group_key, priority, payload, max_attempts, created_at_ms, run_at_ms, ready)
			SELECT gen_random_uuid(), 'ns1', 'wide', 'b' || (i % 10), 0, '', 1, 1, i, true FROM generate_series(1, 2000) AS i;`)
	plans, n := flowClaimPlans(t, u, 8, 1, "")
	if n != 2 { // one started, and what held the claim back
		t.Fatalf("the last claim returned %d rows, want 2", n)
	}
	for _, p := range plans {
		if strings.Contains(p, "Sort Key: x.") || strings.Contains(p, "Seq Scan on executions") {
			t.Errorf("a statement of roster_flow_claim reads more than the heads of the groups:\n%s", p)
		}
	}
	if len(plans) == 0 {
		t.Fatal("auto_explain reported no plan")
	}
}

// flowClaimPlans calls roster_flow_claim for the worker 'flow' of ns1 calls
// times in one session (after the SQL set), each asking for want, and
// returns the plans auto_explain reported of the last call's statements
// and how many rows that call returned.
func flowClaimPlans(t *testing.T, u string, calls, want int, set string) ([]string, int) {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(u)
	must(t, err)
	var plans []string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if strings.Contains(n.Message, "Query Text:") {
			plans = append(plans, n.Message)
		}
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	must(t, err)
	defer func() { _ = conn.Close(ctx) }()
	_, err = conn.Exec(ctx, `LOAD 'auto_explain';
		SET auto_explain.log_min_duration = 0; SET auto_explain.log_nested_statements = on;
		SET auto_explain.log_level = notice; SET client_min_messages = notice; `+set)
	must(t, err)
	n := 0
	for range calls {
		plans, n = plans[:0], 0
		ids := make([]uuid.UUID, want)
		for i := range ids {
			ids[i] = uuid.New()
		}
		rows, err := conn.Query(ctx, `SELECT id FROM roster_flow_claim('ns1', 'flow', 100, $1, 100000, false, 1000000)`, ids)
		must(t, err)
		for rows.Next() {
			n++
		}
		must(t, rows.Err())
	}
	return plans, n
}
