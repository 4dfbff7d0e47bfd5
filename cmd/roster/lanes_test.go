package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rosterdb/roster/service"
)

// The lanes commands set, pause, resume, list and delete a lane's limits,
// as the Store sees them.
func TestLanesCommands(t *testing.T) {
	db := filepath.Join(t.TempDir(), "r.db")
	if code, o, e := runCLI(t, "migrate", "up", "--db", db); code != 0 {
		t.Fatal(o, e)
	}
	steps := []struct {
		args []string
		want []service.LaneLimits
	}{
		{[]string{"lanes", "limit", "ns", "emails", "--max-running", "4", "--rate", "100/1m"},
			[]service.LaneLimits{{Namespace: "ns", Lane: "emails", MaxRunning: 4, Rate: 100, RatePeriod: time.Minute}}},
		{[]string{"lanes", "pause", "ns", "emails"},
			[]service.LaneLimits{{Namespace: "ns", Lane: "emails", MaxRunning: 4, Rate: 100, RatePeriod: time.Minute, Paused: true}}},
		// A limit keeps what it is not given, a pause included.
		{[]string{"lanes", "limit", "ns", "emails", "--max-running-per-group", "1", "--rate", "0"},
			[]service.LaneLimits{{Namespace: "ns", Lane: "emails", MaxRunning: 4, MaxRunningPerGroup: 1, Paused: true}}},
		{[]string{"lanes", "resume", "ns", "emails"},
			[]service.LaneLimits{{Namespace: "ns", Lane: "emails", MaxRunning: 4, MaxRunningPerGroup: 1}}},
		{[]string{"lanes", "pause", "ns", "reports"},
			[]service.LaneLimits{{Namespace: "ns", Lane: "emails", MaxRunning: 4, MaxRunningPerGroup: 1}, {Namespace: "ns", Lane: "reports", Paused: true}}},
		{[]string{"lanes", "delete", "ns", "emails"},
			[]service.LaneLimits{{Namespace: "ns", Lane: "reports", Paused: true}}},
	}
	for _, st := range steps {
		if code, o, e := runCLI(t, append(st.args, "--db", db)...); code != 0 {
			t.Fatalf("%s: exit %d\n%s%s", strings.Join(st.args, " "), code, o, e)
		}
		s, err := service.Open(context.Background(), db, service.WithReadOnly())
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.ListLaneLimits(context.Background(), "")
		_ = s.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, st.want) {
			t.Fatalf("after %s: %+v, want %+v", strings.Join(st.args, " "), got, st.want)
		}
	}
	code, out, e := runCLI(t, "lanes", "list", "--json", "--db", db)
	if code != 0 {
		t.Fatal(out, e)
	}
	var page struct {
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &page); err != nil || len(page.Items) != 1 || page.Items[0]["paused"] != true || page.Items[0]["lane"] != "reports" {
		t.Fatalf("lanes list --json: %v\n%s", err, out)
	}
	if code, out, _ := runCLI(t, "lanes", "list", "--db", db); code != 0 || !strings.Contains(out, "reports") || !strings.Contains(out, "paused") {
		t.Fatalf("lanes list: %s", out)
	}
	// Usage errors name what is at fault; a lane without limits is not found.
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"lanes", "limit", "ns", "x", "--rate", "100"}, 2, "rate"},
		{[]string{"lanes", "limit", "ns", "x", "--rate", "5/0.5s"}, 2, "--rate"},
		{[]string{"lanes", "limit", "ns", "x", "--max-running", "-1"}, 2, "--max-running"},
		{[]string{"lanes", "limit", "ns", "x"}, 2, "--max-running"},
		{[]string{"lanes", "pause", "", "x"}, 2, "NAMESPACE"},
		{[]string{"lanes", "delete", "ns", "bad\x01lane"}, 2, "LANE"},
		{[]string{"lanes", "resume", "ns", "nolimits"}, 1, "no limits"},
		{[]string{"lanes", "delete", "ns", "nolimits"}, 1, "not found"},
	} {
		code, o, e := runCLI(t, append(tc.args, "--db", db)...)
		if code != tc.code || !strings.Contains(e, tc.says) {
			t.Errorf("%q: exit %d (want %d), stderr %q should say %q\n%s", tc.args, code, tc.code, e, tc.says, o)
		}
	}
}

// The status page and its JSON show a lane's limits and whether it is
// paused.
func TestServeShowsLaneLimits(t *testing.T) {
	f := seed(t)
	s, err := service.Open(context.Background(), f.path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutLaneLimits(context.Background(), service.LaneLimits{Namespace: "ns", Lane: "z", MaxRunning: 3, Paused: true}); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	base := startServe(t, "--db", f.path)
	code, body := get(t, base+"/", "")
	for _, want := range []string{`class="lane paused unserved" data-lane="z"`, `<strong class="paused">paused</strong>`, `/3 running`} {
		if code != 200 || !strings.Contains(body, want) {
			t.Fatalf("/: %d, missing %q", code, want)
		}
	}
	code, body = get(t, base+"/api/status", "")
	if code != 200 || !strings.Contains(body, `"limits": {`) || !strings.Contains(body, `"max_running": 3`) || !strings.Contains(body, `"paused": true`) {
		t.Fatalf("/api/status: %d\n%s", code, body)
	}
}
