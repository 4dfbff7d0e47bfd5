package pgserver

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The helper itself: a server of the test's own comes up, survives a crash
// restart with its data, and its backends can be terminated.
func TestServerLifecycle(t *testing.T) {
	s := Start(t)
	ctx := context.Background()
	url, err := s.Database(ctx, "lifecycle")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	if n, err := s.TerminateBackends(ctx); err != nil || n != 1 {
		t.Fatalf("terminated %d backends: %v", n, err)
	}
	if err := conn.Ping(ctx); err == nil {
		t.Fatal("a terminated connection still answers")
	}
	if err := s.Restart("immediate"); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitReady(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	conn, err = pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v int
	if err := conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != 42 {
		t.Fatalf("after a crash restart: %d, %v", v, err)
	}
}

// A primary and a standby of the test's own: the standby streams (through a
// link that freezes, for the asynchronous case), the primary is killed or
// stopped, the standby is promoted, and a multi-host URL reaches it. What a
// synchronous standby or a clean switchover received survives; what an
// asynchronous one never received is lost. The promoted standby never
// waits for a standby of its own, even though its primary named one ('*')
// when it was copied.
func TestFailover(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sync     bool
		freeze   bool // freeze the link before the last insert (asynchronous)
		stopFast bool // a switchover: stop -m fast instead of a kill
		want     []int
	}{
		{name: "sync-kill", sync: true, want: []int{1, 2, 3}},
		{name: "async-frozen-kill", freeze: true, want: []int{1, 3}},
		{name: "switchover", sync: true, stopFast: true, want: []int{1, 2, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			primary := StartPrimary(t)
			if err := primary.SetSynchronous(ctx, "*"); err != nil { // copied into the standby
				t.Fatal(err)
			}
			standby := primary.Standby(t, StandbyOptions{Name: "standby", Link: tc.freeze})
			names := ""
			if tc.sync {
				names = standby.Name
			}
			if err := primary.SetSynchronous(ctx, names); err != nil {
				t.Fatal(err)
			}
			if err := primary.WaitStreaming(ctx, standby.Name, tc.sync); err != nil {
				t.Fatal(err)
			}
			conn, err := pgx.Connect(ctx, primary.URL)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Exec(ctx, "CREATE TABLE kept (v int); INSERT INTO kept VALUES (1)"); err != nil {
				t.Fatal(err)
			}
			waitRows(t, standby.URL, 1)
			if tc.freeze {
				standby.Link.Freeze()
			}
			if _, err := conn.Exec(ctx, "INSERT INTO kept VALUES (2)"); err != nil {
				t.Fatal(err)
			}
			if tc.stopFast {
				err = primary.Down("fast")
			} else {
				err = primary.Kill()
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := conn.Ping(ctx); err == nil {
				t.Fatal("a connection to the stopped primary still answers")
			}
			if c, err := pgx.Connect(ctx, primary.URL); err == nil {
				c.Close(ctx)
				t.Fatal("the stopped primary accepts connections")
			}
			if in, err := standby.InRecovery(ctx); err != nil || !in {
				t.Fatalf("the standby before its promotion: in recovery %v, %v", in, err)
			}
			if err := standby.Promote(); err != nil {
				t.Fatal(err)
			}
			if in, err := standby.InRecovery(ctx); err != nil || in {
				t.Fatalf("the promoted standby: in recovery %v, %v", in, err)
			}
			// The new primary through the multi-host URL: it takes writes
			// without waiting for a standby.
			c, err := pgx.Connect(ctx, MultiHostURL(primary, standby))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(ctx)
			if c.PgConn().Conn().RemoteAddr().String() != "127.0.0.1:"+strconv.Itoa(standby.Port()) {
				t.Fatalf("the multi-host URL reached %v", c.PgConn().Conn().RemoteAddr())
			}
			var names2 string
			if err := c.QueryRow(ctx, "SHOW synchronous_standby_names").Scan(&names2); err != nil || names2 != "" {
				t.Fatalf("the promoted standby's synchronous_standby_names: %q, %v", names2, err)
			}
			if _, err := c.Exec(ctx, "SET statement_timeout = '5s'; INSERT INTO kept VALUES (3)"); err != nil {
				t.Fatalf("a write on the promoted standby: %v", err)
			}
			rows, err := c.Query(ctx, "SELECT v FROM kept ORDER BY v")
			if err != nil {
				t.Fatal(err)
			}
			got, err := pgx.CollectRows(rows, pgx.RowTo[int])
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("after the failover the rows are %v (%v), want %v", got, err, tc.want)
			}
		})
	}
}

// waitRows waits until the table kept at loc holds n rows.
func waitRows(t *testing.T, loc string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var got int
		conn, err := pgx.Connect(context.Background(), loc)
		if err == nil {
			err = conn.QueryRow(context.Background(), "SELECT count(*) FROM kept").Scan(&got)
			conn.Close(context.Background())
		}
		if err == nil && got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the standby holds %d rows (%v), want %d", got, err, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
