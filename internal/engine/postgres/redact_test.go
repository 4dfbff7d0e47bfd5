package postgres

import (
	"context"
	"strings"
	"testing"
)

// The engine's own errors (Open and Admin, before any Store wraps them) never
// show a password, in any URL form: multi-host, unparsable by net/url, or a
// password parameter.
func TestOpenErrorsHidePasswords(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		url    string
		pieces []string
	}{
		{"multi-host, a bad port", "postgres://u:Pa55:w0rd@127.0.0.1:1,127.0.0.1:x/db", []string{"Pa55", "w0rd"}},
		{"an unescaped @ and a broken host", "postgres://u:Pa55@w0rd@[::1/db", []string{"Pa55", "w0rd"}},
		{"a password parameter, multi-host", "postgres://127.0.0.1:1,127.0.0.1:2/db?password=Pa55w0rd&sslmode=bogus", []string{"Pa55w0rd"}},
		{"a password parameter, one host", "postgres://127.0.0.1:1/db?sslmode=bogus&password=Pa55w0rd", []string{"Pa55w0rd"}},
		{"multi-host, unreachable", "postgres://u:Pa55w0rd@127.0.0.1:1,127.0.0.1:2/db?connect_timeout=2", []string{"Pa55w0rd"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open(ctx, tc.url, testConfig())
			_, aerr := Admin(ctx, tc.url, testConfig())
			for _, err := range []error{err, aerr} {
				if err == nil {
					t.Fatal("no error")
				}
				for _, p := range tc.pieces {
					if strings.Contains(err.Error(), p) {
						t.Fatalf("the error shows %q: %v", p, err)
					}
				}
			}
		})
	}
}
