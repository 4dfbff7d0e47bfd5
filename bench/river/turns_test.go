package river

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/rosterdb/roster/internal/pgtest"
	"github.com/rosterdb/roster/service"
)

// The comparisons below take turns: River drains b.N jobs, then roster's
// runtime drains b.N executions, three times over, on one database server
// (or one directory) set up once for each. Both see the same moments of a
// shared, noisy machine, so their ratio holds where separate sub-benchmarks'
// figures drift further apart than the difference they measure.
//
//	cd bench/river && ROSTER_TEST_POSTGRES=postgres://... go test -run '^$' -bench Turns -benchtime 3000x

// rounds is how many turns each side takes.
const rounds = 3

// side is one contender's total over its turns.
type side struct {
	elapsed time.Duration
	jobs    int
	cpu     time.Duration
}

func (s side) jobsPerSecond() float64 { return float64(s.jobs) / s.elapsed.Seconds() }

// turn times one drain, with the server's CPU when cpu is not nil.
func (s *side) turn(b *testing.B, n int, cpu *serverCPU, drain func()) {
	b.Helper()
	c0 := cpu.total()
	t0 := time.Now()
	drain()
	s.elapsed += time.Since(t0)
	s.cpu += cpu.total() - c0
	s.jobs += n
}

// reportTurns gives each side's jobs/s, roster's ratio to River, and, with a
// server, each side's server CPU per job.
func reportTurns(b *testing.B, rv, rs side, cpu *serverCPU) {
	b.ReportMetric(rv.jobsPerSecond(), "river-jobs/s")
	b.ReportMetric(rs.jobsPerSecond(), "roster-jobs/s")
	b.ReportMetric(rs.jobsPerSecond()/rv.jobsPerSecond(), "roster/river")
	if cpu != nil {
		b.ReportMetric(float64(rv.cpu.Microseconds())/float64(rv.jobs), "river-pg-cpu-us/job")
		b.ReportMetric(float64(rs.cpu.Microseconds())/float64(rs.jobs), "roster-pg-cpu-us/job")
	}
}

// riverTurn inserts n jobs (untimed), then times a new client's start until
// every job is worked and its stop, which flushes the batched completions.
func riverTurn[TTx any](b *testing.B, driver riverdriver.Driver[TTx], workers, n int, s *side, cpu *serverCPU) {
	b.Helper()
	ctx := context.Background()
	w := &noopWorker{left: new(atomic.Int64), done: make(chan struct{})}
	w.left.Store(int64(n))
	c, err := river.NewClient(driver, riverConfig(workers, w))
	if err != nil {
		b.Fatal(err)
	}
	insertRiver(b, c, n)
	s.turn(b, n, cpu, func() {
		if err := c.Start(ctx); err != nil {
			b.Fatal(err)
		}
		select {
		case <-w.done:
		case <-time.After(10 * time.Minute):
			b.Fatal("River did not finish")
		}
		if err := c.Stop(ctx); err != nil {
			b.Fatal(err)
		}
	})
}

// rosterTurn creates n executions (untimed), then times RunWorker from its
// start until every handler ran and it stopped, which drains: every
// completion written, every lease fenced.
func rosterTurn(b *testing.B, st *service.Store, workers, n int, s *side, cpu *serverCPU) {
	b.Helper()
	insertRoster(b, st, n)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var left atomic.Int64
	left.Store(int64(n))
	s.turn(b, n, cpu, func() {
		err := st.RunWorker(ctx, service.WorkerArgs{
			Namespace: "ns", WorkerID: "w", InstanceID: "w", Lanes: []string{"default"},
			TTL: time.Minute, Concurrency: workers,
			Handler: func(context.Context, service.Lease) ([]byte, error) {
				if left.Add(-1) == 0 {
					cancel()
				}
				return nil, nil
			},
		})
		if err != nil {
			b.Fatal(err)
		}
	})
	if left.Load() != 0 {
		b.Fatalf("%d handlers did not run", left.Load())
	}
}

// migrateRiver brings River's schema up on driver.
func migrateRiver[TTx any](b *testing.B, driver riverdriver.Driver[TTx]) {
	b.Helper()
	m, err := rivermigrate.New(driver, nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := m.Migrate(context.Background(), rivermigrate.DirectionUp, nil); err != nil {
		b.Fatal(err)
	}
}

// riverPostgres opens a pool on url (closed when b ends) and returns
// River's driver on it, its schema migrated.
func riverPostgres(b *testing.B, url string) *riverpgxv5.Driver {
	b.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	driver := riverpgxv5.New(pool)
	migrateRiver(b, driver)
	return driver
}

// riverSQLite opens a SQLite file of b's own in WAL mode with
// synchronous=FULL, on one connection as River advises (closed when b ends),
// and returns River's driver on it, its schema migrated.
func riverSQLite(b *testing.B) *riversqlite.Driver {
	b.Helper()
	path := filepath.Join(b.TempDir(), "river.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate")
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	b.Cleanup(func() { _ = db.Close() })
	driver := riversqlite.New(db)
	migrateRiver(b, driver)
	return driver
}

// openRoster opens a Store on dsn (a PostgreSQL URL or a SQLite path),
// closed when b ends.
func openRoster(b *testing.B, dsn string) *service.Store {
	b.Helper()
	st, err := service.Open(context.Background(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	return st
}

// takeTurns runs rounds of a River turn then a roster turn of b.N jobs
// each, and reports both.
func takeTurns[TTx any](b *testing.B, driver riverdriver.Driver[TTx], st *service.Store, workers int, cpu *serverCPU) {
	var rv, rs side
	for range rounds {
		riverTurn(b, driver, workers, b.N, &rv, cpu)
		rosterTurn(b, st, workers, b.N, &rs, cpu)
	}
	reportTurns(b, rv, rs, cpu)
}

// BenchmarkPostgresTurns: River on riverpgxv5 and roster's runtime, each in
// a schema of its own on one PostgreSQL server, taking turns.
func BenchmarkPostgresTurns(b *testing.B) {
	for _, workers := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			pool := fmt.Sprintf("&pool_max_conns=%d", workers+8)
			driver := riverPostgres(b, pgtest.Fresh(b)+pool)
			su := pgtest.Fresh(b) + pool
			takeTurns(b, driver, openRoster(b, su), workers, newServerCPU(b, su))
		})
	}
}

// BenchmarkSQLiteTurns: River on riversqlite and roster's runtime, each on
// a SQLite file of its own in WAL mode with synchronous=FULL, taking turns.
func BenchmarkSQLiteTurns(b *testing.B) {
	for _, workers := range []int{1, 8} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			takeTurns(b, riverSQLite(b), openRoster(b, filepath.Join(b.TempDir(), "roster.db")), workers, nil)
		})
	}
}

// BenchmarkInsertManyTurns: batch enqueue on PostgreSQL, River's
// InsertManyFast and roster's CreateExecutions (5,000 a call), b.N jobs a
// turn, taking turns.
func BenchmarkInsertManyTurns(b *testing.B) {
	c, err := river.NewClient(riverPostgres(b, pgtest.Fresh(b)), &river.Config{Logger: discard})
	if err != nil {
		b.Fatal(err)
	}
	st := openRoster(b, pgtest.Fresh(b))
	var rv, rs side
	for range rounds {
		rv.turn(b, b.N, nil, func() { insertRiver(b, c, b.N) })
		rs.turn(b, b.N, nil, func() { insertRoster(b, st, b.N) })
	}
	reportTurns(b, rv, rs, nil)
}
