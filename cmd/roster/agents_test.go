package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rosterdb/roster/internal/pgtest"
	"github.com/rosterdb/roster/service"
)

// seedAgents opens db (migrating it) and stores the agents, each running, of
// owner "o" in namespace "ns".
func seedAgents(t *testing.T, db string, agents ...service.Agent) {
	t.Helper()
	ctx := context.Background()
	s, err := service.Open(ctx, db)
	must(t, err)
	defer s.Close()
	for _, a := range agents {
		a.State, a.Provider, a.OwnerActor, a.OwnerPeerClass, a.OwnerWriteNamespace, a.SpawnFingerprint =
			service.AgentRunning, "p", "o", "c", "ns", "f"
		must(t, s.InsertAgent(ctx, a))
	}
}

// liveAgents returns the ids of db's live agents.
func liveAgents(t *testing.T, db string) []string {
	t.Helper()
	ctx := context.Background()
	s, err := service.Open(ctx, db)
	must(t, err)
	defer s.Close()
	page, err := s.ListAgents(ctx, service.ListAgentsArgs{})
	must(t, err)
	var ids []string
	for _, a := range page.Agents {
		if a.State != service.AgentTerminal {
			ids = append(ids, a.ID)
		}
	}
	return ids
}

// listIDs runs "agents list" with args and returns the ids it printed as JSON.
func listIDs(t *testing.T, db string, args ...string) []string {
	t.Helper()
	code, out, errOut := runCLI(t, append([]string{"agents", "list", "--db", db, "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("agents list %v: exit %d\n%s%s", args, code, out, errOut)
	}
	var page struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
	}
	must(t, json.Unmarshal([]byte(out), &page))
	ids := []string{}
	for _, a := range page.Items {
		ids = append(ids, a.ID)
	}
	return ids
}

// agents list filters by --host and --holder NAMESPACE/INSTANCE, beside the
// other filters, and shows each agent's holder in the table and the JSON.
func TestCLIAgentsListByHostAndHolder(t *testing.T) {
	db := filepath.Join(t.TempDir(), "agents.db")
	seedAgents(t, db,
		service.Agent{ID: "a1", Host: "h1", HolderNamespace: "ns", HolderInstanceID: "i"},
		service.Agent{ID: "a2", Host: "h2", HolderNamespace: "ns", HolderInstanceID: "pod/7"},
		service.Agent{ID: "a3", Host: "h1"},
		service.Agent{ID: "a4", HolderNamespace: "other", HolderInstanceID: "i"},
	)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"a1", "a2", "a3", "a4"}},
		{[]string{"--host", "h1"}, []string{"a1", "a3"}},
		{[]string{"--holder", "ns/i"}, []string{"a1"}},
		{[]string{"--holder", "ns/pod/7"}, []string{"a2"}},
		{[]string{"--holder", "other/i"}, []string{"a4"}},
		{[]string{"--host", "h1", "--holder", "ns/i", "--state", "running"}, []string{"a1"}},
		{[]string{"--host", "h2", "--holder", "ns/i"}, []string{}},
		{[]string{"--host", "h1", "--owner", "o", "--visible-in", "ns", "--limit", "1"}, []string{"a1"}},
	} {
		if got := listIDs(t, db, tc.args...); !slices.Equal(got, tc.want) {
			t.Errorf("agents list %v = %v, want %v", tc.args, got, tc.want)
		}
	}
	code, out, errOut := runCLI(t, "agents", "list", "--db", db, "--json", "--holder", "ns/pod/7")
	if code != 0 || !strings.Contains(out, `"holder_namespace": "ns"`) || !strings.Contains(out, `"holder_instance_id": "pod/7"`) {
		t.Fatalf("--json: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "agents", "list", "--db", db)
	if code != 0 || !strings.Contains(out, "HOLDER") || !strings.Contains(out, "ns/pod/7") || !strings.Contains(out, "other/i") {
		t.Fatalf("table: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "agents", "get", "a1", "--db", db)
	if code != 0 || !strings.Contains(out, "ns/i") {
		t.Fatalf("get: exit %d\n%s%s", code, out, errOut)
	}
	for _, bad := range []string{"ns", "/i", "ns/", "/"} {
		code, _, errOut := runCLI(t, "agents", "list", "--db", db, "--holder", bad)
		if code != 2 || !strings.Contains(errOut, "--holder") {
			t.Errorf("--holder %q: exit %d, %s", bad, code, errOut)
		}
	}
	code, _, errOut = runCLI(t, "agents", "list", "--db", db, "--host", "bad\nhost")
	if code != 2 || !strings.Contains(errOut, "Host") {
		t.Errorf("a bad --host: exit %d, %s", code, errOut)
	}
}

// terminate-live without --host ends every host's agents only with
// --all-hosts where many hosts may share the database: PostgreSQL, or a
// database where a live agent names a host. Refused, it is a usage error
// and writes nothing.
func TestCLITerminateLiveAsksForAllHosts(t *testing.T) {
	t.Run("sqlite without hosts", func(t *testing.T) {
		db := filepath.Join(t.TempDir(), "agents.db")
		seedAgents(t, db, service.Agent{ID: "a1"}, service.Agent{ID: "a2", HolderNamespace: "ns", HolderInstanceID: "i"})
		code, out, errOut := runCLI(t, "agents", "terminate-live", "--db", db, "--json")
		if code != 0 || !strings.Contains(out, `"terminated": 2`) {
			t.Fatalf("exit %d\n%s%s", code, out, errOut)
		}
	})
	t.Run("sqlite with a host", func(t *testing.T) {
		db := filepath.Join(t.TempDir(), "agents.db")
		seedAgents(t, db, service.Agent{ID: "a1"}, service.Agent{ID: "a2", Host: "h2"}, service.Agent{ID: "a3", Host: "h3"})
		for _, args := range [][]string{{}, {"--json"}} {
			code, out, errOut := runCLI(t, append([]string{"agents", "terminate-live", "--db", db}, args...)...)
			if code != 2 || !strings.Contains(errOut, "--all-hosts") || !strings.Contains(errOut, "--host") || out != "" {
				t.Fatalf("without --all-hosts: exit %d\n%s%s", code, out, errOut)
			}
		}
		if got := liveAgents(t, db); !slices.Equal(got, []string{"a1", "a2", "a3"}) {
			t.Fatalf("a refused terminate-live ended agents: live %v", got)
		}
		code, _, errOut := runCLI(t, "agents", "terminate-live", "--db", db, "--host", "h2", "--all-hosts")
		if code != 2 || !strings.Contains(errOut, "exclude") {
			t.Fatalf("--host with --all-hosts: exit %d %s", code, errOut)
		}
		code, out, errOut := runCLI(t, "agents", "terminate-live", "--db", db, "--host", "h2", "--json")
		if code != 0 || !strings.Contains(out, `"terminated": 1`) {
			t.Fatalf("--host h2: exit %d\n%s%s", code, out, errOut)
		}
		if got := liveAgents(t, db); !slices.Equal(got, []string{"a1", "a3"}) {
			t.Fatalf("after --host h2: live %v", got)
		}
		code, out, errOut = runCLI(t, "agents", "terminate-live", "--db", db, "--all-hosts", "--json")
		if code != 0 || !strings.Contains(out, `"terminated": 2`) {
			t.Fatalf("--all-hosts: exit %d\n%s%s", code, out, errOut)
		}
		// With no live agent left naming a host, no flag is needed.
		code, out, errOut = runCLI(t, "agents", "terminate-live", "--db", db, "--json")
		if code != 0 || !strings.Contains(out, `"terminated": 0`) {
			t.Fatalf("after every agent ended: exit %d\n%s%s", code, out, errOut)
		}
	})
	t.Run("postgres", func(t *testing.T) {
		db := pgtest.Fresh(t)
		seedAgents(t, db, service.Agent{ID: "a1"})
		code, out, errOut := runCLI(t, "agents", "terminate-live", "--db", db)
		if code != 2 || !strings.Contains(errOut, "--all-hosts") || !strings.Contains(errOut, "PostgreSQL") {
			t.Fatalf("without --all-hosts: exit %d\n%s%s", code, out, errOut)
		}
		if got := liveAgents(t, db); !slices.Equal(got, []string{"a1"}) {
			t.Fatalf("a refused terminate-live ended agents: live %v", got)
		}
		code, out, errOut = runCLI(t, "agents", "terminate-live", "--db", db, "--all-hosts", "--json")
		if code != 0 || !strings.Contains(out, `"terminated": 1`) {
			t.Fatalf("--all-hosts: exit %d\n%s%s", code, out, errOut)
		}
	})
}
