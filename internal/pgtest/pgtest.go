// Package pgtest gives each test a PostgreSQL schema of its own on the server
// named by ROSTER_TEST_POSTGRES, created for the test and dropped after it.
//
// Besides the server's superuser (Fresh), it offers the targets a production
// deployment looks like: a least-privilege role whose defaults are hostile
// (FreshApp), and the same role through PgBouncer in transaction pooling mode
// (FreshPgBouncer, from ROSTER_TEST_PGBOUNCER).
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// EnvURL names the environment variable that holds the test server's URL.
const EnvURL = "ROSTER_TEST_POSTGRES"

// EnvPgBouncer names the environment variable that holds the URL of a
// PgBouncer in transaction pooling mode in front of the test server (its
// user is replaced by AppRole; .ci/run starts one).
const EnvPgBouncer = "ROSTER_TEST_PGBOUNCER"

// AppRole is the role FreshApp and FreshPgBouncer run as: it may read and
// write roster's tables and nothing else, and its defaults are hostile
// (HostileDefaults).
const AppRole = "roster_test_app"

// HostileDefaults are AppRole's session defaults: everything roster relies on
// set the other way, as a database or role configured for another
// application may have it.
var HostileDefaults = map[string]string{
	"default_transaction_isolation":       "serializable",
	"statement_timeout":                   "0",
	"lock_timeout":                        "0",
	"idle_in_transaction_session_timeout": "0",
	"search_path":                         "pg_catalog",
}

// SkipMessage says how to run the PostgreSQL tests.
const SkipMessage = EnvURL + " is unset: PostgreSQL tests skipped; set it (e.g. " +
	EnvURL + "=postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable) to run them"

// SkipPgBouncer says how to run the tests through PgBouncer.
const SkipPgBouncer = EnvPgBouncer + " is unset: tests through PgBouncer skipped; start a PgBouncer in " +
	"transaction pooling mode in front of " + EnvURL + "'s server (as .ci/run does) and set it (e.g. " +
	EnvPgBouncer + "=postgres://127.0.0.1:6432/postgres?sslmode=disable) to run them"

// URL returns the test server's URL, or "" when none is configured. Under CI
// (CI set) a missing server is a failure, never a skip.
func URL(t testing.TB) string {
	u := os.Getenv(EnvURL)
	if u == "" && os.Getenv("CI") != "" {
		t.Fatalf("CI must run the PostgreSQL tests: %s is unset", EnvURL)
	}
	return u
}

var (
	adminOnce sync.Once
	adminPool *pgxpool.Pool
	adminErr  error
)

func admin(t testing.TB) *pgxpool.Pool {
	adminOnce.Do(func() {
		adminPool, adminErr = pgxpool.New(context.Background(), os.Getenv(EnvURL))
	})
	if adminErr != nil {
		t.Fatalf("pgtest: connecting to %s: %v", EnvURL, adminErr)
	}
	return adminPool
}

// Fresh creates an empty schema for t and returns a URL whose search_path is
// that schema; the schema is dropped when t ends.
func Fresh(t testing.TB) string {
	t.Helper()
	base := URL(t)
	if base == "" {
		t.Skip(SkipMessage)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "roster_test_" + hex.EncodeToString(b[:])
	pool := admin(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("pgtest: create schema: %v", err)
	}
	t.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("pgtest: drop schema %s: %v", schema, err)
		}
	})
	return WithSchema(t, base, schema)
}

