package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/rosterdb/roster/internal/engine"
	"github.com/rosterdb/roster/internal/pgserver"
)

// forwarder is an endpoint that can be moved from one server to another, as
// a DNS name, a virtual IP or a TCP proxy is moved by a failover: each new
// connection goes to the current target; connections made before stay where
// they are.
type forwarder struct {
	ln     net.Listener
	target atomic.Value // "host:port"
	mu     sync.Mutex
	conns  []net.Conn
}

func newForwarder(t *testing.T, target string) *forwarder {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &forwarder{ln: ln}
	f.target.Store(target)
	t.Cleanup(func() {
		_ = ln.Close()
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, c := range f.conns {
			_ = c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", f.target.Load().(string))
			if err != nil {
				_ = c.Close()
				continue
			}
			f.mu.Lock()
			f.conns = append(f.conns, c, u)
			f.mu.Unlock()
			go func() { _, _ = io.Copy(u, c); _ = u.Close() }()
			go func() { _, _ = io.Copy(c, u); _ = c.Close() }()
		}
	}()
	return f
}

func (f *forwarder) url() string {
	return fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", f.ln.Addr())
}

// waitReplayed waits until the standby replayed everything the primary
// wrote so far.
func waitReplayed(t *testing.T, primary, standby *pgserver.Server) {
	t.Helper()
	ctx := context.Background()
	p, err := pgx.Connect(ctx, primary.URL)
	must(t, err)
	defer p.Close(ctx)
	var lsn string
	must(t, p.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn))
	s, err := pgx.Connect(ctx, standby.URL)
	must(t, err)
	defer s.Close(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var done bool
		must(t, s.QueryRow(ctx, "SELECT pg_last_wal_replay_lsn() >= $1::text::pg_lsn", lsn).Scan(&done))
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the standby did not replay the primary's WAL")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// An endpoint that reached a standby (a DNS answer cached after the old
// primary came back as a standby, a name moved late) is moved to the
// primary: the next write succeeds, even though the pool held connections to
// the standby, healthy but read-only, on which every write failed ("cannot
// execute ... in a read-only transaction") until they aged out of the pool
// an hour later; and the listening connection, which cannot LISTEN on a
// standby, moves to the primary too.
func TestWritesLeaveAServerInRecovery(t *testing.T) {
	primary := pgserver.StartPrimary(t)
	standby := primary.Standby(t, pgserver.StandbyOptions{Name: "standby"})
	writer := openAt(t, primary.URL) // migrates
	waitReplayed(t, primary, standby)

	endpoint := newForwarder(t, fmt.Sprintf("127.0.0.1:%d", standby.Port()))
	e := openAt(t, endpoint.url(), func(c *engine.Config) { c.Migrate = false })
	sub := e.Subscribe("ns")
	defer sub.Close()
	sub.Arm()
	ctx := context.Background()
	insert := func(e *Engine) error {
		id, _ := uuid.NewV7()
		return e.Write(ctx, func(ctx context.Context, q engine.Queries) error {
			return q.ExecutionInsert(ctx, engine.Execution{ID: id, Namespace: "ns", Lane: "l", MaxAttempts: 1, CreatedAtMs: 1, RunAtMs: 1})
		})
	}
	// Warm the pool on the standby: several connections, as a busy process
	// holds.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			_ = e.Read(ctx, func(ctx context.Context, q engine.Queries) error {
				_, err := e.pool.Exec(ctx, "SELECT pg_sleep(0.05)")
				return err
			})
		})
	}
	wg.Wait()
	if err := insert(e); !errors.Is(err, engine.ErrUnavailable) {
		t.Fatalf("a write on a standby: %v, want ErrUnavailable", err)
	}

	endpoint.target.Store(fmt.Sprintf("127.0.0.1:%d", primary.Port()))
	if err := insert(e); err != nil {
		t.Fatalf("the endpoint moved to the primary, but the next write failed: %v", err)
	}
	// The listener LISTENs on the primary, and hears a change made there.
	var channel string
	must(t, writer.pool.QueryRow(ctx, "SELECT 'roster_' || md5(current_schema())").Scan(&channel))
	deadline := time.Now().Add(15 * time.Second)
	for {
		var n int
		must(t, writer.pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE query = $1",
			"LISTEN "+pgx.Identifier{channel}.Sanitize()).Scan(&n))
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the listening connection did not move to the primary")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for drained := false; !drained; {
		select {
		case <-sub.C():
		case <-time.After(300 * time.Millisecond):
			drained = true
		}
	}
	must(t, insert(writer))
	select {
	case <-sub.C():
	case <-time.After(10 * time.Second):
		t.Fatal("the listener did not hear a change on the primary")
	}
}
