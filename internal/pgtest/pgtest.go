// Package pgtest gives each test a PostgreSQL schema of its own on the server
// named by ROSTER_TEST_POSTGRES, created for the test and dropped after it.
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

// SkipMessage says how to run the PostgreSQL tests.
const SkipMessage = EnvURL + " is unset: PostgreSQL tests skipped; set it (e.g. " +
	EnvURL + "=postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable) to run them"

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
