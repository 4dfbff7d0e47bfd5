package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rosterdb/roster/internal/pgtest"
	sqliteschema "github.com/rosterdb/roster/schema/sqlite"
	"github.com/rosterdb/roster/service"
)

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestCLIHelpAndErrors(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		code     int
		contains string
	}{
		{nil, 2, "Usage:"},
		{[]string{"--help"}, 0, "Usage:"},
		{[]string{"nope"}, 2, `unknown command "nope"`},
		{[]string{"workers"}, 2, "missing subcommand"},
		{[]string{"workers", "--help"}, 0, "list|sweep"},
		{[]string{"workers", "fly"}, 2, `unknown subcommand "fly"`},
		{[]string{"workers", "list", "--help"}, 0, "-namespace"},
		{[]string{"agents", "get", "--help"}, 0, "Usage: roster agents get [flags] ID"},
		{[]string{"workers", "list", "--bogus"}, 2, "flag provided but not defined"},
		{[]string{"agents", "get"}, 2, "want 1 argument"},
		{[]string{"workers", "list", "--db", filepath.Join(t.TempDir(), "missing.db")}, 1, "no database at"},
		{[]string{"migrate", "force", "x", "--db", "y"}, 1, "not a number"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := runCLI(t, tc.args...)
			if code != tc.code || !strings.Contains(out+errOut, tc.contains) {
				t.Fatalf("exit %d (want %d)\nstdout: %s\nstderr: %s", code, tc.code, out, errOut)
			}
		})
	}
}

