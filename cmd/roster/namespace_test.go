package main

import (
	"strings"
	"testing"
)

// TestNamespaceEitherWay: a command whose first argument is NAMESPACE takes
// --namespace in its place, and a command that filters by --namespace takes
// a lone argument in its place, each with a note on stderr saying the
// usual form; the two forms disagreeing, or a namespace given twice, is a
// usage error that changes nothing.
func TestNamespaceEitherWay(t *testing.T) {
	f := seed(t)
	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		stdout   string // a part of it
		note     string // a part of stderr ("" : none expected)
		wantNote bool
	}{
		{"keyed, the usual form", []string{"schedules", "put", "ns", "nightly2", "--lane", "l", "--every", "24h"}, 0, "nightly2", "", false},
		{"keyed, as a flag", []string{"schedules", "pause", "--namespace", "ns", "nightly2"}, 0, "paused", "takes NAMESPACE as its first argument (roster schedules pause ns ...)", true},
		{"keyed, both agreeing", []string{"schedules", "resume", "--namespace", "ns", "ns", "nightly2"}, 0, "active", "", false},
		{"keyed, both disagreeing", []string{"schedules", "pause", "--namespace", "other", "ns", "nightly2"}, 2, "", "disagree", true},
		{"lanes, as a flag", []string{"lanes", "pause", "--namespace", "ns", "emails"}, 0, "paused", "takes NAMESPACE as its first argument", true},
		{"create, as a flag", []string{"executions", "create", "--namespace", "ns", "l"}, 0, "", "takes NAMESPACE as its first argument", true},
		{"filter, as an argument", []string{"schedules", "list", "ns"}, 0, "nightly2", "takes the namespace as --namespace (roster schedules list --namespace ns)", true},
		{"filter, the usual form", []string{"lanes", "list", "--namespace", "ns"}, 0, "emails", "", false},
		{"filter, given twice", []string{"schedules", "list", "--namespace", "ns", "ns"}, 2, "", "want 0 argument", true},
		{"filter, two arguments", []string{"workers", "list", "ns", "more"}, 2, "", "want 0 argument", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, append(tc.args, "--db", f.path)...)
			if code != tc.code || !strings.Contains(out, tc.stdout) {
				t.Fatalf("roster %v: exit %d, want %d\nstdout %s\nstderr %s", tc.args, code, tc.code, out, errOut)
			}
			if tc.wantNote != (errOut != "") || !strings.Contains(errOut, tc.note) {
				t.Fatalf("roster %v: stderr %q, want a note with %q (%v)", tc.args, errOut, tc.note, tc.wantNote)
			}
		})
	}
	// The schedule is as the accepted commands left it: resumed.
	if code, out, _ := runCLI(t, "schedules", "list", "--namespace", "ns", "--db", f.path); code != 0 || !strings.Contains(out, "active") {
		t.Fatalf("after the commands: %d %s", code, out)
	}
}
