// Package scalebench measures bound leases at a fleet's scale, on every
// engine: 100,000 alive workers in namespace "fleet" (TTL 30 s), 1,000,000
// running executions under leases bound to them (10 each), and one more
// worker holding 10,000 bound leases, the one that dies:
//
//   - the liveness writes the fleet needs and the heartbeats the database
//     takes (BenchmarkScaleLivenessWrites);
//   - claim + complete of bound leases beside the fleet and beside an empty
//     registry (BenchmarkScaleClaimComplete);
//   - MarkWorkerDead of the worker of 10,000 bound leases and their reclaim
//     (BenchmarkScaleReclaimDeadWorker);
//   - one page of ListExpiredLeases and a Stats beside the fleet and beside
//     10 workers, with 100 lapsed workers of 10 bound leases in both
//     (BenchmarkScaleListExpiredAndStats);
//   - the renewals a fleet of leases with their own expiry would need, and
//     the RenewLease calls the database takes (BenchmarkScaleOwnLeaseRenewals).
//
// The fleet is written once per engine per process with raw SQL in big
// batches, after a Store migrated the schema (SQLite: a file in a temporary
// directory; PostgreSQL: a schema of its own on the server of
// ROSTER_TEST_POSTGRES), and removed when the process ends
// (ROSTER_SCALE_KEEP=1 keeps it and logs where). ROSTER_SCALE_WORKERS sets
// the fleet's size (default 100000; executions: 10 per worker):
//
//	ROSTER_TEST_POSTGRES=postgres://... go test -run '^$' -bench . -benchtime 1x ./internal/scalebench
//	ROSTER_SCALE_WORKERS=2000 go test -run '^$' -bench . -benchtime 1x ./internal/scalebench
//
// Time is injected: the fleet heartbeat at t0 and every call passes now
// (t0 + 1 s), so the fleet stays alive however long the run takes.
package scalebench

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/rosterdb/roster/internal/pgtest"
	"github.com/rosterdb/roster/service"
	_ "modernc.org/sqlite"
)

const (
	// EnvWorkers overrides the fleet's size (workers; executions are 10×).
	envWorkers = "ROSTER_SCALE_WORKERS"
	// envKeep keeps the fleet's database after the run.
	envKeep = "ROSTER_SCALE_KEEP"

	defaultWorkers  = 100_000
	leasesPerWorker = 10
	dyingLeases     = 10_000
	lapsedWorkers   = 100
	ns              = "fleet"
	fleetLane       = "fleet"
	workLane        = "work"
	fleetTTL        = 30 * time.Second
	claimers        = 4      // goroutines (and workers) of BenchmarkScaleClaimComplete
	round           = 1000   // claim+completes per op of BenchmarkScaleClaimComplete
	callers         = 64     // goroutines of the renewal pool
	hbCallers       = 128    // goroutines of the heartbeat pool (group commit takes more at once)
	chunk           = 100000 // rows per INSERT statement (and transaction)
	never           = math.MaxInt64
)

// The id groups: an execution's id is idOf(group, i), its lease id
// leaseOf(group, i), for i from 1.
const (
	groupFleet  = 1
	groupDying  = 2
	groupLapsed = 3
)

// Instance ids: prefix + %06d.
const (
	fleetPrefix  = "w"
	dyingPrefix  = "dying"
	lapsedPrefix = "lapsed"
)

var (
	t0  = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC) // the fleet's heartbeat
	now = t0.Add(time.Second)                            // every call's time
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

func idOf(group, i int) string    { return fmt.Sprintf("%08x-0000-7000-8000-%012x", group, i) }
func leaseOf(group, i int) string { return fmt.Sprintf("%08x-0000-7000-9000-%012x", group, i) }
func instance(prefix string, i int) string {
	return fmt.Sprintf("%s%06d", prefix, i)
}

// fleet is a Store and a raw connection to the same database.
type fleet struct {
	engine string
	store  *service.Store
	db     *sql.DB
	pg     bool
	// workers and leases: the fleet proper (no dying or lapsed worker).
	workers, leases int
	dying           int // the dying worker's leases (0: none)
	built           time.Duration
	close           func()
}

// fleetSize reads ROSTER_SCALE_WORKERS.
func fleetSize(tb testing.TB) int {
	v := os.Getenv(envWorkers)
	if v == "" {
		return defaultWorkers
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		tb.Fatalf("%s=%q: want a positive number of workers", envWorkers, v)
	}
	return n
}

// openSQLite opens a Store on a file in dir (which migrates it) and a raw
// connection beside it.
func openSQLite(ctx context.Context, dir string) (*fleet, error) {
	path := filepath.Join(dir, "fleet.db")
	s, err := service.Open(ctx, path, service.WithLogger(discard))
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", "file:"+path+
		"?_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)&_txlock=immediate")
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return &fleet{engine: "sqlite", store: s, db: db, close: func() { _ = db.Close(); _ = s.Close() }}, nil
}

