package service

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rosterdb/roster/db"
)

// t0 is the fixed start of every test clock.
var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// fakeClock is an injected clock that moves only when told to.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock { return &fakeClock{t: t0} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// newStore opens a private in-memory Store on a fake clock.
func newStore(t testing.TB, opts ...Option) (*Store, *fakeClock) {
	t.Helper()
	clock := newClock()
	s, err := Open(context.Background(), ":memory:", append([]Option{WithClock(clock.Now)}, opts...)...)
	if err != nil {
		t.Fatalf("Open(:memory:): %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, clock
}

// newFileStore opens a Store on a new file in t.TempDir() on a fake clock.
func newFileStore(t testing.TB, opts ...Option) (*Store, *fakeClock, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "roster.db")
	clock := newClock()
	s, err := Open(context.Background(), path, append([]Option{WithClock(clock.Now)}, opts...)...)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, clock, path
}

// stores runs f against an in-memory Store and a file Store.
func stores(t *testing.T, f func(t *testing.T, s *Store, clock *fakeClock)) {
	t.Run("memory", func(t *testing.T) {
		s, c := newStore(t)
		f(t, s, c)
	})
	t.Run("file", func(t *testing.T) {
		s, c, _ := newFileStore(t)
		f(t, s, c)
	})
}

func wantErr(t testing.TB, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("err = %v, want %v", err, want)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// planRecorder is a db.DBTX that, instead of running a generated query, runs
// EXPLAIN QUERY PLAN on its exact text and arguments and records the plan.
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
func assertIndexed(t *testing.T, s *Store, call func(q *db.Queries) error, allowOrderedScan ...bool) {
	t.Helper()
	rec := &planRecorder{conn: s.writer}
	_ = call(db.New(rec))
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
	s, _ := newStore(t)
	ctx := context.Background()
	for _, tc := range []struct {
		query string
		bad   bool
	}{
		{"SELECT * FROM workers WHERE worker_id = 'x'", true},
		{"SELECT * FROM workers ORDER BY worker_id LIMIT 5", true},
		{"SELECT * FROM workers WHERE namespace = 'a' AND instance_id = 'b'", false},
	} {
		rec := &planRecorder{conn: s.writer}
		rec.explain(ctx, tc.query)
		if got := planScans(rec.plans[0], false) != ""; got != tc.bad {
			t.Fatalf("%s: flagged=%v, want %v\n%s", tc.query, got, tc.bad, rec.plans[0])
		}
	}
}
