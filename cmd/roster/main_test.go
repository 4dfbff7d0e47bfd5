package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
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

// latestVersion is the number of the newest migration this build knows.
func latestVersion(t *testing.T) int {
	t.Helper()
	ups, err := fs.Glob(sqliteschema.FS, "*.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	return len(ups)
}

// fleet is a database file seeded with a little of everything, an hour ago:
// two lapsed workers (ns/a holds an expired lease), one live worker, work in
// two lanes, and two agents.
type fleet struct {
	path      string
	running   uuid.UUID // claimed by ns/a, lease expired
	waiting   uuid.UUID
	scheduled uuid.UUID
}

func seed(t *testing.T) fleet {
	t.Helper()
	ctx := context.Background()
	f := fleet{path: filepath.Join(t.TempDir(), "fleet.db")}
	s, err := service.Open(ctx, f.path)
	must(t, err)
	defer s.Close()
	past := time.Now().Add(-time.Hour)
	for _, inst := range []string{"a", "b"} {
		_, err := s.RegisterWorker(ctx, service.RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: inst,
			Lanes: []string{"x,y"}, TTL: time.Minute, Now: past})
		must(t, err)
	}
	_, err = s.RegisterWorker(ctx, service.RegisterWorkerArgs{Namespace: "other", WorkerID: "w", InstanceID: "live", TTL: time.Hour})
	must(t, err)
	f.running, err = s.CreateExecution(ctx, service.CreateExecutionArgs{Namespace: "ns", Lane: "x,y", Payload: []byte("resize cat.jpg"), Now: past, MaxAttempts: 3})
	must(t, err)
	_, err = s.ClaimExecution(ctx, service.ClaimArgs{Namespace: "ns", InstanceID: "a", LeaseTTL: time.Second, Now: past})
	must(t, err)
	f.waiting, err = s.CreateExecution(ctx, service.CreateExecutionArgs{Namespace: "ns", Lane: "z", Now: past})
	must(t, err)
	f.scheduled, err = s.CreateExecution(ctx, service.CreateExecutionArgs{Namespace: "ns", Lane: "z", RunAt: time.Now().Add(time.Hour)})
	must(t, err)
	must(t, s.PutSchedule(ctx, service.Schedule{Namespace: "ns", Name: "nightly", Every: 24 * time.Hour,
		Template: service.CreateExecutionArgs{Lane: "reports"}}))
	for _, id := range []string{"ag1", "ag2"} {
		must(t, s.InsertAgent(ctx, service.Agent{ID: id, State: service.AgentRunning, Provider: "p", OwnerActor: "o",
			OwnerPeerClass: "c", OwnerWriteNamespace: "ns", SpawnFingerprint: "f", Host: "host-" + id}))
	}
	return f
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestCLIUsageAndHelp(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.db")
	for _, tc := range []struct {
		args     []string
		code     int
		contains string
	}{
		{nil, 2, "Usage:"},
		{[]string{"--help"}, 0, "Usage:"},
		{[]string{"nope"}, 2, `unknown command "nope"`},
		{[]string{"workers"}, 2, "missing subcommand (list|sweep)"},
		{[]string{"workers", "--help"}, 0, "list|sweep"},
		{[]string{"workers", "--help"}, 0, "sweep  Delete every worker whose TTL has lapsed"},
		{[]string{"executions", "-h"}, 0, "retry ID...            Redrive failed or cancelled executions"},
		{[]string{"workers", "fly"}, 2, `unknown subcommand "fly"`},
		{[]string{"workers", "list", "--help"}, 0, "-namespace"},
		{[]string{"executions", "cancel", "--help"}, 0, "Usage: roster executions cancel [flags] [ID...]"},
		{[]string{"executions", "retry", "--help"}, 0, "Usage: roster executions retry [flags] ID..."},
		{[]string{"schedules", "--help"}, 0, "list|pause|put|resume"},
		{[]string{"schedules", "put", "--help"}, 0, "-cron"},
		{[]string{"executions", "retry"}, 2, "want at least one argument"},
		{[]string{"executions", "cancel", "--all", "--db", missing}, 1, "no database at"},
		{[]string{"serve", "--help"}, 0, "-token"},
		{[]string{"workers", "list", "--bogus"}, 2, "flag provided but not defined: --bogus"},
		{[]string{"agents", "get"}, 2, "want 1 argument"},
		{[]string{"workers", "list", "--db", missing}, 1, "no database at"},
		{[]string{"migrate", "force", "x", "--db", missing}, 2, `VERSION "x" is not a number`},
		{[]string{"executions", "get", "not-an-id", "--db", missing}, 1, "no database at"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := runCLI(t, tc.args...)
			if code != tc.code || !strings.Contains(out+errOut, tc.contains) {
				t.Fatalf("exit %d (want %d)\nstdout: %s\nstderr: %s", code, tc.code, out, errOut)
			}
		})
	}
	if _, err := os.Stat(missing); err == nil {
		t.Fatal("a command created the missing database")
	}
}