// openPostgres opens a Store on the schema of url (which migrates it) and a
// raw connection beside it.
func openPostgres(ctx context.Context, url string) (*fleet, error) {
	s, err := service.Open(ctx, url+"&pool_max_conns=32", service.WithLogger(discard))
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("pgx", url)
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	db.SetMaxOpenConns(4)
	return &fleet{engine: "postgres", store: s, db: db, pg: true, close: func() { _ = db.Close(); _ = s.Close() }}, nil
}

// engine opens a fresh fleet database for one test or benchmark.
type engine struct {
	name  string
	fresh func(tb testing.TB) *fleet
}

var engines = []engine{
	{"sqlite", func(tb testing.TB) *fleet {
		f, err := openSQLite(context.Background(), tb.TempDir())
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(f.close)
		return f
	}},
	{"postgres", func(tb testing.TB) *fleet {
		f, err := openPostgres(context.Background(), pgtest.Fresh(tb))
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(f.close)
		return f
	}},
}

// The big fleets, one per engine, built once per process.
var (
	bigMu    sync.Mutex
	bigOnce  = map[string]*sync.Once{"sqlite": {}, "postgres": {}}
	bigFleet = map[string]*fleet{}
	bigErr   = map[string]error{}
	cleanups []func()
)

// TestMain removes the big fleets when the run ends.
func TestMain(m *testing.M) {
	code := m.Run()
	bigMu.Lock()
	for _, c := range slices.Backward(cleanups) {
		c()
	}
	bigMu.Unlock()
	os.Exit(code)
}

// big returns the engine's big fleet, building it on first use.
func big(b *testing.B, name string) *fleet {
	b.Helper()
	var base string
	if name == "postgres" {
		if base = pgtest.URL(b); base == "" {
			b.Skip(pgtest.SkipMessage)
		}
	}
	bigMu.Lock()
	once := bigOnce[name]
	bigMu.Unlock()
	once.Do(func() {
		f, err := buildBig(b, name, base)
		bigMu.Lock()
		bigFleet[name], bigErr[name] = f, err
		bigMu.Unlock()
	})
	bigMu.Lock()
	defer bigMu.Unlock()
	if err := bigErr[name]; err != nil {
		b.Fatalf("building the %s fleet: %v", name, err)
	}
	return bigFleet[name]
}

func buildBig(b *testing.B, name, base string) (*fleet, error) {
	ctx := context.Background()
	keep := os.Getenv(envKeep) != ""
	var f *fleet
	var err error
	switch name {
	case "sqlite":
		dir, err := os.MkdirTemp("", "roster-scalebench-")
		if err != nil {
			return nil, err
		}
		remove := func() {
			if keep {
				fmt.Fprintf(os.Stderr, "scalebench: kept the SQLite fleet in %s\n", dir)
				return
			}
			_ = os.RemoveAll(dir)
		}
		if f, err = openSQLite(ctx, dir); err != nil {
			remove()
			return nil, err
		}
		bigMu.Lock()
		cleanups = append(cleanups, remove)
		bigMu.Unlock()
	case "postgres":
		var r [6]byte
		_, _ = rand.Read(r[:])
		schema := "roster_scale_" + hex.EncodeToString(r[:])
		admin, err := sql.Open("pgx", base)
		if err != nil {
			return nil, err
		}
		if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
			_ = admin.Close()
			return nil, err
		}
		drop := func() {
			defer admin.Close()
			if keep {
				fmt.Fprintf(os.Stderr, "scalebench: kept the PostgreSQL fleet in schema %s\n", schema)
				return
			}
			if _, err := admin.ExecContext(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
				fmt.Fprintf(os.Stderr, "scalebench: drop schema %s: %v\n", schema, err)
			}
		}
		bigMu.Lock()
		cleanups = append(cleanups, drop)
		bigMu.Unlock()
		if f, err = openPostgres(ctx, pgtest.WithSchema(b, base, schema)); err != nil {
			return nil, err
		}
	}
	bigMu.Lock()
	cleanups = append(cleanups, f.close)
	bigMu.Unlock()
	workers := fleetSize(b)
	began := time.Now()
	if err = f.generate(ctx, workers, dyingLeases); err != nil {
		return nil, err
	}
	f.built = time.Since(began)
	b.Logf("%s: wrote %d workers, %d bound leases and a worker of %d more in %v",
		name, f.workers+1, f.leases, f.dying, f.built.Round(time.Millisecond))
	return f, nil
}

