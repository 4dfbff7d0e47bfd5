package pgserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rosterdb/roster/internal/pgtest"
)

// replicationConf makes a server the primary of streaming standbys (most
// are PostgreSQL's defaults, written out so that they hold whatever the
// defaults become): WAL for standbys, senders and slots for them, and the
// standbys made from it (which copy its configuration) answer queries
// during recovery.
const replicationConf = "wal_level = replica\nmax_wal_senders = 10\nmax_replication_slots = 10\nhot_standby = on\n"

// hbaConf trusts every connection on 127.0.0.1 and the socket, replication
// connections included.
const hbaConf = "local all all trust\nhost all all 127.0.0.1/32 trust\n" +
	"local replication all trust\nhost replication all 127.0.0.1/32 trust\n"

// StartPrimary starts a server as Start does, configured as the primary of
// streaming standbys (Standby): wal_level replica, WAL senders and
// replication slots, hot standby, and replication connections trusted on
// 127.0.0.1.
func StartPrimary(t testing.TB) *Server {
	t.Helper()
	s := newServer(t)
	if out, err := s.run("initdb", "-D", s.dir, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"); err != nil {
		t.Fatalf("pgserver: initdb: %v\n%s", err, out)
	}
	if err := s.writeConf("postgresql.auto.conf", s.baseConf()+replicationConf, false); err != nil {
		t.Fatal(err)
	}
	if err := s.writeConf("pg_hba.conf", hbaConf, false); err != nil {
		t.Fatal(err)
	}
	if err := s.Up(); err != nil {
		t.Fatal(err)
	}
	return s
}

// StandbyOptions say how a standby replicates.
type StandbyOptions struct {
	// Name is the standby's application_name, which pg_stat_replication
	// shows and synchronous_standby_names names, and its replication
	// slot's name (lower case letters, digits and underscores).
	Name string
	// Link puts a proxy between the standby and its primary (the standby's
	// Link): freezing it stops replication, both ends left connected.
	Link bool
}

// Standby makes a streaming standby of s (a primary from StartPrimary) on
// another free port, with pg_basebackup -R into a slot of its own, starts it
// and returns it once it accepts (read-only) connections; it is stopped and
// removed when t ends. Its synchronous_standby_names is empty, whatever the
// primary's: a standby promoted with the primary's list would wait for ever
// for a standby of its own that does not exist. It replicates asynchronously
// until the primary names it (SetSynchronous).
func (s *Server) Standby(t testing.TB, o StandbyOptions) *Server {
	t.Helper()
	if o.Name == "" || strings.Trim(o.Name, "abcdefghijklmnopqrstuvwxyz0123456789_") != "" {
		t.Fatalf("pgserver: standby name %q: lower case letters, digits and underscores", o.Name)
	}
	sb := newServer(t)
	sb.Name = o.Name
	host, port := "127.0.0.1", strconv.Itoa(s.port)
	if o.Link {
		via, p := pgtest.NewProxy(t, s.URL)
		u, err := url.Parse(via)
		if err != nil {
			t.Fatal(err)
		}
		host, port = u.Hostname(), u.Port()
		sb.Link = p
	}
	if out, err := sb.run("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(s.port), "-U", "postgres",
		"-D", sb.dir, "-R", "-X", "stream", "-C", "-S", o.Name, "-c", "fast", "--no-sync"); err != nil {
		t.Fatalf("pgserver: pg_basebackup: %v\n%s", err, out)
	}
	// Appended after what the primary's copy and -R wrote: the last setting
	// of a file wins.
	conf := sb.baseConf() + fmt.Sprintf("primary_conninfo = 'host=%s port=%s user=postgres application_name=%s'\n"+
		"primary_slot_name = '%s'\nsynchronous_standby_names = ''\nhot_standby = on\n", host, port, o.Name, o.Name)
	if err := sb.writeConf("postgresql.auto.conf", conf, true); err != nil {
		t.Fatal(err)
	}
	if err := sb.Up(); err != nil {
		t.Fatal(err)
	}
	return sb
}

// SetSynchronous sets the primary's synchronous_standby_names to names (""
// for none) with synchronous_commit on, and reloads its configuration:
// from then on a commit returns once the standbys named flushed it.
func (s *Server) SetSynchronous(ctx context.Context, names string) error {
	conn, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for _, q := range []string{
		"ALTER SYSTEM SET synchronous_standby_names = " + quote(names),
		"ALTER SYSTEM SET synchronous_commit = on",
		"SELECT pg_reload_conf()",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("pgserver: %s: %w", q, err)
		}
	}
	return nil
}

