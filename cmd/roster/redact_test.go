package main

import (
	"fmt"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rosterdb/roster/internal/pgtest"
)

// No error the CLI prints shows a password, whatever the form of the
// connection string and wherever it came from (--db or $ROSTER_DB).
func TestCLIErrorsHidePasswords(t *testing.T) {
	for _, db := range []struct {
		name   string
		db     string
		pieces []string
	}{
		{"multi-host, a bad port", "postgres://u:Pa55:w0rd@127.0.0.1:1,127.0.0.1:x/db", []string{"Pa55", "w0rd"}},
		{"multi-host, unreachable", "postgres://u:Pa55w0rd@127.0.0.1:1,127.0.0.1:2/db?connect_timeout=2", []string{"Pa55w0rd"}},
		{"an unescaped @ and a broken host", "postgres://u:Pa55@w0rd@[::1/db", []string{"Pa55", "w0rd"}},
		{"a password parameter, multi-host", "postgres://127.0.0.1:1,127.0.0.1:2/db?password=Pa55w0rd&sslmode=bogus", []string{"Pa55w0rd"}},
		{"a password parameter, one host", "postgres://127.0.0.1:1/db?sslmode=bogus&password=Pa55w0rd", []string{"Pa55w0rd"}},
		{"keyword/value (a SQLite path)", "host=127.0.0.1 port=1 password=Pa55w0rd dbname=db", []string{"Pa55w0rd"}},
	} {
		for _, via := range []string{"--db", "$ROSTER_DB"} {
			t.Run(db.name+"/"+via, func(t *testing.T) {
				for _, l := range commandLines() {
					t.Run(strings.Join(l, " "), func(t *testing.T) {
						t.Chdir(t.TempDir()) // a keyword/value string is a file path
						args := append([]string{}, l...)
						if via == "--db" {
							args = append(args, "--db", db.db)
						} else {
							t.Setenv("ROSTER_DB", db.db)
						}
						for _, extra := range [][]string{nil, {"--json"}} {
							_, out, errOut := runCLI(t, append(args, extra...)...)
							for _, p := range db.pieces {
								if strings.Contains(out+errOut, p) {
									t.Fatalf("the output shows %q\nstdout:\n%s\nstderr:\n%s", p, out, errOut)
								}
							}
						}
					})
				}
			})
		}
	}
}

// hintArgs returns the arguments a POSIX shell makes of the command the
// message ends with ("... with: roster migrate up --db '...'").
func hintArgs(t *testing.T, msg string) []string {
	t.Helper()
	msg = strings.TrimSpace(msg)
	i := strings.LastIndex(msg, ": roster migrate up ")
	if i < 0 {
		t.Fatalf("no hint in %q", msg)
	}
	cmd := msg[i+2:]
	out, err := exec.Command("sh", "-c", `roster() { for a in "$@"; do printf '%s\n' "$a"; done; }; `+cmd).Output()
	if err != nil {
		t.Fatalf("sh -c %q: %v", cmd, err)
	}
	return strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
}

// The hint to run 'roster migrate up --db ...' is a command a POSIX shell
// reads back exactly (quoted, embedded quotes escaped), with a password
// shown as xxxxx and said so; pasted, it creates the database.
func TestCLIMigrateUpHintIsPasteable(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"plain.db", "with space.db", "it's.db", "a;b`c$HOME&d|e*f.db", "quote'and\"double.db"} {
		t.Run(name, func(t *testing.T) {
			db := filepath.Join(dir, name)
			code, _, errOut := runCLI(t, "workers", "list", "--db", db)
			if code != 1 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			args := hintArgs(t, errOut)
			if want := []string{"migrate", "up", "--db", db}; fmt.Sprint(args) != fmt.Sprint(want) {
				t.Fatalf("the shell reads %q, want %q (message: %s)", args, want, errOut)
			}
			if code, _, errOut := runCLI(t, args...); code != 0 {
				t.Fatalf("the pasted hint: exit %d: %s", code, errOut)
			}
			if code, _, errOut := runCLI(t, "workers", "list", "--db", db); code != 0 {
				t.Fatalf("after the pasted hint: exit %d: %s", code, errOut)
			}
		})
	}
	// A PostgreSQL schema without roster's tables: the URL holds '&'.
	t.Run("postgres", func(t *testing.T) {
		base := pgtest.Fresh(t)
		u, err := url.Parse(base)
		must(t, err)
		u.User = url.UserPassword(u.User.Username(), dbSecret) // trust authentication ignores it
		for _, tc := range []struct {
			db, want string
			note     bool
		}{
			{base, base, false},
			{u.String(), connstrRedact(u), true},
		} {
			code, _, errOut := runCLI(t, "workers", "list", "--db", tc.db)
			if code != 1 || !strings.Contains(base, "&") {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			assertNoSecret(t, "", errOut)
			args := hintArgs(t, errOut)
			if want := []string{"migrate", "up", "--db", tc.want}; fmt.Sprint(args) != fmt.Sprint(want) {
				t.Fatalf("the shell reads %q, want %q (message: %s)", args, want, errOut)
			}
			if tc.note != strings.Contains(errOut, "password") {
				t.Fatalf("a redacted password must be said so, and only then: %s", errOut)
			}
		}
		if code, _, errOut := runCLI(t, "migrate", "up", "--db", base); code != 0 {
			t.Fatalf("migrate up: %d %s", code, errOut)
		}
	})
}

// connstrRedact is u with its password as xxxxx, as url.URL.String writes it.
func connstrRedact(u *url.URL) string {
	r := *u
	r.User = url.UserPassword(u.User.Username(), connstrMask)
	return r.String()
}
