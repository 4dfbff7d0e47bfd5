package main

import (
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