// WaitStreaming waits until the primary s shows the standby named name
// streaming in pg_stat_replication (with sync, as its synchronous standby),
// until ctx ends.
func (s *Server) WaitStreaming(ctx context.Context, name string, sync bool) error {
	var last string
	for {
		state, err := s.replicationState(ctx, name)
		switch {
		case err != nil:
			last = err.Error()
		case state == "streaming sync" || (!sync && strings.HasPrefix(state, "streaming ")):
			return nil
		default:
			last = state
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgserver: standby %s is not streaming (%s): %w", name, last, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// replicationState is "state sync_state" of the standby named name, as the
// primary shows it, or "absent".
func (s *Server) replicationState(ctx context.Context, name string) (string, error) {
	conn, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	var state string
	err = conn.QueryRow(ctx, "SELECT state || ' ' || sync_state FROM pg_stat_replication WHERE application_name = $1", name).Scan(&state)
	if errors.Is(err, pgx.ErrNoRows) {
		return "absent", nil
	}
	return state, err
}

// Kill crashes the server: SIGKILL to the postmaster, whose backends and
// auxiliary processes then exit as they see it gone (a client's connection
// breaks, nothing is written any more). It returns once every process of the
// server is gone and its port refuses connections.
func (s *Server) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	pid, err := s.postmasterPID()
	if err != nil {
		return err
	}
	children := childrenOf(pid)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("pgserver: kill %d: %w", pid, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		left := []int{}
		for _, p := range append([]int{pid}, children...) {
			if alive(p) {
				left = append(left, p)
			}
		}
		if len(left) == 0 && !s.listening() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pgserver: killed postmaster %d, but processes %v remain or port %d still answers", pid, left, s.port)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Promote promotes a standby to a primary (pg_ctl promote -w): it returns
// once the server accepts writes.
func (s *Server) Promote() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if out, err := s.pgctl("promote", "-w", "-t", "60"); err != nil {
		return fmt.Errorf("pgserver: promote: %w\n%s", err, out)
	}
	return nil
}

// InRecovery reports whether the server is a standby (pg_is_in_recovery).
func (s *Server) InRecovery(ctx context.Context) (bool, error) {
	conn, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		return false, err
	}
	defer conn.Close(ctx)
	var v bool
	err = conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&v)
	return v, err
}

// Port is the server's TCP port on 127.0.0.1.
func (s *Server) Port() int { return s.port }

// MultiHostURL is the URL that reaches whichever of servers accepts writes
// (pgx, like libpq, tries the hosts in order and keeps the first that is
// not read-only): postgres://postgres@127.0.0.1:P1,127.0.0.1:P2/postgres
// with target_session_attrs=read-write.
func MultiHostURL(servers ...*Server) string {
	hosts := make([]string, len(servers))
	for i, s := range servers {
		hosts[i] = "127.0.0.1:" + strconv.Itoa(s.port)
	}
	return "postgres://postgres@" + strings.Join(hosts, ",") + "/postgres?sslmode=disable&target_session_attrs=read-write"
}

// postmasterPID reads the postmaster's pid, the first line of
// postmaster.pid.
func (s *Server) postmasterPID() (int, error) {
	b, err := os.ReadFile(filepath.Join(s.dir, "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("pgserver: the server is not running: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("pgserver: postmaster.pid: %q", line)
	}
	return pid, nil
}

// listening reports whether something accepts connections on the port.
func (s *Server) listening() bool {
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(s.port), 200*time.Millisecond)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// procStat returns a process's state and parent pid from /proc/pid/stat.
func procStat(pid int) (state byte, ppid int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	return f[0][0], ppid, true
}

// alive reports whether a process exists and is not a zombie.
func alive(pid int) bool {
	state, _, ok := procStat(pid)
	return ok && state != 'Z' && state != 'X'
}

// childrenOf lists the processes whose parent is pid.
func childrenOf(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if _, ppid, ok := procStat(p); ok && ppid == pid {
			out = append(out, p)
		}
	}
	return out
}

// quote quotes s as an SQL string literal.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
