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