// Bad flag values are usage errors (exit 2) that name the flag, in text and
// in JSON.
func TestCLINamesTheFlagAtFault(t *testing.T) {
	f := seed(t)
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"workers", "list", "--limit", "-1"}, "--limit"},
		{[]string{"workers", "list", "--after", "garbage"}, "--after"},
		{[]string{"events", "list", "--after-seq", "-5"}, "--after-seq"},
		{[]string{"agents", "list", "--state", "bogus"}, "--state"},
		{[]string{"executions", "list", "--state", "zombie"}, "--state"},
		{[]string{"executions", "list", "--lane", "bad\tlane"}, "--lane"},
		{[]string{"executions", "list", "--unique-key", "order-1"}, "--unique-key"}, // needs --namespace
		{[]string{"executions", "list", "--namespace", "ns", "--group", "bad\tgroup"}, "--group"},
		{[]string{"executions", "list", "--namespace", "ns", "--unique-key", "k", "--group", "g"}, "--group"}, // one or the other
		{[]string{"executions", "get", "nope"}, "ID"},
		{[]string{"leases", "reclaim", "--limit", "-2"}, "--limit"},
		{[]string{"sweep", "--retention", "0s"}, "--retention"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, _, errOut := runCLI(t, append(tc.args, "--db", f.path)...)
			if code != 2 || !strings.Contains(errOut, "invalid "+tc.flag+":") || strings.Contains(errOut, "roster: roster:") {
				t.Fatalf("exit %d, stderr: %s", code, errOut)
			}
			code, out, errOut := runCLI(t, append(tc.args, "--db", f.path, "--json")...)
			var e struct{ Error string }
			if code != 2 || out != "" || json.Unmarshal([]byte(errOut), &e) != nil || !strings.Contains(e.Error, tc.flag) {
				t.Fatalf("--json: exit %d, stdout %q, stderr %q", code, out, errOut)
			}
		})
	}
}

