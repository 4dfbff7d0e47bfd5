package postgres

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestNextListenWait: while the server is away the listener tries again
// every listenRetry for the first listenRetryFast, then backs off; a server
// that answers but refuses the connection gets the back-off at once.
func TestNextListenWait(t *testing.T) {
	away := fmt.Errorf("roster: unavailable: %w", errors.New("dial tcp: connection refused"))
	tooMany := fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: "53300", Message: "sorry, too many clients already"})
	login := &pgconn.PgError{Code: "28P01", Message: "password authentication failed"}
	starting := &pgconn.PgError{Code: "57P03", Message: "the database system is starting up"}
	for _, c := range []struct {
		name   string
		wait   time.Duration
		since  time.Duration
		err    error
		opened bool
		want   time.Duration
	}{
		{"server away, early in the outage", listenRetry, 2 * time.Second, away, false, listenRetry},
		{"server starting up, early", listenRetry, 2 * time.Second, starting, false, listenRetry},
		{"server away past the fast minute", listenRetry, listenRetryFast, away, false, 2 * listenRetry},
		{"back-off is capped", listenRetryMax, 2 * listenRetryFast, away, false, listenRetryMax},
		{"too many clients backs off at once", listenRetry, time.Second, tooMany, false, 2 * listenRetry},
		{"too many clients, capped", 4 * time.Second, time.Second, tooMany, false, listenRetryMax},
		{"a refused login backs off at once", listenRetry, 0, login, false, 2 * listenRetry},
		{"a connection that had opened starts over", listenRetryMax, 3 * listenRetryFast, tooMany, true, listenRetry},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := nextListenWait(c.wait, c.since, c.err, c.opened); got != c.want {
				t.Errorf("nextListenWait(%v, %v, %v, %v) = %v, want %v", c.wait, c.since, c.err, c.opened, got, c.want)
			}
		})
	}
}