func TestCLIOperatesADatabase(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "fleet.db")
	if code, out, errOut := runCLI(t, "migrate", "up", "--db", path); code != 0 || !strings.Contains(out, "VERSION") {
		t.Fatalf("migrate up: %d %s %s", code, out, errOut)
	}
	s, err := service.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Hour)
	for _, inst := range []string{"a", "b"} {
		if _, err := s.RegisterWorker(ctx, service.RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: inst,
			Lanes: []string{"x,y"}, TTL: time.Minute, Now: past}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.CreateExecution(ctx, service.CreateExecutionArgs{Namespace: "ns", Lane: "x,y", Now: past}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ClaimExecution(ctx, service.ClaimArgs{Namespace: "ns", InstanceID: "a", LeaseTTL: time.Second, Now: past}); err != nil {
		t.Fatal(err)
	}
	if err := s.InsertAgent(ctx, service.Agent{ID: "ag", State: service.AgentRunning, Provider: "p", OwnerActor: "o",
		OwnerPeerClass: "c", OwnerWriteNamespace: "ns", SpawnFingerprint: "f"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	var page service.WorkerPage
	code, out, errOut := runCLI(t, "workers", "list", "--db", path, "--json", "--limit", "1")
	if code != 0 || json.Unmarshal([]byte(out), &page) != nil || len(page.Workers) != 1 || page.Next == "" {
		t.Fatalf("workers list --json: %d %s %s", code, out, errOut)
	}
	code, out, _ = runCLI(t, "workers", "list", "--db", path, "--after", page.Next)
	if code != 0 || !strings.Contains(out, `"x,y"`) || !strings.Contains(out, "lapsed") || !strings.Contains(out, " b ") {
		t.Fatalf("workers list page 2: %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, "leases", "expired", "--db", path)
	if code != 0 || !strings.Contains(out, "EXPIRED AT") || strings.Count(out, "\n") != 2 {
		t.Fatalf("leases expired: %d\n%s", code, out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"workers", "sweep"}, `"swept": 2`},
		{[]string{"leases", "reclaim"}, `"reclaimed": 1`},
		{[]string{"agents", "terminate-live"}, `"terminated": 1`},
	} {
		code, out, errOut := runCLI(t, append(tc.args, "--db", path, "--json")...)
		if code != 0 || !strings.Contains(out, tc.want) {
			t.Fatalf("%v: %d %s %s", tc.args, code, out, errOut)
		}
	}
	code, out, _ = runCLI(t, "events", "list", "--db", path, "--namespace", "ns")
	if code != 0 || strings.Count(out, "ttl_swept") != 2 {
		t.Fatalf("events list: %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, "agents", "get", "ag", "--db", path)
	if code != 0 || !strings.Contains(out, "host_restart") {
		t.Fatalf("agents get: %d\n%s", code, out)
	}
	code, _, errOut = runCLI(t, "agents", "get", "missing", "--db", path)
	if code != 1 || !strings.Contains(errOut, "not found") {
		t.Fatalf("agents get missing: %d %s", code, errOut)
	}
	code, out, _ = runCLI(t, "agents", "list", "--db", path, "--state", "terminal", "--json")
	if code != 0 || !strings.Contains(out, `"ID": "ag"`) {
		t.Fatalf("agents list: %d\n%s", code, out)
	}
	code, _, errOut = runCLI(t, "agents", "list", "--db", path, "--state", "bogus")
	if code != 1 || !strings.Contains(errOut, "invalid input") {
		t.Fatalf("agents list bad state: %d %s", code, errOut)
	}

	// migrate down / version / force / up.
	code, out, _ = runCLI(t, "migrate", "down", "--db", path, "--steps", "1", "--json")
	latest := latestVersion(t)
	if code != 0 || !strings.Contains(out, fmt.Sprintf(`"version": %d`, latest-1)) {
		t.Fatalf("migrate down: %d %s", code, out)
	}
	code, out, _ = runCLI(t, "migrate", "force", "1", "--db", path, "--json")
	if code != 0 || !strings.Contains(out, `"version": 1`) {
		t.Fatalf("migrate force: %d %s", code, out)
	}
	code, out, _ = runCLI(t, "migrate", "force", fmt.Sprint(latest-1), "--db", path)
	if code != 0 {
		t.Fatalf("migrate force 3: %d %s", code, out)
	}
	code, out, _ = runCLI(t, "migrate", "up", "--db", path, "--json")
	if code != 0 || !strings.Contains(out, fmt.Sprintf(`"version": %d`, latest)) {
		t.Fatalf("migrate up again: %d %s", code, out)
	}
}

func TestCLIDemo(t *testing.T) {
	code, out, errOut := runCLI(t, "demo")
	if code != 0 {
		t.Fatalf("demo: %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"lease lost", "re-claims", "created=false", "terminated 2 live agents"} {
		if !strings.Contains(out, want) {
			t.Fatalf("demo output lacks %q:\n%s", want, out)
		}
	}
	path := filepath.Join(t.TempDir(), "demo.db")
	if code, _, errOut := runCLI(t, "demo", "--db", path); code != 0 {
		t.Fatalf("demo --db: %d %s", code, errOut)
	}
	if code, out, _ := runCLI(t, "agents", "list", "--db", path); code != 0 || !strings.Contains(out, "agent-8") {
		t.Fatalf("the demo's file: %d %s", code, out)
	}
}

// latestVersion is the number of the newest migration this build knows.
func latestVersion(t *testing.T) int {
	t.Helper()
	ups, err := fs.Glob(sqliteschema.FS, "*.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	return len(ups)
}

// --db takes a PostgreSQL URL, and its password is never printed.
func TestCLIOnPostgres(t *testing.T) {
	const secret = "n0t-Sh0wn"
	u, err := url.Parse(pgtest.Fresh(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), secret) // trust auth ignores it
	db := u.String()
	for _, args := range [][]string{
		{"migrate", "up", "--db", db},
		{"workers", "list", "--db", db, "--json"},
		{"migrate", "version", "--db", db},
	} {
		code, out, errOut := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args[:2], code, out, errOut)
		}
		if strings.Contains(out+errOut, secret) {
			t.Fatalf("%v printed the password:\n%s%s", args[:2], out, errOut)
		}
	}
	// A failing connection names the database, not the password.
	u.Path = "/no_such_database_here"
	code, out, errOut := runCLI(t, "workers", "list", "--db", u.String())
	if code != 1 || strings.Contains(out+errOut, secret) {
		t.Fatalf("exit %d, output:\n%s%s", code, out, errOut)
	}
}
