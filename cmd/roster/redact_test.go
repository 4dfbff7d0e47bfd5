package main

import (
	"strings"
	"testing"
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
