package service

import (
	"bytes"
	"context"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rosterdb/roster/internal/pgtest"
)

// leakyConns are connection strings whose password some layer (net/url, pgx,
// the SQLite engine) used to print in an error, each with the pieces of its
// password that must never appear.
var leakyConns = []struct {
	name   string
	conn   string
	pieces []string
}{
	{"multi-host, a bad port", "postgres://u:Pa55:w0rd@127.0.0.1:1,127.0.0.1:x/db", []string{"Pa55", "w0rd"}},
	{"multi-host, unreachable", "postgres://u:Pa55:w0rd@127.0.0.1:1,127.0.0.1:2/db?connect_timeout=2", []string{"Pa55", "w0rd"}},
	{"an unescaped @ and a broken host", "postgres://u:Pa55@w0rd@[::1/db", []string{"Pa55", "w0rd"}},
	{"a password parameter, multi-host", "postgres://127.0.0.1:1,127.0.0.1:2/db?password=Pa55w0rd&sslmode=bogus", []string{"Pa55w0rd"}},
	{"a password parameter, one host", "postgres://127.0.0.1:1/db?sslmode=bogus&password=Pa55w0rd", []string{"Pa55w0rd"}},
	{"keyword/value (a SQLite path)", "host=127.0.0.1 port=1 password=Pa55w0rd dbname=db", []string{"Pa55w0rd"}},
}

// No error of Open or of the migration functions shows the password of the
// connection string, whatever its form.
func TestOpenErrorsHidePasswords(t *testing.T) {
	ctx := context.Background()
	for _, tc := range leakyConns {
		for _, call := range []struct {
			name string
			fn   func(conn string) error
		}{
			{"Open WithReadOnly", func(conn string) error {
				_, err := Open(ctx, conn, WithReadOnly())
				return err
			}},
			{"Open WithoutMigrate", func(conn string) error {
				_, err := Open(ctx, conn, WithoutMigrate())
				return err
			}},
			{"SchemaVersion", func(conn string) error {
				_, _, err := SchemaVersion(ctx, conn)
				return err
			}},
			{"MigrateDown", func(conn string) error { return MigrateDown(ctx, conn, 1) }},
			{"ForceVersion", func(conn string) error { return ForceVersion(ctx, conn, 1) }},
		} {
			t.Run(tc.name+"/"+call.name, func(t *testing.T) {
				t.Chdir(t.TempDir()) // a keyword/value string is a file path: created here, if at all
				err := call.fn(tc.conn)
				if err == nil {
					t.Fatal("no error")
				}
				for _, p := range tc.pieces {
					if strings.Contains(err.Error(), p) {
						t.Fatalf("the error shows %q: %v", p, err)
					}
				}
			})
		}
	}
}

// On a live server, neither the errors nor the log records of a Store show
// the password of its URL (trust authentication ignores it).
func TestPostgresPasswordNeverLogged(t *testing.T) {
	const secret = "Pa55w0rd-n0t-sh0wn"
	u, err := url.Parse(pgtest.Fresh(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), secret)
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx := context.Background()
	s, err := Open(ctx, u.String(), WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RegisterWorker(ctx, RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "i", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	bad := *u
	bad.Path = "/no_such_database_here"
	_, err = Open(ctx, bad.String(), WithLogger(log))
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Fatalf("Open of a missing database: %v", err)
	}
	if strings.Contains(logs.String(), secret) {
		t.Fatalf("a log record shows the password:\n%s", logs.String())
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent writers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