func TestCLIReadCommands(t *testing.T) {
	f := seed(t)
	before, err := os.ReadFile(f.path)
	must(t, err)
	for _, tc := range []struct {
		args       []string
		table      []string // in the table output
		jsonFields []string // keys in the --json output
	}{
		{[]string{"workers", "list"}, []string{"NAMESPACE", `"x,y"`, "lapsed", "alive", "TTL MS"}, []string{`"instance_id"`, `"ttl_ms": 60000`, `"items"`, `"next"`}},
		{[]string{"workers", "list", "--namespace", "other"}, []string{"live"}, []string{`"namespace": "other"`}},
		{[]string{"events", "list"}, []string{"SEQ", "registered"}, []string{`"kind": "registered"`, `"instance_id"`}},
		{[]string{"executions", "list", "--namespace", "ns"}, []string{"running", "waiting", `"resize cat.jpg"`, "1/3", "HOLDER", "LEASE EXPIRES"}, []string{`"run_at"`, `"retry_backoff_ms"`, `"max_attempts": 3`, `"payload_text": "resize cat.jpg"`, `"holder": "a"`, `"lease_expires_at": "`}},
		{[]string{"executions", "list", "--lane", "z", "--state", "waiting"}, []string{"waiting"}, []string{`"lane": "z"`}},
		{[]string{"executions", "list", "--namespace", "ns", "--newest", "--limit", "1"}, []string{"waiting", "next page: --after"}, []string{`"id": "` + f.scheduled.String() + `"`}},
		{[]string{"executions", "get", f.running.String()}, []string{"running", "1 of 3", "holder", "lease_expires_at", "result"}, []string{`"state": "running"`, `"attempts": 1`, `"claimed_at": "`}},
		{[]string{"schedules", "list"}, []string{"NAMESPACE", "nightly", "every 24h0m0s", "active"}, []string{`"name": "nightly"`, `"every_ms": 86400000`, `"next_run_at"`}},
		{[]string{"leader"}, []string{"LEADER", "-"}, []string{`"leader": ""`, `"until": null`}},
		{[]string{"leases", "expired"}, []string{"EXPIRED AT", f.running.String(), " a"}, []string{`"execution_id": "` + f.running.String() + `"`, `"epoch": 1`}},
		{[]string{"agents", "list"}, []string{"ag1", "ag2", "host-ag1"}, []string{`"owner_actor": "o"`, `"host": "host-ag2"`}},
		{[]string{"agents", "get", "ag1"}, []string{"ag1", "running"}, []string{`"id": "ag1"`}},
		{[]string{"stats"}, []string{"NAMESPACE", "ns", "other", "agents: spawned 0, running 2"}, []string{`"leader": ""`, `"workers_lapsed": 2`, `"expired_leases": 1`, `"ready": 1`, `"scheduled": 1`, `"running": 1`, `"oldest_ready_age_ms"`}},
		{[]string{"check"}, []string{"ok: no problem found"}, []string{`"ok": true`, `"problems": []`}},
		{[]string{"migrate", "version"}, []string{"VERSION", "LATEST"}, []string{fmt.Sprintf(`"version": %d`, latestVersion(t))}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := runCLI(t, append(tc.args, "--db", f.path)...)
			for _, want := range tc.table {
				if code != 0 || !strings.Contains(out, want) {
					t.Fatalf("table: exit %d, missing %q\n%s%s", code, want, out, errOut)
				}
			}
			code, out, errOut = runCLI(t, append(tc.args, "--db", f.path, "--json")...)
			if code != 0 || !json.Valid([]byte(out)) {
				t.Fatalf("--json: exit %d\n%s%s", code, out, errOut)
			}
			for _, want := range tc.jsonFields {
				if !strings.Contains(out, want) {
					t.Fatalf("--json: missing %s\n%s", want, out)
				}
			}
			if strings.Contains(out, `"TTL"`) || strings.Contains(out, `"Workers"`) {
				t.Fatalf("--json uses Go field names:\n%s", out)
			}
		})
	}
	after, err := os.ReadFile(f.path)
	must(t, err)
	if !bytes.Equal(before, after) {
		t.Fatal("read commands changed the database file")
	}
}

// Read commands never migrate: an older database stays at its version, and
// the command says what to do.
func TestCLIReadCommandsNeverMigrate(t *testing.T) {
	f := seed(t)
	latest := latestVersion(t)
	must(t, service.MigrateDown(context.Background(), f.path, 1))
	before, err := os.ReadFile(f.path)
	must(t, err)
	for _, args := range [][]string{{"workers", "list"}, {"stats"}, {"events", "list"}, {"agents", "list"}} {
		code, _, errOut := runCLI(t, append(args, "--db", f.path)...)
		if code != 1 || !strings.Contains(errOut, "outdated") || !strings.Contains(errOut, "roster migrate up") {
			t.Fatalf("%v on an older database: exit %d, %s", args, code, errOut)
		}
	}
	after, err := os.ReadFile(f.path)
	must(t, err)
	if !bytes.Equal(before, after) {
		t.Fatal("read commands changed an older database")
	}
	if v, _, _ := service.SchemaVersion(context.Background(), f.path); v != latest-1 {
		t.Fatalf("version %d after read commands", v)
	}
	// A 0-byte file and a foreign SQLite file get no tables either.
	empty := filepath.Join(t.TempDir(), "empty.db")
	must(t, os.WriteFile(empty, nil, 0o600))
	code, _, errOut := runCLI(t, "workers", "list", "--db", empty)
	if info, _ := os.Stat(empty); code != 1 || info.Size() != 0 || !strings.Contains(errOut, "no roster schema") {
		t.Fatalf("on an empty file: exit %d, %s", code, errOut)
	}
}

