package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// schedules put names the flag at fault (--lane, --every, --cron,
// --max-attempts), not the Go field behind it.
func TestSchedulesPutNamesFlag(t *testing.T) {
	db := filepath.Join(t.TempDir(), "r.db")
	if code, o, e := runCLI(t, "migrate", "up", "--db", db); code != 0 {
		t.Fatal(o, e)
	}
	var bad []string
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"schedules", "put", "ns", "x", "--every", "1h"}, "--lane"},
		{[]string{"schedules", "put", "ns", "x", "--lane", "l"}, "--every"},
		{[]string{"schedules", "put", "ns", "x", "--lane", "l", "--every", "10ms"}, "--every"},
		{[]string{"schedules", "put", "ns", "x", "--lane", "l", "--cron", "every day"}, "--cron"},
		{[]string{"schedules", "put", "ns", "x", "--lane", "l", "--every", "1h", "--max-attempts", "-1"}, "--max-attempts"},
		{[]string{"schedules", "put", "ns", "x", "--lane", "l", "--every", "1h", "--retry-backoff", "-1s"}, "--retry-backoff"},
	} {
		code, _, errOut := runCLI(t, append(tc.args, "--db", db)...)
		if code != 2 || !strings.Contains(errOut, tc.flag) {
			bad = append(bad, strings.Join(tc.args[2:], " ")+" => exit "+string(rune('0'+code))+": "+strings.TrimSpace(errOut))
		}
	}
	if len(bad) > 0 {
		t.Fatalf("messages not naming the flag at fault:\n%s", strings.Join(bad, "\n"))
	}
}

// A retention or an --older-than reaching back before 1970 keeps everything:
// the command runs, prunes nothing, and never says "invalid before".
func TestLongRetentionsKeepEverything(t *testing.T) {
	db := filepath.Join(t.TempDir(), "r.db")
	if code, o, e := runCLI(t, "migrate", "up", "--db", db); code != 0 {
		t.Fatal(o, e)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sweep", "--execution-retention", "500000h"}, `"pruned_executions": 0`},
		{[]string{"sweep", "--retention", "500000h"}, `"pruned": 0`},
		{[]string{"events", "prune", "--older-than", "500000h"}, `"pruned": 0`},
		{[]string{"executions", "prune", "--older-than", "500000h"}, `"pruned": 0`},
	} {
		code, out, errOut := runCLI(t, append(tc.args, "--db", db, "--json")...)
		if code != 0 || !strings.Contains(out, tc.want) {
			t.Errorf("%s: exit %d\n%s%s", strings.Join(tc.args, " "), code, out, errOut)
		}
	}
}