// WithSchema returns base with its search_path set to schema.
func WithSchema(t testing.TB, base, schema string) string {
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("pgtest: %s: %v", EnvURL, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

var (
	roleOnce sync.Once
	roleErr  error
)

// ensureAppRole creates AppRole with HostileDefaults, once per process and
// under a lock across processes (test binaries run in parallel).
func ensureAppRole(t testing.TB) {
	t.Helper()
	pool := admin(t)
	roleOnce.Do(func() {
		ctx := context.Background()
		tx, err := pool.Begin(ctx)
		if err != nil {
			roleErr = err
			return
		}
		defer func() { _ = tx.Rollback(ctx) }()
		stmts := []string{
			"SELECT pg_advisory_xact_lock(hashtext('roster.pgtest.role'))",
			`DO $$ BEGIN CREATE ROLE ` + AppRole + ` LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$`,
		}
		for k, v := range HostileDefaults {
			stmts = append(stmts, "ALTER ROLE "+AppRole+" SET "+k+" = '"+v+"'")
		}
		for _, s := range stmts {
			if _, err := tx.Exec(ctx, s); err != nil {
				roleErr = err
				return
			}
		}
		roleErr = tx.Commit(ctx)
	})
	if roleErr != nil {
		t.Fatalf("pgtest: creating role %s: %v", AppRole, roleErr)
	}
}

// FreshApp creates a schema for t, has migrate bring it up to date as its
// owner (the server's superuser, at ownerURL), grants AppRole SELECT, INSERT,
// UPDATE and DELETE on its tables (and USAGE on the schema and its
// sequences), and returns a URL that connects as AppRole with that
// search_path. AppRole cannot create anything there.
func FreshApp(t testing.TB, migrate func(t testing.TB, ownerURL string)) string {
	t.Helper()
	return appURL(t, Fresh(t), migrate)
}

// FreshPgBouncer is FreshApp through the PgBouncer of EnvPgBouncer (in
// transaction pooling mode), with roster's roster_pgbouncer=true. It skips
// when EnvPgBouncer is unset, except under CI, where that is a failure.
func FreshPgBouncer(t testing.TB, migrate func(t testing.TB, ownerURL string)) string {
	t.Helper()
	bouncerURL(t) // skips before anything is made
	return ThroughPgBouncer(t, FreshApp(t, migrate))
}

// ThroughPgBouncer returns loc (a URL of this package's) going through the
// PgBouncer of EnvPgBouncer as the same user, with roster_pgbouncer=true.
// It skips when EnvPgBouncer is unset, except under CI.
func ThroughPgBouncer(t testing.TB, loc string) string {
	t.Helper()
	b, err := url.Parse(bouncerURL(t))
	if err != nil {
		t.Fatalf("pgtest: %s: %v", EnvPgBouncer, err)
	}
	u, err := url.Parse(loc)
	if err != nil {
		t.Fatal(err)
	}
	u.Host, u.Path = b.Host, b.Path
	q := u.Query()
	q.Set("roster_pgbouncer", "true")
	u.RawQuery = q.Encode()
	return u.String()
}

func bouncerURL(t testing.TB) string {
	t.Helper()
	bouncer := os.Getenv(EnvPgBouncer)
	if bouncer == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI must run the tests through PgBouncer: %s is unset", EnvPgBouncer)
		}
		t.Skip(SkipPgBouncer)
	}
	return bouncer
}

func appURL(t testing.TB, owner string, migrate func(t testing.TB, ownerURL string)) string {
	t.Helper()
	ensureAppRole(t)
	migrate(t, owner)
	ou, err := url.Parse(owner)
	if err != nil {
		t.Fatal(err)
	}
	schema := ou.Query().Get("search_path")
	ctx := context.Background()
	for _, s := range []string{
		"GRANT USAGE ON SCHEMA " + schema + " TO " + AppRole,
		"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA " + schema + " TO " + AppRole,
		"GRANT USAGE ON ALL SEQUENCES IN SCHEMA " + schema + " TO " + AppRole,
		// As the README's production setup: tables a later migration
		// creates (or a migration down and up again recreates) are the
		// application's too.
		"ALTER DEFAULT PRIVILEGES IN SCHEMA " + schema + " GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO " + AppRole,
		"ALTER DEFAULT PRIVILEGES IN SCHEMA " + schema + " GRANT USAGE ON SEQUENCES TO " + AppRole,
	} {
		if _, err := admin(t).Exec(ctx, s); err != nil {
			t.Fatalf("pgtest: %s: %v", s, err)
		}
	}
	u, err := url.Parse(owner)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(AppRole)
	return u.String()
}

// Direct returns a URL that reaches the schema of loc (a URL FreshApp or
// FreshPgBouncer returned, or Fresh's) directly, as the server's superuser:
// for fixtures that change what the application role may not.
func Direct(t testing.TB, loc string) string {
	t.Helper()
	u, err := url.Parse(loc)
	if err != nil {
		t.Fatal(err)
	}
	return WithSchema(t, URL(t), u.Query().Get("search_path"))
}