func TestCLIWriteCommands(t *testing.T) {
	f := seed(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"leases", "reclaim"}, `"reclaimed": 1`},
		{[]string{"workers", "sweep"}, `"swept": 2`},
		{[]string{"executions", "cancel", f.waiting.String(), "--reason", "not needed"}, `"last_error": "not needed"`},
		{[]string{"agents", "terminate-live", "--host", "host-ag1"}, `"terminated": 1`},
		{[]string{"agents", "terminate-live", "--all-hosts"}, `"terminated": 1`},
		{[]string{"sweep", "--retention", "-1s"}, `"pruned": 0`},
		{[]string{"events", "prune", "--older-than", "0s"}, `"pruned"`},
	} {
		code, out, errOut := runCLI(t, append(tc.args, "--db", f.path, "--json")...)
		if code != 0 || !strings.Contains(out, tc.want) {
			t.Fatalf("%v: exit %d\n%s%s", tc.args, code, out, errOut)
		}
	}
	// Tables too, and conflicts are exit 1.
	code, out, _ := runCLI(t, "executions", "cancel", f.waiting.String(), "--db", f.path)
	if code != 0 || !strings.Contains(out, "cancelled") {
		t.Fatalf("cancel again (a no-op): %d\n%s", code, out)
	}
	code, _, errOut := runCLI(t, "executions", "cancel", uuid.NewString(), "--db", f.path)
	if code != 1 || !strings.Contains(errOut, "not found") {
		t.Fatalf("cancel unknown: %d %s", code, errOut)
	}
	code, out, _ = runCLI(t, "sweep", "--db", f.path)
	if code != 0 || !strings.Contains(out, "SWEPT") || !strings.Contains(out, "RECLAIMED") {
		t.Fatalf("sweep: %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, "events", "list", "--db", f.path, "--namespace", "ns")
	if code != 0 && strings.Count(out, "ttl_swept") != 2 {
		t.Fatalf("events after the sweep: %d\n%s", code, out)
	}
}

func TestCLIMigrate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	latest := latestVersion(t)
	version := func(out string) int { // -1: null, no migration applied
		var v struct{ Version *int }
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if v.Version == nil {
			return -1
		}
		return *v.Version
	}
	code, out, errOut := runCLI(t, "migrate", "up", "--db", path, "--json")
	if code != 0 || version(out) != latest {
		t.Fatalf("migrate up: %d %s %s", code, out, errOut)
	}
	code, out, _ = runCLI(t, "migrate", "down", "--db", path, "--steps", "1", "--json")
	if code != 0 || version(out) != latest-1 {
		t.Fatalf("migrate down: %d %s", code, out)
	}
	for _, bad := range []string{fmt.Sprint(latest + 1), "99", "-2"} {
		code, _, errOut := runCLI(t, "migrate", "force", bad, "--db", path)
		if code != 2 || !strings.Contains(errOut, "invalid VERSION") {
			t.Fatalf("migrate force %s: %d %s", bad, code, errOut)
		}
	}
	code, out, _ = runCLI(t, "migrate", "force", "-1", "--db", path, "--json")
	if code != 0 || version(out) != -1 {
		t.Fatalf("migrate force -1: %d %s", code, out)
	}
	code, out, _ = runCLI(t, "migrate", "force", fmt.Sprint(latest-1), "--db", path, "--json")
	if code != 0 || version(out) != latest-1 {
		t.Fatalf("migrate force: %d %s", code, out)
	}
	code, out, _ = runCLI(t, "migrate", "up", "--db", path, "--json")
	if code != 0 || version(out) != latest {
		t.Fatalf("migrate up again: %d %s", code, out)
	}
	// Errors never print a whole migration's SQL.
	code, _, errOut = runCLI(t, "migrate", "down", "--steps", "-1", "--db", path)
	if code != 2 || strings.Count(errOut, "\n") > 1 {
		t.Fatalf("migrate down --steps -1: %d %s", code, errOut)
	}
}

// A corrupt file gives a clear message and a non-zero exit, never a panic.
func TestCLICorruptDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "corrupt.db")
	must(t, os.WriteFile(path, bytes.Repeat([]byte("not a database "), 400), 0o600))
	for _, args := range [][]string{{"workers", "list"}, {"check"}, {"stats"}, {"migrate", "version"}} {
		code, _, errOut := runCLI(t, append(args, "--db", path)...)
		if code != 1 || !strings.Contains(errOut, "not a database") {
			t.Fatalf("%v: exit %d, %s", args, code, errOut)
		}
	}
}

