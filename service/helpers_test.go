package service

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rosterdb/roster/internal/pgtest"
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

// backend is one engine configuration the conformance suite runs on: every
// behavioural test of the Store's API runs once per backend.
type backend struct {
	name string
	// postgres: the engine is PostgreSQL (else SQLite).
	postgres bool
	// shared: several Stores may open one location (a file, a server);
	// a private in-memory database is not shared.
	shared bool
	// fresh returns the location of a new, empty database, removed when
	// the test ends.
	fresh func(t testing.TB) string
	// migrated: fresh returns a database its owner already migrated, for a
	// role that may not change the schema: Stores open it WithoutMigrate.
	migrated bool
	// pooled: a pooler in transaction pooling mode stands between (no
	// LISTEN: workers poll for other Stores' work).
	pooled bool
}

// backends lists the engines under test. A new engine adds one line here.
func backends() []backend {
	return []backend{
		{name: "sqlite-memory", fresh: func(testing.TB) string { return ":memory:" }},
		{name: "sqlite-file", shared: true, fresh: func(t testing.TB) string {
			return filepath.Join(t.TempDir(), "roster.db")
		}},
		{name: "postgres", postgres: true, shared: true, fresh: pgtest.Fresh},
		// README "PostgreSQL in production" (whatever the server's defaults, least privilege): a
		// role with SELECT, INSERT, UPDATE and DELETE only, whose defaults
		// are SERIALIZABLE, no timeouts and another search_path.
		{name: "postgres-app", postgres: true, shared: true, migrated: true, fresh: func(t testing.TB) string {
			return pgtest.FreshApp(t, migrateAsOwner)
		}},
		// README "Behind PgBouncer": the same role through PgBouncer in
		// transaction pooling mode.
		{name: "postgres-pgbouncer", postgres: true, shared: true, migrated: true, pooled: true, fresh: func(t testing.TB) string {
			return pgtest.FreshPgBouncer(t, migrateAsOwner)
		}},
	}
}

// migrateAsOwner brings the schema at ownerURL up to date, as its owner.
func migrateAsOwner(t testing.TB, ownerURL string) {
	t.Helper()
	s, err := Open(context.Background(), ownerURL)
	if err != nil {
		t.Fatalf("migrating as the owner: %v", err)
	}
	must(t, s.Close())
}

// direct returns a location that reaches the database of loc as its owner,
// without a pooler in between (fixtures).
func (b backend) direct(t testing.TB, loc string) string {
	if b.postgres {
		return pgtest.Direct(t, loc)
	}
	return loc
}

// open opens a Store at loc on a fake clock, closed when the test ends.
func (b backend) open(t testing.TB, loc string, opts ...Option) (*Store, *fakeClock) {
	t.Helper()
	clock := newClock()
	if b.migrated {
		opts = append([]Option{WithoutMigrate()}, opts...)
	}
	s, err := Open(context.Background(), loc, append([]Option{WithClock(clock.Now)}, opts...)...)
	if err != nil {
		t.Fatalf("%s: Open: %v", b.name, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, clock
}

// newStore opens a Store on a fresh database of the backend.
func (b backend) newStore(t testing.TB, opts ...Option) (*Store, *fakeClock) {
	t.Helper()
	return b.open(t, b.fresh(t), opts...)
}

// conformance runs a behavioural test once per backend, the backends in
// parallel.
func conformance(t *testing.T, f func(t *testing.T, b backend)) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f(t, b)
		})
	}
}

// validationOnly runs f on one backend (an in-memory SQLite): for tests of
// what the Store refuses before any engine is involved (ErrInvalidInput
// naming the field, nothing written), which is the same code whatever the
// engine. A refusal that comes from a database rule belongs in conformance.
func validationOnly(t *testing.T, f func(t *testing.T, b backend)) {
	b := backends()[0]
	t.Run(b.name, func(t *testing.T) {
		t.Parallel()
		f(t, b)
	})
}

// conformanceShared is conformance on the backends where several Stores share
// one database.
func conformanceShared(t *testing.T, f func(t *testing.T, b backend)) {
	for _, b := range backends() {
		if b.shared {
			t.Run(b.name, func(t *testing.T) {
				t.Parallel()
				f(t, b)
			})
		}
	}
}

// newStore opens a private in-memory Store on a fake clock (fuzzing and
// benchmarks of logic that no engine changes).
func newStore(t testing.TB, opts ...Option) (*Store, *fakeClock) {
	t.Helper()
	return backends()[0].newStore(t, opts...)
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

// exec runs SQL on the database at loc outside roster (fixtures, faults).
func (b backend) exec(t testing.TB, loc, query string) {
	t.Helper()
	if b.postgres {
		conn, err := pgx.Connect(context.Background(), b.direct(t, loc))
		must(t, err)
		defer conn.Close(context.Background())
		_, err = conn.Exec(context.Background(), query)
		must(t, err)
		return
	}
	db, err := sql.Open("sqlite", loc)
	must(t, err)
	defer db.Close()
	_, err = db.Exec(query)
	must(t, err)
}

// openImpatient opens a Store at loc that gives up quickly on a lock held
// elsewhere (SQLite's busy timeout, PostgreSQL's lock_timeout), so that
// blockWrites makes its writes fail with ErrUnavailable at once.
func (b backend) openImpatient(t testing.TB, loc string, opts ...Option) (*Store, *fakeClock) {
	t.Helper()
	if b.postgres {
		return b.open(t, loc+"&lock_timeout=50", opts...)
	}
	return b.open(t, loc, append([]Option{WithBusyTimeout(20 * time.Millisecond)}, opts...)...)
}

// blockWrites makes the database at loc refuse every write for a while, as a
// database that is locked or away does: another connection holds the write
// lock (SQLite: BEGIN IMMEDIATE) or EXCLUSIVE locks on roster's tables
// (PostgreSQL; reads still work on both). A Store opened with openImpatient
// then fails each write with ErrUnavailable. The returned function ends it.
func (b backend) blockWrites(t testing.TB, loc string) (unblock func()) {
	t.Helper()
	ctx := context.Background()
	var once sync.Once
	if b.postgres {
		conn, err := pgx.Connect(ctx, b.direct(t, loc))
		must(t, err)
		_, err = conn.Exec(ctx, "BEGIN; LOCK TABLE workers, worker_events, executions, attempts, agents IN EXCLUSIVE MODE")
		must(t, err)
		unblock = func() {
			once.Do(func() {
				_, _ = conn.Exec(ctx, "ROLLBACK")
				_ = conn.Close(ctx)
			})
		}
	} else {
		db, err := sql.Open("sqlite", loc)
		must(t, err)
		conn, err := db.Conn(ctx)
		must(t, err)
		_, err = conn.ExecContext(ctx, "BEGIN IMMEDIATE")
		must(t, err)
		unblock = func() {
			once.Do(func() {
				_, _ = conn.ExecContext(ctx, "ROLLBACK")
				_ = conn.Close()
				_ = db.Close()
			})
		}
	}
	t.Cleanup(unblock)
	return unblock
}
