package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/rosterdb/roster/service"
)

// TestCLIExecutionsCreate: create takes NAMESPACE LANE, the payload as
// text, @FILE or stdin, metadata entries, a RunAt, a unique key; get shows
// the metadata and the attempts, in tables and --json; bad input is a usage
// error naming the flag or argument.
func TestCLIExecutionsCreate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "q.db")
	if code, _, errOut := runCLI(t, "migrate", "up", "--db", path); code != 0 {
		t.Fatal(errOut)
	}
	file := filepath.Join(dir, "payload.bin")
	must(t, os.WriteFile(file, []byte{0, 1, 2}, 0o600))
	created := func(t *testing.T, stdin string, args ...string) executionDetailJSON {
		t.Helper()
		var out, errOut bytes.Buffer
		code := runWith(context.Background(), append(args, "--db", path, "--json"), strings.NewReader(stdin), &out, &errOut)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut.String())
		}
		var e executionDetailJSON
		must(t, json.Unmarshal(out.Bytes(), &e))
		return e
	}
	e := created(t, "", "executions", "create", "shop", "ship", "--payload", "hello", "--metadata", "trace=abc", "--metadata", "who=me=you",
		"--unique-key", "order-1", "--priority", "3", "--run-at", "2030-01-02T03:04:05Z")
	if e.Namespace != "shop" || e.Lane != "ship" || string(e.Payload) != "hello" || e.Metadata["trace"] != "abc" ||
		e.Metadata["who"] != "me=you" || e.UniqueKey != "order-1" || e.Priority != 3 || !e.RunAt.Equal(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)) {
		t.Fatalf("created %+v", e)
	}
	grouped := created(t, "", "executions", "create", "shop", "ship", "--group", "customer-7")
	if grouped.Group != "customer-7" {
		t.Fatalf("--group: %+v", grouped)
	}
	again := created(t, "", "executions", "create", "shop", "ship", "--unique-key", "order-1")
	if again.ID != e.ID {
		t.Fatalf("the unique key made another execution %s", again.ID)
	}
	// list finds them by unique key and by group.
	for _, tc := range []struct{ flag, value, want string }{{"--unique-key", "order-1", e.ID}, {"--group", "customer-7", grouped.ID}} {
		code, out, errOut := runCLI(t, "executions", "list", "--db", path, "--json", "--namespace", "shop", tc.flag, tc.value)
		var page struct {
			Items []executionJSON `json:"items"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &page) != nil || len(page.Items) != 1 || page.Items[0].ID != tc.want {
			t.Fatalf("list %s %s: exit %d, %s%s", tc.flag, tc.value, code, out, errOut)
		}
	}
	if f := created(t, "", "executions", "create", "shop", "ship", "--payload", "@"+file); !bytes.Equal(f.Payload, []byte{0, 1, 2}) {
		t.Fatalf("@file payload %v", f.Payload)
	}
	in := created(t, "from stdin\n", "executions", "create", "shop", "ship", "--payload", "-")
	if string(in.Payload) != "from stdin\n" || len(in.Metadata) != 0 {
		t.Fatalf("stdin payload %q, metadata %v", in.Payload, in.Metadata)
	}

	// get: metadata and attempts.
	s, err := service.Open(context.Background(), path)
	must(t, err)
	_, err = s.RegisterWorker(context.Background(), service.RegisterWorkerArgs{Namespace: "shop", WorkerID: "w", InstanceID: "host-1", Lanes: []string{"ship"}, TTL: time.Hour})
	must(t, err)
	l, err := s.ClaimExecution(context.Background(), service.ClaimArgs{Namespace: "shop", InstanceID: "host-1", LeaseTTL: time.Minute})
	must(t, err)
	if l.ExecutionID.String() == e.ID {
		t.Fatal("claimed the execution scheduled for 2030")
	}
	must(t, s.FailExecution(context.Background(), service.FailArgs{Lease: l, Reason: "no stock"}))
	must(t, s.Close())
	id := l.ExecutionID.String()
	g := created(t, "", "executions", "get", id)
	if len(g.AttemptHistory) != 1 || g.AttemptHistory[0].Outcome != "failed" || g.AttemptHistory[0].Error != "no stock" ||
		g.AttemptHistory[0].InstanceID != "host-1" || g.AttemptHistory[0].Index != 1 || g.AttemptHistory[0].EndedAt == nil || g.Attempts != 1 {
		t.Fatalf("get --json attempts %+v", g.AttemptHistory)
	}
	code, out, errOut := runCLI(t, "executions", "get", id, "--db", path)
	if code != 0 || !strings.Contains(out, "attempt 1") || !strings.Contains(out, "failed") || !strings.Contains(out, "no stock") {
		t.Fatalf("get: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = runCLI(t, "executions", "get", e.ID, "--db", path)
	if code != 0 || !strings.Contains(out, "trace=abc,who=me=you") {
		t.Fatalf("get shows no metadata:\n%s", out)
	}
	code, out, _ = runCLI(t, "executions", "attempts", id, "--db", path)
	if code != 0 || !strings.Contains(out, "OUTCOME") || !strings.Contains(out, "host-1") || !strings.Contains(out, "no stock") {
		t.Fatalf("attempts:\n%s", out)
	}
	code, out, _ = runCLI(t, "executions", "attempts", id, "--db", path, "--json")
	var page struct{ Items []attemptJSON }
	if code != 0 || json.Unmarshal([]byte(out), &page) != nil || len(page.Items) != 1 || page.Items[0].Outcome != "failed" {
		t.Fatalf("attempts --json: %s", out)
	}
	if code, _, errOut := runCLI(t, "executions", "attempts", uuid.NewString(), "--db", path); code != 1 || !strings.Contains(errOut, "not found") {
		t.Fatalf("attempts of an unknown execution: exit %d %s", code, errOut)
	}

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"executions", "create", "shop"}, 2, ""},
		{[]string{"executions", "create", "shop", "ship", "--metadata", "novalue"}, 2, "--metadata"},
		{[]string{"executions", "create", "shop", "ship", "--metadata", "=v"}, 2, "--metadata"},
		{[]string{"executions", "create", "shop", "ship", "--metadata", "k=1", "--metadata", "k=2"}, 2, "twice"},
		{[]string{"executions", "create", "shop", "ship", "--run-at", "tomorrow"}, 2, "--run-at"},
		{[]string{"executions", "create", "shop", "ship", "--payload", "@" + filepath.Join(dir, "missing")}, 2, "--payload"},
		{[]string{"executions", "create", "shop", "bad\tlane"}, 2, "LANE"},
		{[]string{"executions", "create", "shop", "ship", "--metadata", "k=\xff"}, 2, "Metadata"},
		{[]string{"executions", "attempts", "not-an-id"}, 2, "ID"},
	} {
		code, _, errOut := runCLI(t, append(tc.args, "--db", path)...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d naming %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
}
