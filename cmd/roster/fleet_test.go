package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
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

// An empty NAMESPACE, or a NAMESPACE or NAME that is not an identifier, is a
// usage error naming the argument, for every schedules command that takes
// one, checked before any database is opened: an empty one never reads as
// "every namespace", and never pauses, resumes, deletes or writes another
// namespace's schedule.
func TestSchedulesKeyIsAUsageError(t *testing.T) {
	db := filepath.Join(t.TempDir(), "r.db")
	if code, o, e := runCLI(t, "migrate", "up", "--db", db); code != 0 {
		t.Fatal(o, e)
	}
	for _, ns := range []string{"a", "b"} {
		for _, put := range [][]string{{"nightly"}, {"sleepy", "--paused"}} {
			args := append([]string{"schedules", "put", ns}, put...)
			if code, o, e := runCLI(t, append(args, "--every", "1h", "--lane", "l", "--db", db)...); code != 0 {
				t.Fatal(o, e)
			}
		}
	}
	for _, tc := range []struct {
		args []string
		arg  string // the argument the message names
	}{
		{[]string{"schedules", "pause", "", "nightly"}, "NAMESPACE"},
		{[]string{"schedules", "resume", "", "sleepy"}, "NAMESPACE"},
		{[]string{"schedules", "delete", "", "nightly"}, "NAMESPACE"},
		{[]string{"schedules", "put", "", "nightly", "--every", "2h", "--lane", "l"}, "NAMESPACE"},
		{[]string{"schedules", "pause", "a", ""}, "NAME"},
		{[]string{"schedules", "resume", "a", ""}, "NAME"},
		{[]string{"schedules", "delete", "a", ""}, "NAME"},
		// Not an identifier: over 256 bytes, a control character.
		{[]string{"schedules", "delete", strings.Repeat("n", 257), "nightly"}, "NAMESPACE"},
		{[]string{"schedules", "put", strings.Repeat("n", 257), "nightly", "--every", "1h", "--lane", "l"}, "NAMESPACE"},
		{[]string{"schedules", "resume", "a", "bad\x01name"}, "NAME"},
		{[]string{"schedules", "pause", "a\x01", "nightly"}, "NAMESPACE"},
	} {
		code, out, errOut := runCLI(t, append(tc.args, "--db", db)...)
		if code != 2 || !strings.Contains(errOut, "invalid "+tc.arg+":") {
			t.Errorf("%q: exit %d, want 2 and a message naming %s\n%s%s", tc.args, code, tc.arg, out, errOut)
		}
		// The key is checked before anything is opened: a database that
		// is not there is not created, and the usage error is the answer.
		absent := filepath.Join(t.TempDir(), "absent.db")
		code, out, errOut = runCLI(t, append(tc.args, "--db", absent)...)
		if code != 2 || !strings.Contains(errOut, "invalid "+tc.arg+":") {
			t.Errorf("%q on an absent database: exit %d, want 2 and a message naming %s\n%s%s", tc.args, code, tc.arg, out, errOut)
		}
		if _, err := os.Stat(absent); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%q created the database it was refused on: %v", tc.args, err)
		}
	}
	code, out, errOut := runCLI(t, "schedules", "list", "--db", db, "--json")
	if code != 0 {
		t.Fatal(out, errOut)
	}
	var list struct {
		Items []struct {
			Namespace, Name string
			EveryMs         int64 `json:"every_ms"`
			Paused          bool
		}
	}
	must(t, json.Unmarshal([]byte(out), &list))
	var got []string
	for _, sc := range list.Items {
		got = append(got, fmt.Sprintf("%s/%s paused=%v every=%dms", sc.Namespace, sc.Name, sc.Paused, sc.EveryMs))
	}
	want := []string{"a/nightly paused=false every=3600000ms", "a/sleepy paused=true every=3600000ms",
		"b/nightly paused=false every=3600000ms", "b/sleepy paused=true every=3600000ms"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the schedules changed:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