// generate writes the fleet: workers alive workers in namespace "fleet"
// (heartbeat t0, TTL 30 s) with 10 running bound leases each in lane
// "fleet", and, when dying > 0, one more worker holding dying such leases;
// then, on PostgreSQL, VACUUM ANALYZE as autovacuum would have by then.
func (f *fleet) generate(ctx context.Context, workers, dying int) error {
	if err := f.insertWorkers(ctx, fleetPrefix, 1, workers, t0, fleetTTL); err != nil {
		return err
	}
	if err := f.insertLeases(ctx, groupFleet, 1, workers*leasesPerWorker, fleetPrefix, leasesPerWorker); err != nil {
		return err
	}
	f.workers, f.leases = workers, workers*leasesPerWorker
	if dying > 0 {
		if err := f.resetDying(ctx, dying); err != nil {
			return err
		}
	}
	return f.analyze(ctx)
}

func (f *fleet) analyze(ctx context.Context) error {
	if !f.pg {
		return nil // roster runs no ANALYZE on SQLite: its hot queries name their indexes
	}
	_, err := f.db.ExecContext(ctx, "VACUUM ANALYZE workers, executions, attempts")
	return err
}

// inTx runs the statements in one transaction.
func (f *fleet) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := f.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// insertWorkers writes the workers prefix%06d for i in [first, last],
// serving lane "fleet", heartbeat at hb with the TTL (SQLite's triggers
// add their worker_lanes rows).
func (f *fleet) insertWorkers(ctx context.Context, prefix string, first, last int, hb time.Time, ttl time.Duration) error {
	q := `WITH RECURSIVE n(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM n WHERE i < ?2)
		INSERT INTO workers (namespace, instance_id, worker_id, lanes, capabilities, last_heartbeat_ms, ttl_ms, registered_at_ms)
		SELECT ?3, ?4 || printf('%06d', i), 'scalebench', json_array(?5), '[]', ?6, ?7, ?6 FROM n`
	if f.pg {
		q = `INSERT INTO workers (namespace, instance_id, worker_id, lanes, capabilities, last_heartbeat_ms, ttl_ms, registered_at_ms)
		SELECT $3, $4 || lpad(i::text, 6, '0'), 'scalebench', ARRAY[$5::text], '{}', $6::bigint, $7::bigint, $6::bigint
		FROM generate_series($1::int, $2::int) AS i`
	}
	for lo := first; lo <= last; lo += chunk {
		hi := min(last, lo+chunk-1)
		err := f.inTx(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, q, lo, hi, ns, prefix, fleetLane, hb.UnixMilli(), ttl.Milliseconds())
			return err
		})
		if err != nil {
			return fmt.Errorf("insert workers %s%06d..%06d: %w", prefix, lo, hi, err)
		}
	}
	return nil
}

// insertLeases writes the running executions idOf(group, i) for i in
// [first, last] in lane "fleet", each under a bound lease (epoch 1, attempt
// 1 of 3, no expiry of its own) held by prefix%06d of (i-1)/per + 1.
func (f *fleet) insertLeases(ctx context.Context, group, first, last int, prefix string, per int) error {
	q := `WITH RECURSIVE n(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM n WHERE i < ?2)
		INSERT INTO executions (id, namespace, lane, state, priority, max_attempts, created_at_ms, run_at_ms,
			attempts, epoch, ready, lease_id, holder, claimed_at_ms, expires_at_ms, bound, payload)
		SELECT printf('%08x-0000-7000-8000-%012x', ?3, i), ?4, ?5, 'running', 0, 3, ?6, ?6,
		       1, 1, 1, printf('%08x-0000-7000-9000-%012x', ?3, i), ?7 || printf('%06d', (i - 1) / ?8 + 1), ?9, ?10, 1, x'00'
		FROM n`
	if f.pg {
		q = `INSERT INTO executions (id, namespace, lane, state, priority, max_attempts, created_at_ms, run_at_ms,
			attempts, epoch, ready, lease_id, holder, claimed_at_ms, expires_at_ms, bound, payload)
		SELECT (lpad(to_hex($3::int), 8, '0') || '-0000-7000-8000-' || lpad(to_hex(i), 12, '0'))::uuid, $4, $5, 'running', 0, 3,
		       $6::bigint, $6::bigint, 1, 1, true,
		       (lpad(to_hex($3::int), 8, '0') || '-0000-7000-9000-' || lpad(to_hex(i), 12, '0'))::uuid,
		       $7 || lpad(((i - 1) / $8::int + 1)::text, 6, '0'), $9::bigint, $10::bigint, true, decode('00', 'hex')
		FROM generate_series($1::int, $2::int) AS i`
	}
	created := t0.Add(-time.Hour).UnixMilli()
	claimed := t0.Add(-time.Minute).UnixMilli()
	for lo := first; lo <= last; lo += chunk {
		hi := min(last, lo+chunk-1)
		err := f.inTx(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, q, lo, hi, group, ns, fleetLane, created, prefix, per, claimed, int64(never))
			return err
		})
		if err != nil {
			return fmt.Errorf("insert leases of group %d, %d..%d: %w", group, lo, hi, err)
		}
	}
	return nil
}

// exec runs one statement.
func (f *fleet) exec(ctx context.Context, q string, args ...any) error {
	_, err := f.db.ExecContext(ctx, q, args...)
	return err
}

