// Command vetdb runs a command (sqlc vet) against a PostgreSQL schema of its
// own that holds roster's migrated schema: it creates the schema on the
// server of ROSTER_TEST_POSTGRES (default: the local server as postgres),
// migrates it, runs the command with ROSTER_VET_POSTGRES set to a URL whose
// search_path is that schema, drops the schema, and exits with the
// command's status. Where no server answers it says so and exits 0, except
// under CI, which must vet every engine.
//
//	go run ./internal/vetdb go run github.com/sqlc-dev/sqlc/cmd/sqlc vet -f sqlc.postgres-vet.yaml
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rosterdb/roster/internal/engine"
	"github.com/rosterdb/roster/internal/engine/postgres"
)

// defaultURL is the server of the tests and CI when ROSTER_TEST_POSTGRES is
// not set.
const defaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: vetdb COMMAND [ARG...]")
		os.Exit(2)
	}
	os.Exit(run(os.Args[1], os.Args[2:]))
}

func run(name string, args []string) int {
	base := os.Getenv("ROSTER_TEST_POSTGRES")
	if base == "" {
		base = defaultURL
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		if os.Getenv("CI") != "" {
			fmt.Fprintf(os.Stderr, "vetdb: CI must vet the PostgreSQL queries, but no server answers: %v\n", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "vetdb: no PostgreSQL server answers (%v): the PostgreSQL queries are not vetted here\n", err)
		return 0
	}
	defer admin.Close(context.Background())
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "roster_vet_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		fmt.Fprintf(os.Stderr, "vetdb: create schema: %v\n", err)
		return 1
	}
	defer func() {
		if _, err := admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			fmt.Fprintf(os.Stderr, "vetdb: drop schema %s: %v\n", schema, err)
		}
	}()
	loc, err := withSearchPath(base, schema)
	if err != nil {
		fmt.Fprintf(os.Stderr, "vetdb: %v\n", err)
		return 1
	}
	e, err := postgres.Open(ctx, loc, engine.Config{
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Migrate: true, Admission: 10 * time.Second,
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "vetdb: migrate: %v\n", err)
		return 1
	}
	_ = e.Close()
	cmd := exec.Command(name, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "ROSTER_VET_POSTGRES="+loc)
	if err := cmd.Run(); err != nil {
		if x, ok := err.(*exec.ExitError); ok {
			return x.ExitCode()
		}
		fmt.Fprintf(os.Stderr, "vetdb: %v\n", err)
		return 1
	}
	return 0
}

// withSearchPath returns base with its search_path set to schema.
func withSearchPath(base, schema string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("ROSTER_TEST_POSTGRES: %w", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}