func TestCLICheckFindsDamage(t *testing.T) {
	f := seed(t)
	// Break a rule behind roster's back: the attempt of a running execution
	// is recorded as ended.
	conn, err := sqlOpen(f.path)
	must(t, err)
	_, err = conn.Exec(`INSERT INTO attempts (execution_id, epoch, attempt_index, lease_id, namespace, instance_id, state, claimed_at_ms, expires_at_ms, ended_at_ms)
		SELECT id, epoch, attempts, lease_id, namespace, holder, 'completed', claimed_at_ms, expires_at_ms, claimed_at_ms FROM executions WHERE state = 'running'`)
	must(t, err)
	must(t, conn.Close())
	code, out, _ := runCLI(t, "check", "--db", f.path, "--json")
	if code != 1 || !strings.Contains(out, `"ok": false`) || !strings.Contains(out, "running executions whose attempt is recorded as ended") {
		t.Fatalf("check: %d\n%s", code, out)
	}
}

func TestCLIEventsFollow(t *testing.T) {
	f := seed(t)
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"events", "list", "--follow", "--interval", "10ms", "--json", "--db", f.path}, &out, &out)
	}()
	waitFor(t, func() bool { return strings.Count(out.String(), `"registered"`) == 3 })
	s, err := service.Open(context.Background(), f.path)
	must(t, err)
	must(t, s.MarkWorkerDead(context.Background(), service.MarkWorkerDeadArgs{Namespace: "other", InstanceID: "live", Reason: "bye"}))
	must(t, s.Close())
	waitFor(t, func() bool { return strings.Contains(out.String(), `"marked_dead"`) })
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("follow exited %d: %s", code, out.String())
	}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if !json.Valid([]byte(line)) {
			t.Fatalf("not one JSON object per line: %q", line)
		}
	}
}

func TestCLIDemo(t *testing.T) {
	code, out, errOut := runCLI(t, "demo")
	if code != 0 || !strings.Contains(out, "host_restart") || !strings.Contains(out, "lease lost") {
		t.Fatalf("demo: %d\n%s\n%s", code, out, errOut)
	}
	// A --db with data is refused, unchanged; a new file is fine.
	f := seed(t)
	before, err := os.ReadFile(f.path)
	must(t, err)
	code, _, errOut = runCLI(t, "demo", "--db", f.path)
	if code != 2 || !strings.Contains(errOut, "already holds data") {
		t.Fatalf("demo on a database with data: %d %s", code, errOut)
	}
	after, err := os.ReadFile(f.path)
	must(t, err)
	if !bytes.Equal(before, after) {
		t.Fatal("the refused demo changed the database")
	}
	fresh := filepath.Join(t.TempDir(), "fresh.db")
	if code, _, errOut := runCLI(t, "demo", "--db", fresh); code != 0 {
		t.Fatalf("demo on a new file: %d %s", code, errOut)
	}
	// A second run on that file is refused, not a crash on agent-8.
	if code, _, errOut := runCLI(t, "demo", "--db", fresh); code != 2 || !strings.Contains(errOut, "already holds data") {
		t.Fatalf("second demo: %d %s", code, errOut)
	}
}

