package service

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgreSQL: a batch of more than 1 GiB of payloads (65 items of 16 MiB,
// each valid) is created in one transaction, in statements of at most
// 64 MiB (a message and an array stop at 1 GiB), with unique keys or
// without; and a claim of 65 over them takes what fits in 64 MiB. (The
// items share one payload slice, and the payload compresses, so that the
// client and the server hold little of the gigabyte at once.)
func TestBatchesOverAGigabyte(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: two gigabytes through PostgreSQL take a minute or more")
	}
	t.Parallel()
	b := backends()[2]
	// A gigabyte takes the server here (two shared cores) about 40 s to
	// store, past the 30 s default statement timeout that also bounds a
	// call on the client's side: this test is about the sizes, not speed.
	loc := b.fresh(t)
	s, _ := b.open(t, loc+"&statement_timeout=600000")
	// Each step has a budget of its own: on a loaded machine one create of
	// the gigabyte has taken three minutes.
	step := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		t.Cleanup(cancel)
		return ctx
	}
	worker(t, s, "ns", "i", []string{"l"}, nil)
	payload := bytes.Repeat([]byte{'g'}, maxPayloadBytes)
	const n = 65
	for _, keyed := range []bool{false, true} {
		items := make([]CreateExecutionArgs, n)
		for i := range items {
			items[i] = CreateExecutionArgs{Namespace: "ns", Lane: "l", Payload: payload}
			if keyed {
				items[i].UniqueKey = fmt.Sprintf("big-%d", i)
			}
		}
		began := time.Now()
		ids, err := s.CreateExecutions(step(), items)
		if err != nil {
			t.Fatalf("CreateExecutions of %d items of 16 MiB (keyed %v): %v after %v", n, keyed, err, time.Since(began))
		}
		t.Logf("created %d x 16 MiB (keyed %v) in %v", len(ids), keyed, time.Since(began))
	}
	// Counted in SQL: listing them would read back their gigabytes.
	ctx := step()
	conn, err := pgx.Connect(ctx, b.direct(t, loc))
	must(t, err)
	defer conn.Close(ctx)
	var got int
	must(t, conn.QueryRow(ctx, "SELECT count(*) FROM executions WHERE octet_length(payload) = $1", maxPayloadBytes).Scan(&got))
	if got != 2*n {
		t.Fatalf("%d executions of 16 MiB, want %d", got, 2*n)
	}
	leases, err := s.ClaimExecutions(ctx, ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Minute}, n)
	if err != nil {
		t.Fatalf("ClaimExecutions(%d) over executions of 16 MiB: %v", n, err)
	}
	if len(leases) != 4 {
		t.Fatalf("ClaimExecutions(%d) took %d executions of 16 MiB, want the 4 that fit in 64 MiB", n, len(leases))
	}
}