// deleteGroup removes the executions idOf(group, 1..n), with their
// attempts, and the workers of prefix.
func (f *fleet) deleteGroup(ctx context.Context, group, n int, prefix string) error {
	lo, hi := idOf(group, 1), idOf(group, n)
	return f.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "DELETE FROM attempts WHERE execution_"+f.idRange(1), lo, hi); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM executions WHERE "+f.idRange(1), lo, hi); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "DELETE FROM workers WHERE namespace = "+f.ph(1)+" AND instance_id LIKE "+f.ph(2), ns, prefix+"%")
		return err
	})
}

// resetDying (re)creates the dying worker, alive, with n running bound
// leases, whatever a mark-dead and reclaim left of it.
func (f *fleet) resetDying(ctx context.Context, n int) error {
	if err := f.deleteGroup(ctx, groupDying, max(n, f.dying), dyingPrefix); err != nil {
		return err
	}
	if err := f.insertWorkers(ctx, dyingPrefix, 1, 1, t0, fleetTTL); err != nil {
		return err
	}
	if err := f.insertLeases(ctx, groupDying, 1, n, dyingPrefix, n); err != nil {
		return err
	}
	f.dying = n
	return nil
}

// resetLapsed (re)creates the lapsed workers (heartbeat 60 s before t0,
// TTL 30 s, not swept), each holding 10 running bound leases.
func (f *fleet) resetLapsed(ctx context.Context, workers int) error {
	if err := f.removeLapsed(ctx); err != nil {
		return err
	}
	if err := f.insertWorkers(ctx, lapsedPrefix, 1, workers, t0.Add(-time.Minute), fleetTTL); err != nil {
		return err
	}
	return f.insertLeases(ctx, groupLapsed, 1, workers*leasesPerWorker, lapsedPrefix, leasesPerWorker)
}

func (f *fleet) removeLapsed(ctx context.Context) error {
	return f.deleteGroup(ctx, groupLapsed, 10*lapsedWorkers*leasesPerWorker, lapsedPrefix)
}

// count runs a query of one integer.
func (f *fleet) count(ctx context.Context, q string, args ...any) (int, error) {
	var n int
	err := f.db.QueryRowContext(ctx, q, args...).Scan(&n)
	return n, err
}

// groupStates counts the executions of one group by state.
func (f *fleet) groupStates(ctx context.Context, group, n int) (map[string]int, error) {
	q := "SELECT state, count(*) FROM executions WHERE " + f.idRange(1) + " GROUP BY state"
	rows, err := f.db.QueryContext(ctx, q, idOf(group, 1), idOf(group, n))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var st string
		var c int
		if err := rows.Scan(&st, &c); err != nil {
			return nil, err
		}
		out[st] = c
	}
	return out, rows.Err()
}