// --db takes a PostgreSQL URL, and its password is never printed.
func TestCLIOnPostgres(t *testing.T) {
	const secret = "n0t-Sh0wn"
	u, err := url.Parse(pgtest.Fresh(t))
	must(t, err)
	u.User = url.UserPassword(u.User.Username(), secret) // trust auth ignores it
	db := u.String()
	for _, args := range [][]string{
		{"migrate", "up", "--db", db},
		{"workers", "list", "--db", db, "--json"},
		{"stats", "--db", db},
		{"check", "--db", db},
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
	code, _, errOut := runCLI(t, "demo", "--db", db)
	if code != 2 || strings.Contains(errOut, secret) {
		t.Fatalf("demo on a roster database: %d %s", code, errOut)
	}
	u.Path = "/no_such_database_here"
	code, out, errOut := runCLI(t, "workers", "list", "--db", u.String())
	if code != 1 || strings.Contains(out+errOut, secret) {
		t.Fatalf("exit %d, output:\n%s%s", code, out, errOut)
	}
}

// The fleet commands: retry several executions, cancel several or a
// filter with --all, schedules put/pause/resume/delete, leader.
func TestCLIFleetCommands(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "fleet.db")
	s, err := service.Open(ctx, path)
	must(t, err)
	var ids []uuid.UUID
	for range 3 {
		id, err := s.CreateExecution(ctx, service.CreateExecutionArgs{Namespace: "ns", Lane: "l", Payload: []byte{0xff, 0}})
		must(t, err)
		ids = append(ids, id)
	}
	must(t, s.Close())
	db := []string{"--db", path}
	cli := func(want int, args ...string) string {
		t.Helper()
		code, out, errOut := runCLI(t, append(args, db...)...)
		if code != want {
			t.Fatalf("%v: exit %d, want %d\n%s%s", args, code, want, out, errOut)
		}
		return out + errOut
	}
	// Cancel two by id, then retry both; --json shows no payload_text for
	// binary payloads.
	out := cli(0, "executions", "cancel", ids[0].String(), ids[1].String(), "--json")
	if strings.Count(out, `"state": "cancelled"`) != 2 || strings.Contains(out, "payload_text") {
		t.Fatalf("cancel: %s", out)
	}
	out = cli(0, "executions", "retry", ids[0].String(), ids[1].String())
	if strings.Count(out, "waiting") != 2 {
		t.Fatalf("retry: %s", out)
	}
	out = cli(0, "executions", "retry", ids[2].String(), "--json")
	if !strings.Contains(out, `"state": "waiting"`) {
		t.Fatalf("retry of a waiting execution is a no-op: %s", out)
	}
	cli(1, "executions", "retry", uuid.New().String())
	// --all needs a namespace; then cancels every live one of it.
	cli(2, "executions", "cancel", "--all")
	cli(2, "executions", "cancel", "--all", "--namespace", "ns", ids[0].String())
	out = cli(0, "executions", "cancel", "--all", "--namespace", "ns", "--json")
	if !strings.Contains(out, `"cancelled": 3`) {
		t.Fatalf("cancel --all: %s", out)
	}
	// Schedules.
	cli(2, "schedules", "put", "ns", "bad", "--lane", "l")
	cli(2, "schedules", "put", "ns", "bad", "--lane", "l", "--cron", "every day")
	out = cli(0, "schedules", "put", "ns", "quarter", "--lane", "l", "--cron", "*/15 * * * *", "--payload", "go", "--capability", "gpu", "--json")
	if !strings.Contains(out, `"cron": "*/15 * * * *"`) || !strings.Contains(out, `"payload_text": "go"`) || !strings.Contains(out, `"required_capabilities": [`) {
		t.Fatalf("put: %s", out)
	}
	if out = cli(0, "schedules", "pause", "ns", "quarter"); !strings.Contains(out, "paused") {
		t.Fatalf("pause: %s", out)
	}
	// A paused schedule has no next run: "-" in the table, null in the JSON.
	if out = cli(0, "schedules", "list"); !regexp.MustCompile(`quarter .*paused +- `).MatchString(out) {
		t.Fatalf("list of a paused schedule: %s", out)
	}
	if out = cli(0, "schedules", "list", "--json"); !strings.Contains(out, `"next_run_at": null`) {
		t.Fatalf("list --json of a paused schedule: %s", out)
	}
	if out = cli(0, "schedules", "resume", "ns", "quarter", "--json"); !strings.Contains(out, `"paused": false`) ||
		strings.Contains(out, `"next_run_at": null`) {
		t.Fatalf("resume: %s", out)
	}
	cli(1, "schedules", "pause", "ns", "nope")
	cli(0, "schedules", "delete", "ns", "quarter")
	cli(1, "schedules", "delete", "ns", "quarter")
	if out = cli(0, "schedules", "list", "--json"); !strings.Contains(out, `"items": []`) {
		t.Fatalf("list after delete: %s", out)
	}
	if out = cli(0, "sweep", "--json"); !strings.Contains(out, `"scheduled": 0`) {
		t.Fatalf("sweep: %s", out)
	}
}
