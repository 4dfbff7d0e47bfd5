package main

import (
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// commandLines returns every command and subcommand of the table, each with
// its positional arguments filled in (an ID, a VERSION, ...), so that the
// tests below cover commands added later too.
func commandLines() [][]string {
	var out [][]string
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	positional := func(c *command) []string {
		var args []string
		for _, a := range strings.Fields(c.args) {
			switch a {
			case "ID":
				args = append(args, uuid.NewString())
			case "VERSION":
				args = append(args, "1")
			default:
				args = append(args, "x")
			}
		}
		return args
	}
	for _, n := range names {
		cmd := commands[n]
		if cmd.subs == nil {
			out = append(out, append([]string{n}, positional(cmd)...))
			continue
		}
		subs := make([]string, 0, len(cmd.subs))
		for s := range cmd.subs {
			subs = append(subs, s)
		}
		sort.Strings(subs)
		for _, s := range subs {
			out = append(out, append([]string{n, s}, positional(cmd.subs[s])...))
		}
	}
	return out
}

const (
	dbSecret    = "Db-S3cret-pw"
	tokenSecret = "Tok-S3cret-value"
)

// secretDBs are $ROSTER_DB values in each form a password takes.
var secretDBs = []struct{ name, db string }{
	{"URL", "postgres://u:" + dbSecret + "@host/db"},
	{"multi-host URL", "postgres://u:" + dbSecret + "@h1:5432,h2:5432/db?sslmode=disable&search_path=roster"},
	{"password parameter", "postgres://host/db?sslmode=disable&password=" + dbSecret},
	{"keyword/value", "host=h password=" + dbSecret + " dbname=d"},
}

func assertNoSecret(t *testing.T, out, errOut string) {
	t.Helper()
	for _, s := range []string{dbSecret, tokenSecret} {
		if strings.Contains(out+errOut, s) {
			t.Fatalf("the output shows %q\nstdout:\n%s\nstderr:\n%s", s, out, errOut)
		}
	}
}

// With a password in $ROSTER_DB and a token in $ROSTER_TOKEN, no command's
// --help and no usage error shows either: the defaults are shown redacted
// (the token not at all).
func TestCLIHelpAndUsageErrorsHideSecrets(t *testing.T) {
	t.Setenv("ROSTER_TOKEN", tokenSecret)
	lines := [][]string{{}, {"help"}}
	for _, l := range commandLines() {
		lines = append(lines, append(l, "--help"), append(l, "--bogus"), append(l, "--bogus", "--json"), append(l, "-h"))
		lines = append(lines, []string{l[0], "--help"})
	}
	for _, db := range secretDBs {
		t.Run(db.name, func(t *testing.T) {
			t.Setenv("ROSTER_DB", db.db)
			for _, args := range lines {
				_, out, errOut := runCLI(t, args...)
				assertNoSecret(t, out, errOut)
			}
			// The help still says where the defaults come from.
			_, out, _ := runCLI(t, "serve", "--help")
			if !strings.Contains(out, "$ROSTER_TOKEN") || !strings.Contains(out, "$ROSTER_DB") {
				t.Fatalf("serve --help:\n%s", out)
			}
			if !strings.Contains(out, connstrMask) {
				t.Fatalf("serve --help shows no redacted --db default:\n%s", out)
			}
		})
	}
}

const connstrMask = "xxxxx"

// --help prints the help once, on stdout; a usage error prints one line on
// stderr and nothing on stdout.
func TestCLIHelpPrintedOnce(t *testing.T) {
	for _, l := range commandLines() {
		for _, help := range []string{"--help", "-h", "-help"} {
			args := append(append([]string{}, l...), help)
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				code, out, errOut := runCLI(t, args...)
				if code != 0 || strings.Count(out, "Usage: roster") != 1 || errOut != "" {
					t.Fatalf("exit %d, %d helps\nstdout:\n%s\nstderr:\n%s", code, strings.Count(out, "Usage: roster"), out, errOut)
				}
			})
		}
		args := append(append([]string{}, l...), "--bogus")
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, out, errOut := runCLI(t, args...)
			if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "--bogus") {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
		})
	}
}

// flagToken is a flag named in a help or a message.
var flagToken = regexp.MustCompile(`--[a-z][a-z-]*`)

// faultNamed finds what a usage error names: "invalid X: ...".
var faultNamed = regexp.MustCompile(`: invalid ([^ :]+):`)

// definedFlags reads the flags a command's --help lists.
func definedFlags(t *testing.T, line []string) (help string, flags map[string]bool) {
	t.Helper()
	code, out, errOut := runCLI(t, append(append([]string{}, line...), "--help")...)
	if code != 0 {
		t.Fatalf("%q --help: exit %d %s", line, code, errOut)
	}
	desc, list, ok := strings.Cut(out, "\nFlags:\n")
	if !ok {
		t.Fatalf("%q --help lists no flags:\n%s", line, out)
	}
	flags = map[string]bool{"--help": true}
	for _, l := range strings.Split(list, "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(l, "  -") {
			flags["-"+f[0]] = true
		}
	}
	return desc, flags
}

// Every flag a command's help or its messages name is one it has: the help
// and the flags agree (schedules put takes its namespace as the NAMESPACE
// argument, and says so).
func TestCommandsNameOnlyTheirFlags(t *testing.T) {
	for _, line := range commandLines() {
		desc, flags := definedFlags(t, line)
		for _, f := range flagToken.FindAllString(desc, -1) {
			if !flags[f] {
				t.Errorf("%s --help names %s, which it does not have", strings.Join(line, " "), f)
			}
		}
	}
	db := filepath.Join(t.TempDir(), "r.db")
	if code, o, e := runCLI(t, "migrate", "up", "--db", db); code != 0 {
		t.Fatal(o, e)
	}
	_, flags := definedFlags(t, []string{"schedules", "put"})
	for _, args := range [][]string{
		{"", "x", "--lane", "l", "--every", "1h"},
		{"ns", "", "--lane", "l", "--every", "1h"},
		{"bad\x01ns", "x", "--lane", "l", "--every", "1h"},
		{"ns", "x", "--every", "1h"},
		{"ns", "x", "--lane", "l"},
		{"ns", "x", "--lane", "l", "--every", "1h", "--cron", "* * * * *"},
		{"ns", "x", "--lane", "l", "--every", "1h", "--capability", ""},
		{"ns", "x", "--lane", "l", "--every", "1h", "--priority", "1", "--max-attempts", "-2"},
	} {
		code, _, errOut := runCLI(t, append(append([]string{"schedules", "put"}, args...), "--db", db)...)
		if code != 2 {
			t.Errorf("schedules put %q: exit %d, want 2: %s", args, code, errOut)
		}
		for _, f := range flagToken.FindAllString(errOut, -1) {
			if !flags[f] {
				t.Errorf("schedules put %q says %q, naming %s, which it does not have", args, strings.TrimSpace(errOut), f)
			}
		}
		// The fault is a flag or an argument, not a Go field.
		if m := faultNamed.FindStringSubmatch(errOut); m == nil || !strings.HasPrefix(m[1], "--") && m[1] != strings.ToUpper(m[1]) {
			t.Errorf("schedules put %q says %q, naming no flag or argument", args, strings.TrimSpace(errOut))
		}
	}
}
