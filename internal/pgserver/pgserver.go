// Package pgserver runs a PostgreSQL server of a test's own: initdb into a
// temporary directory, a free port, and pg_ctl to stop, start, crash
// (-m immediate) and restart it, so that a test can hurt the server without
// disturbing any other test. It uses the machine's PostgreSQL binaries
// (Debian: /usr/lib/postgresql/N/bin), run as the postgres user when the
// test runs as root (PostgreSQL refuses to run as root).
//
// For failovers (replication.go) a primary streams to a standby of its own
// (pg_basebackup -R on another free port), synchronously or not, the link
// between them optionally through a proxy a test can freeze; the primary can
// be killed (SIGKILL of the postmaster) or stopped, and the standby promoted.
package pgserver

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rosterdb/roster/internal/pgtest"
)

// Server is a private PostgreSQL server.
type Server struct {
	bin  string
	dir  string // data directory
	sock string // socket directory
	port int
	mu   sync.Mutex
	// URL reaches the server's postgres database over TCP.
	URL string
	// Name is a standby's application_name (what pg_stat_replication shows
	// and synchronous_standby_names names); "" for a primary.
	Name string
	// Link is the proxy a standby made with StandbyOptions.Link replicates
	// through (Freeze cuts replication); nil otherwise.
	Link *pgtest.Proxy
}

// BinDir finds the PostgreSQL server binaries, or "".
func BinDir() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Strings(dirs)
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "pg_ctl")); err == nil {
			return dirs[i]
		}
	}
	return ""
}

// Start initializes and starts a server, stopped and removed when t ends. It
// skips t when the binaries are missing, unless CI is set.
func Start(t testing.TB) *Server {
	t.Helper()
	return start(t, "")
}

// binDir returns BinDir, or skips t (fails it under CI) without binaries.
func binDir(t testing.TB) string {
	t.Helper()
	bin := BinDir()
	if bin == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("pgserver: no PostgreSQL binaries under /usr/lib/postgresql/*/bin")
		}
		t.Skip("pgserver: no PostgreSQL binaries under /usr/lib/postgresql/*/bin (Debian's postgresql package)")
	}
	return bin
}

// newServer prepares a Server on a free port in a new temporary directory
// (given to the postgres user when this is root), stopped and removed when t
// ends; its data directory is not made yet.
func newServer(t testing.TB) *Server {
	t.Helper()
	bin := binDir(t)
	root, err := os.MkdirTemp("", "roster-pg-")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{bin: bin, dir: filepath.Join(root, "data"), sock: root, port: freePort(t)}
	if os.Geteuid() == 0 {
		uid, gid := postgresUser(t)
		if err := os.Chown(root, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_, _ = s.pgctl("stop", "-m", "immediate")
		_ = os.RemoveAll(root)
	})
	s.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
	return s
}

// start initializes and starts a server whose configuration is the test
// defaults followed by extra.
func start(t testing.TB, extra string) *Server {
	t.Helper()
	s := newServer(t)
	if out, err := s.run("initdb", "-D", s.dir, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"); err != nil {
		t.Fatalf("pgserver: initdb: %v\n%s", err, out)
	}
	if err := s.writeConf("postgresql.auto.conf", s.baseConf()+extra, false); err != nil {
		t.Fatal(err)
	}
	if err := s.Up(); err != nil {
		t.Fatal(err)
	}
	return s
}

// baseConf is every test server's configuration: its own port and socket
// directory, and speed over durability (the tests crash servers, not hosts).
func (s *Server) baseConf() string {
	return fmt.Sprintf("port = %d\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '%s'\n"+
		"fsync = off\nfull_page_writes = off\nmax_connections = 60\nshared_buffers = 32MB\n", s.port, s.sock)
}

// writeConf writes (or, with appendTo, appends to) a file of the data
// directory, owned by the postgres user.
func (s *Server) writeConf(name, text string, appendTo bool) error {
	flags := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if appendTo {
		flags = os.O_CREATE | os.O_WRONLY | os.O_APPEND
	}
	path := filepath.Join(s.dir, name)
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return err
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return os.Chown(path, uid, gid)
	}
	return nil
}

// postgresUser returns the postgres user's uid and gid (running as root).
func postgresUser(t testing.TB) (uid, gid int) {
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatalf("pgserver: running as root needs a postgres user: %v", err)
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return uid, gid
}

// Up starts the (stopped) server and waits until it accepts connections.
func (s *Server) Up() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if out, err := s.pgctl("start", "-w", "-t", "60", "-l", filepath.Join(s.sock, "log")); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.sock, "log"))
		return fmt.Errorf("pgserver: start: %w\n%s\n%s", err, out, log)
	}
	return nil
}

// Down stops the server: mode "fast" (clean) or "immediate" (a crash: the
// next start replays the WAL).
func (s *Server) Down(mode string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if out, err := s.pgctl("stop", "-w", "-m", mode); err != nil {
		return fmt.Errorf("pgserver: stop -m %s: %w\n%s", mode, err, out)
	}
	return nil
}

// Restart stops the server with mode and starts it again.
func (s *Server) Restart(mode string) error {
	if err := s.Down(mode); err != nil {
		return err
	}
	return s.Up()
}

// TerminateBackends ends every client backend but the caller's, as an
// administrator (or a failover) would, and returns how many it ended.
func (s *Server) TerminateBackends(ctx context.Context) (int, error) {
	conn, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()`).Scan(&n)
	return n, err
}

// Database creates a database and returns its URL.
func (s *Server) Database(ctx context.Context, name string) (string, error) {
	conn, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", err
	}
	return strings.Replace(s.URL, "/postgres?", "/"+name+"?", 1), nil
}

func (s *Server) pgctl(args ...string) ([]byte, error) {
	return s.run("pg_ctl", append([]string{"-D", s.dir}, args...)...)
}

// run runs a PostgreSQL binary, as the postgres user when this is root.
func (s *Server) run(name string, args ...string) ([]byte, error) {
	path := filepath.Join(s.bin, name)
	var cmd *exec.Cmd
	if os.Geteuid() == 0 {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	cmd.Dir = s.sock
	return cmd.CombinedOutput()
}

// freePort asks the kernel for a free TCP port.
func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// WaitReady waits until the server accepts connections, up to d.
func (s *Server) WaitReady(d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, s.URL)
		cancel()
		if err == nil {
			_ = conn.Close(context.Background())
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}