// pool runs op(i) for i in [0, n) on goroutines goroutines; op(i) returns
// the latency to record. It returns the wall time and the latencies.
func pool(n, goroutines int, op func(i int) (time.Duration, error)) (time.Duration, []time.Duration, error) {
	var next atomic.Int64
	var mu sync.Mutex
	var all []time.Duration
	var first error
	var wg sync.WaitGroup
	began := time.Now()
	for range goroutines {
		wg.Go(func() {
			lat := make([]time.Duration, 0, n/goroutines+1)
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					break
				}
				d, err := op(i)
				if err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					next.Store(int64(n)) // stop the others
					break
				}
				lat = append(lat, d)
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return time.Since(began), all, first
}

// percentile returns the p-th percentile (0 < p < 1) of ds, in ms.
func percentile(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := min(len(ds)-1, int(math.Ceil(p*float64(len(ds))))-1)
	return float64(ds[max(i, 0)]) / float64(time.Millisecond)
}

// timed returns op's latency.
func timed(op func() error) (time.Duration, error) {
	began := time.Now()
	err := op()
	return time.Since(began), err
}

// heartbeat is one worker's heartbeat at now.
func (f *fleet) heartbeat(ctx context.Context, i int) error {
	_, err := f.store.HeartbeatWorker(ctx, service.HeartbeatWorkerArgs{Namespace: ns, InstanceID: instance(fleetPrefix, i), Now: now})
	return err
}

// BenchmarkScaleLivenessWrites runs the heartbeats of the whole fleet
// (HeartbeatWorker of every worker, from a pool of 128 goroutines), once as
// fast as the database takes them (its capacity, and the p99 latency then)
// and once paced at the rate the fleet needs at a 30 s TTL, a heartbeat per
// worker per TTL/3 (the p99 latency from each heartbeat's due time, so
// falling behind counts). It reports what the fleet needs: heartbeats only
// with bound leases, heartbeats plus a renewal per lease per LeaseTTL/3
// (30 s) with leases of their own.
func BenchmarkScaleLivenessWrites(b *testing.B) {
	ctx := context.Background()
	for _, e := range engines {
		b.Run(e.name, func(b *testing.B) {
			f := big(b, e.name)
			alive := f.workers + 1 // and the dying worker
			period := (fleetTTL / 3).Seconds()
			needed := float64(alive) / period
			var capacity, p99Sat, p99Paced, paced float64
			b.ResetTimer()
			for range b.N {
				wall, lat, err := pool(f.workers, hbCallers, func(i int) (time.Duration, error) {
					return timed(func() error { return f.heartbeat(ctx, i+1) })
				})
				if err != nil {
					b.Fatal(err)
				}
				capacity, p99Sat = float64(len(lat))/wall.Seconds(), percentile(lat, 0.99)

				// Paced: heartbeat i is due at start + i/needed.
				interval := time.Duration(float64(time.Second) / needed)
				start := time.Now()
				wall, lat, err = pool(f.workers, hbCallers, func(i int) (time.Duration, error) {
					due := start.Add(time.Duration(i) * interval)
					time.Sleep(time.Until(due))
					err := f.heartbeat(ctx, i+1)
					return time.Since(due), err
				})
				if err != nil {
					b.Fatal(err)
				}
				paced, p99Paced = float64(len(lat))/wall.Seconds(), percentile(lat, 0.99)
			}
			b.StopTimer()
			b.ReportMetric(needed, "heartbeats/s-needed")
			b.ReportMetric(needed, "writes/s-needed-bound")
			b.ReportMetric(needed+float64(f.leases+f.dying)/period, "writes/s-needed-own")
			b.ReportMetric(capacity, "heartbeats/s")
			b.ReportMetric(capacity/needed, "x-needed")
			b.ReportMetric(p99Sat, "p99-ms-saturated")
			b.ReportMetric(paced, "heartbeats/s-paced")
			b.ReportMetric(p99Paced, "p99-ms")
		})
	}
}

// claimOps remembers each engine's "empty" ops/s for the "fleet" ratio.
var (
	claimMu  sync.Mutex
	claimOps = map[string]float64{}
)

// BenchmarkScaleClaimComplete claims (Bound) and completes fresh waiting
// executions of lane "work" from 4 goroutines, each its own worker, against
// an empty registry (only the claiming workers) and beside the big fleet,
// in namespace "fleet" both; an op is a round of 1,000 claim+completes (so
// that -benchtime 1x measures something). Goal: fleet ≥ 0.9× empty.
func BenchmarkScaleClaimComplete(b *testing.B) {
	ctx := context.Background()
	for _, e := range engines {
		for _, where := range []string{"empty", "fleet"} {
			b.Run(e.name+"/"+where, func(b *testing.B) {
				var f *fleet
				if where == "fleet" {
					f = big(b, e.name)
				} else {
					f = e.fresh(b)
				}
				s := f.store
				for w := range claimers {
					_, err := s.RegisterWorker(ctx, service.RegisterWorkerArgs{Namespace: ns, WorkerID: "claimer",
						InstanceID: fmt.Sprint("claimer-", w), Lanes: []string{workLane}, TTL: time.Hour, Now: t0})
					if err != nil {
						b.Fatal(err)
					}
				}
				total := b.N * round
				for n := total + claimers; n > 0; {
					batch := make([]service.CreateExecutionArgs, min(n, 5000))
					for i := range batch {
						batch[i] = service.CreateExecutionArgs{Namespace: ns, Lane: workLane, Now: t0}
					}
					if _, err := s.CreateExecutions(ctx, batch); err != nil {
						b.Fatal(err)
					}
					n -= len(batch)
				}
				if err := f.analyze(ctx); err != nil {
					b.Fatal(err)
				}
				var next, worker atomic.Int64
				var wg sync.WaitGroup
				errs := make(chan error, claimers)
				b.ResetTimer()
				for range claimers {
					wg.Go(func() {
						inst := fmt.Sprint("claimer-", worker.Add(1)-1)
						for next.Add(1) <= int64(total) {
							l, err := s.ClaimExecution(ctx, service.ClaimArgs{Namespace: ns, InstanceID: inst, Bound: true, Now: now})
							if err == nil {
								err = s.CompleteExecution(ctx, service.CompleteArgs{Lease: l, Now: now})
							}
							if err != nil {
								errs <- err
								return
							}
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				close(errs)
				for err := range errs {
					b.Fatal(err)
				}
				ops := float64(total) / b.Elapsed().Seconds()
				b.ReportMetric(ops, "ops/s")
				b.ReportMetric(b.Elapsed().Seconds()*1e6/float64(total), "µs/claim+complete")
				claimMu.Lock()
				defer claimMu.Unlock()
				if where == "empty" {
					claimOps[e.name] = ops
				} else if base := claimOps[e.name]; base > 0 {
					b.ReportMetric(ops/base, "x-empty")
				}
			})
		}
	}
}

// BenchmarkScaleReclaimDeadWorker marks the worker of 10,000 bound leases
// dead, then reclaims expired leases until all 10,000 wait again, beside
// the fleet. Each op re-creates the worker and its running leases first,
// with the timer stopped. Goal: seconds.
func BenchmarkScaleReclaimDeadWorker(b *testing.B) {
	ctx := context.Background()
	for _, e := range engines {
		b.Run(e.name, func(b *testing.B) {
			f := big(b, e.name)
			if err := f.removeLapsed(ctx); err != nil { // only the dead worker's leases expire
				b.Fatal(err)
			}
			var mark, reclaim time.Duration
			batches := 0
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				if err := f.resetDying(ctx, dyingLeases); err != nil {
					b.Fatal(err)
				}
				if err := f.analyze(ctx); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				began := time.Now()
				err := f.store.MarkWorkerDead(ctx, service.MarkWorkerDeadArgs{Namespace: ns, InstanceID: instance(dyingPrefix, 1),
					Reason: "scalebench", Now: now})
				if err != nil {
					b.Fatal(err)
				}
				marked := time.Now()
				mark += marked.Sub(began)
				for total := 0; total < dyingLeases; {
					n, err := f.store.ReclaimExpiredLeases(ctx, now, 0)
					if err != nil {
						b.Fatal(err)
					}
					if n == 0 {
						b.Fatalf("reclaimed %d of %d, then nothing", total, dyingLeases)
					}
					total += n
					batches++
				}
				reclaim += time.Since(marked)
				b.StopTimer()
				st, err := f.groupStates(ctx, groupDying, dyingLeases)
				if err != nil {
					b.Fatal(err)
				}
				if st["waiting"] != dyingLeases {
					b.Fatalf("after the reclaim the dead worker's executions are %v, want %d waiting", st, dyingLeases)
				}
				b.StartTimer()
			}
			b.StopTimer()
			b.ReportMetric(mark.Seconds()*1000/float64(b.N), "markdead-ms")
			b.ReportMetric(reclaim.Seconds()*1000/float64(b.N), "reclaim-ms")
			b.ReportMetric((mark+reclaim).Seconds()/float64(b.N), "s-total")
			b.ReportMetric(float64(dyingLeases)/(mark+reclaim).Seconds()*float64(b.N), "leases/s")
		})
	}
}

// BenchmarkScaleListExpiredAndStats reads one page of ListExpiredLeases
// (Limit 100, AsOf now) and a Stats(now) beside the big fleet and beside a
// fleet of 10 workers (10 bound leases each), each with 100 lapsed workers
// holding 10 bound leases (the lapsed branch of both). Goal: flat.
func BenchmarkScaleListExpiredAndStats(b *testing.B) {
	ctx := context.Background()
	for _, e := range engines {
		for _, size := range []string{"small", "fleet"} {
			b.Run(e.name+"/"+size, func(b *testing.B) {
				var f *fleet
				if size == "fleet" {
					f = big(b, e.name)
				} else {
					f = e.fresh(b)
					if err := f.generate(ctx, 10, 0); err != nil {
						b.Fatal(err)
					}
				}
				if err := f.resetLapsed(ctx, lapsedWorkers); err != nil {
					b.Fatal(err)
				}
				if err := f.analyze(ctx); err != nil {
					b.Fatal(err)
				}
				want := lapsedWorkers * leasesPerWorker
				if err := checkExpired(ctx, f, want, lapsedWorkers); err != nil {
					b.Fatal(err)
				}
				var list, stats time.Duration
				b.ResetTimer()
				for range b.N {
					began := time.Now()
					page, err := f.store.ListExpiredLeases(ctx, service.ListExpiredLeasesArgs{AsOf: now, Limit: 100})
					if err != nil {
						b.Fatal(err)
					}
					if len(page.Leases) != 100 {
						b.Fatalf("a page of %d expired leases, want 100", len(page.Leases))
					}
					listed := time.Now()
					if _, err := f.store.Stats(ctx, now); err != nil {
						b.Fatal(err)
					}
					list += listed.Sub(began)
					stats += time.Since(listed)
				}
				b.StopTimer()
				b.ReportMetric(float64(list.Microseconds())/float64(b.N), "list-µs")
				b.ReportMetric(float64(stats.Microseconds())/float64(b.N), "stats-µs")
			})
		}
	}
}

// checkExpired checks that ListExpiredLeases (every page) and Stats see
// exactly want expired leases and lapsed lapsed workers in namespace
// "fleet".
func checkExpired(ctx context.Context, f *fleet, want, lapsed int) error {
	got := 0
	for after := ""; ; {
		page, err := f.store.ListExpiredLeases(ctx, service.ListExpiredLeasesArgs{AsOf: now, Namespace: ns, After: after, Limit: 1000})
		if err != nil {
			return err
		}
		got += len(page.Leases)
		if after = page.Next; after == "" {
			break
		}
	}
	if got != want {
		return fmt.Errorf("ListExpiredLeases: %d expired leases, want %d", got, want)
	}
	st, err := f.store.Stats(ctx, now)
	if err != nil {
		return err
	}
	for _, n := range st.Namespaces {
		if n.Namespace != ns {
			continue
		}
		if n.ExpiredLeases != want || n.WorkersLapsed != lapsed {
			return fmt.Errorf("Stats: %d expired leases and %d lapsed workers, want %d and %d",
				n.ExpiredLeases, n.WorkersLapsed, want, lapsed)
		}
		return nil
	}
	return errors.New("Stats: no namespace " + ns)
}

// BenchmarkScaleOwnLeaseRenewals is the fleet with leases of their own:
// 100,000 of its leases (those of its first 10,000 workers; all of a
// smaller fleet) become leases of their own (bound = 0, expiring 30 s
// after t0) and are each renewed once by RenewLease (TTL 30 s) from a pool
// of 64 goroutines, beside the rest of the fleet; then they are bound
// again. It reports the renewals per second the whole fleet's leases would
// need at LeaseTTL/3, the heartbeats beside them, the RenewLease calls per
// second this database took, and the ratio of the two.
func BenchmarkScaleOwnLeaseRenewals(b *testing.B) {
	ctx := context.Background()
	for _, e := range engines {
		b.Run(e.name, func(b *testing.B) {
			f := big(b, e.name)
			n := min(f.leases, 100_000)
			lo, hi := idOf(groupFleet, 1), idOf(groupFleet, n)
			setLeases := func(bound bool, expires int64) error {
				return f.exec(ctx, "UPDATE executions SET bound = "+boolSQL(f, bound)+", expires_at_ms = "+f.ph(1)+
					" WHERE "+f.idRange(2), expires, lo, hi)
			}
			setOwn := func() error { return setLeases(false, t0.Add(fleetTTL).UnixMilli()) }
			setBound := func() error { return setLeases(true, never) }
			if err := setOwn(); err != nil {
				b.Fatal(err)
			}
			defer func() {
				if err := setBound(); err != nil {
					b.Error(err)
				}
			}()
			if err := f.analyze(ctx); err != nil {
				b.Fatal(err)
			}
			leases, err := f.ownLeases(ctx, lo, hi)
			if err != nil {
				b.Fatal(err)
			}
			if len(leases) != n {
				b.Fatalf("%d leases of their own, want %d", len(leases), n)
			}
			var rate, p99 float64
			b.ResetTimer()
			for range b.N {
				wall, lat, err := pool(len(leases), callers, func(i int) (time.Duration, error) {
					return timed(func() error {
						_, err := f.store.RenewLease(ctx, service.RenewLeaseArgs{Lease: leases[i], TTL: fleetTTL, Now: now})
						return err
					})
				})
				if err != nil {
					b.Fatal(err)
				}
				rate, p99 = float64(len(lat))/wall.Seconds(), percentile(lat, 0.99)
			}
			b.StopTimer()
			period := (fleetTTL / 3).Seconds()
			needed := float64(f.leases+f.dying) / period
			b.ReportMetric(needed, "renewals/s-needed")
			b.ReportMetric(float64(f.workers+1)/period, "heartbeats/s-needed")
			b.ReportMetric(rate, "renewals/s")
			b.ReportMetric(rate/needed, "x-needed")
			b.ReportMetric(p99, "p99-ms")
		})
	}
}

func boolSQL(f *fleet, v bool) string {
	switch {
	case f.pg && v:
		return "true"
	case f.pg:
		return "false"
	case v:
		return "1"
	}
	return "0"
}

// ph is the i-th placeholder.
func (f *fleet) ph(i int) string {
	if f.pg {
		return fmt.Sprintf("$%d", i)
	}
	return fmt.Sprintf("?%d", i)
}

// idRange is "id BETWEEN" the placeholders i and i+1.
func (f *fleet) idRange(i int) string {
	if f.pg {
		return fmt.Sprintf("id BETWEEN $%d::uuid AND $%d::uuid", i, i+1)
	}
	return fmt.Sprintf("id BETWEEN ?%d AND ?%d", i, i+1)
}

// ownLeases reads the leases of the executions with ids in [lo, hi].
func (f *fleet) ownLeases(ctx context.Context, lo, hi string) ([]service.Lease, error) {
	rows, err := f.db.QueryContext(ctx, "SELECT id, lease_id, epoch, holder FROM executions WHERE "+f.idRange(1)+" ORDER BY id", lo, hi)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []service.Lease
	for rows.Next() {
		var id, lease, holder string
		var epoch int64
		if err := rows.Scan(&id, &lease, &epoch, &holder); err != nil {
			return nil, err
		}
		l := service.Lease{Namespace: ns, InstanceID: holder, Lane: fleetLane, Epoch: epoch, AttemptIndex: 1}
		if l.ExecutionID, err = uuid.Parse(id); err != nil {
			return nil, err
		}
		if l.LeaseID, err = uuid.Parse(lease); err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// TestGenerator builds a fleet of 200 workers (2,000 bound leases), a
// dying worker of 100 and 10 lapsed workers of 10, and checks the rows
// and what the Store sees of them: the lapsed leases expired, then the dying
// worker's too once it is marked dead, all of them reclaimed, and the dying
// worker re-created as BenchmarkScaleReclaimDeadWorker does.
func TestGenerator(t *testing.T) {
	ctx := context.Background()
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			if e.name == "postgres" && pgtest.URL(t) == "" {
				t.Skip(pgtest.SkipMessage)
			}
			t.Parallel()
			f := e.fresh(t)
			const workers, dying, lapsed = 200, 100, 10
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			must(f.generate(ctx, workers, dying))
			must(f.resetLapsed(ctx, lapsed))
			counts := map[string]int{
				"SELECT count(*) FROM workers": workers + 1 + lapsed,
				"SELECT count(*) FROM executions WHERE state = 'running' AND bound = " + boolSQL(f, true):                   workers*leasesPerWorker + dying + lapsed*leasesPerWorker,
				"SELECT count(DISTINCT lease_id) FROM executions":                                                           workers*leasesPerWorker + dying + lapsed*leasesPerWorker,
				"SELECT count(DISTINCT holder) FROM executions":                                                             workers + 1 + lapsed,
				"SELECT count(*) FROM executions WHERE expires_at_ms <> 9223372036854775807 OR epoch <> 1 OR attempts <> 1": 0,
			}
			if !f.pg {
				counts["SELECT count(*) FROM worker_lanes WHERE lane = 'fleet'"] = workers + 1 + lapsed
			}
			for q, want := range counts {
				got, err := f.count(ctx, q)
				must(err)
				if got != want {
					t.Errorf("%s = %d, want %d", q, got, want)
				}
			}
			st, err := f.store.Stats(ctx, now)
			must(err)
			if len(st.Namespaces) != 1 || st.Namespaces[0].WorkersAlive != workers+1 {
				t.Fatalf("Stats: %+v, want %d alive workers in %q", st.Namespaces, workers+1, ns)
			}
			if l := st.Namespaces[0].Lanes; len(l) != 1 || l[0].Running != workers*leasesPerWorker+dying+lapsed*leasesPerWorker {
				t.Errorf("Stats lanes: %+v", l)
			}
			must(checkExpired(ctx, f, lapsed*leasesPerWorker, lapsed))
			must(f.store.MarkWorkerDead(ctx, service.MarkWorkerDeadArgs{Namespace: ns, InstanceID: instance(dyingPrefix, 1), Reason: "test", Now: now}))
			must(checkExpired(ctx, f, lapsed*leasesPerWorker+dying, lapsed))
			n, err := f.store.ReclaimExpiredLeases(ctx, now, 0)
			must(err)
			if n != lapsed*leasesPerWorker+dying {
				t.Errorf("reclaimed %d, want %d", n, lapsed*leasesPerWorker+dying)
			}
			must(checkExpired(ctx, f, 0, lapsed))
			for _, g := range []struct{ group, n int }{{groupDying, dying}, {groupLapsed, lapsed * leasesPerWorker}} {
				states, err := f.groupStates(ctx, g.group, g.n)
				must(err)
				if states["waiting"] != g.n || len(states) != 1 {
					t.Errorf("group %d after the reclaim: %v, want %d waiting", g.group, states, g.n)
				}
			}
			states, err := f.groupStates(ctx, groupFleet, workers*leasesPerWorker)
			must(err)
			if states["running"] != workers*leasesPerWorker || len(states) != 1 {
				t.Errorf("the fleet after the reclaim: %v, want all running", states)
			}
			// Re-created, the dying worker holds its leases again.
			must(f.resetDying(ctx, dying))
			must(f.removeLapsed(ctx))
			must(checkExpired(ctx, f, 0, 0))
			states, err = f.groupStates(ctx, groupDying, dying)
			must(err)
			if states["running"] != dying || len(states) != 1 {
				t.Errorf("the dying worker re-created: %v, want %d running", states, dying)
			}
			lease := service.Lease{Namespace: ns, InstanceID: instance(dyingPrefix, 1), Bound: true, Epoch: 1, AttemptIndex: 1}
			lease.ExecutionID, lease.LeaseID = uuid.MustParse(idOf(groupDying, 1)), uuid.MustParse(leaseOf(groupDying, 1))
			if _, err := f.store.RenewLease(ctx, service.RenewLeaseArgs{Lease: lease, Now: now}); err != nil {
				t.Errorf("RenewLease of a re-created bound lease: %v", err)
			}
			must(f.store.CompleteExecution(ctx, service.CompleteArgs{Lease: lease, Now: now}))
		})
	}
}
