package pgserver

import (
	"context"
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
