package service

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rosterdb/roster/internal/pgtest"
)

// roundTripProxy forwards TCP to the PostgreSQL server and counts the round
// trips clients start: Sync ('S') and simple Query ('Q') messages.
type roundTripProxy struct {
	ln     net.Listener
	target string
	trips  atomic.Int64
}

func newRoundTripProxy(t *testing.T, target string) *roundTripProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	p := &roundTripProxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *roundTripProxy) serve(c net.Conn) {
	defer c.Close()
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer s.Close()
	go func() { _, _ = io.Copy(c, s) }()
	// Startup message: int32 length, then the rest.
	var hdr [4]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return
	}
	n := binary.BigEndian.Uint32(hdr[:])
	body := make([]byte, n-4)
	if _, err := io.ReadFull(c, body); err != nil {
		return
	}
	_, _ = s.Write(append(hdr[:], body...))
	for {
		var h [5]byte
		if _, err := io.ReadFull(c, h[:]); err != nil {
			return
		}
		if h[0] == 'S' || h[0] == 'Q' {
			p.trips.Add(1)
		}
		m := binary.BigEndian.Uint32(h[1:])
		rest := make([]byte, m-4)
		if _, err := io.ReadFull(c, rest); err != nil {
			return
		}
		if _, err := s.Write(append(h[:], rest...)); err != nil {
			return
		}
	}
}

// A batch create on PostgreSQL is one round trip (unnest), with unique keys
// too: counted by a proxy on the wire (Sync and Query messages).
func TestKeyedBatchIsOneRoundTrip(t *testing.T) {
	loc := pgtest.Fresh(t)
	u, err := url.Parse(loc)
	must(t, err)
	p := newRoundTripProxy(t, u.Host)
	u.Host = p.ln.Addr().String()
	b := backends()[2]
	s, _ := b.open(t, u.String())
	ctx := context.Background()
	batch := func(keyed bool) int64 {
		as := make([]CreateExecutionArgs, 500)
		for i := range as {
			as[i] = CreateExecutionArgs{Namespace: "ns", Lane: "l"}
			if keyed {
				as[i].UniqueKey = fmt.Sprintf("k%d", i)
			}
		}
		before := p.trips.Load()
		_, err := s.CreateExecutions(ctx, as)
		must(t, err)
		return p.trips.Load() - before
	}
	plain, keyed := batch(false), batch(true)
	if keyed > plain+10 {
		t.Fatalf("a batch of 500 executions took %d round trips without keys, %d with UniqueKeys", plain, keyed)
	}
}

// A leader whose lease lapsed while its maintenance write waited for a lock
// commits nothing once another instance took over: every maintenance write
// is fenced by the leader's epoch in its own transaction.
func TestLapsedLeaderWritesNothing(t *testing.T) {
	loc := pgtest.Fresh(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logA, logB logBuffer
	sa, err := Open(ctx, loc, WithLogger(slog.New(slog.NewJSONHandler(&logA, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	must(t, err)
	defer sa.Close()
	sb, err := Open(ctx, loc, WithoutMigrate(), WithLogger(slog.New(slog.NewJSONHandler(&logB, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	must(t, err)
	defer sb.Close()
	must(t, sa.PutSchedule(ctx, Schedule{Namespace: "ns", Name: "s", Every: time.Second, Template: CreateExecutionArgs{Lane: "l"}}))
	time.Sleep(1100 * time.Millisecond) // its period is due

	// Another session holds the schedule's row for a while (a slow
	// operator transaction, autovacuum, a lock queue...).
	conn, err := pgx.Connect(ctx, loc)
	must(t, err)
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	must(t, err)
	_, err = tx.Exec(ctx, "SELECT 1 FROM schedules FOR UPDATE")
	must(t, err)

	const interval = 200 * time.Millisecond
	go func() { _ = sa.RunSweeper(ctx, SweeperArgs{Interval: interval, InstanceID: "a"}) }()
	waitLeader := func(want string) time.Time {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if id, _, err := sb.Leader(ctx); err == nil && id == want {
				return time.Now()
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatalf("%s never led", want)
		return time.Time{}
	}
	waitLeader("a")
	go func() { _ = sb.RunSweeper(ctx, SweeperArgs{Interval: interval, InstanceID: "b"}) }()
	bLeads := waitLeader("b") // a's lease lapsed while its run waits
	time.Sleep(200 * time.Millisecond)
	must(t, tx.Commit(ctx)) // the lock goes
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logA.String(), `"msg":"roster: sweeper run"`) && !strings.Contains(logA.String(), "lost the maintenance leadership") &&
		time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	for _, line := range strings.Split(logA.String(), "\n") {
		var rec struct {
			Msg       string `json:"msg"`
			Ended     int64  `json:"ended"`
			Scheduled int    `json:"scheduled"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil || rec.Msg != "roster: sweeper run" {
			continue
		}
		if ended := time.Unix(0, rec.Ended); ended.After(bLeads) && rec.Scheduled > 0 {
			t.Fatalf("b led from %v; a's run (epoch of its lapsed lease) created %d schedule run(s) and ended %v later:\n%s",
				bLeads.Format("15:04:05.000"), rec.Scheduled, ended.Sub(bLeads), line)
		}
	}
}

type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
