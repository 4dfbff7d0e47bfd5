package postgres

import (
	stdbytes "bytes"
	"context"
	"errors"
	"io"
	"math"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/rosterdb/roster/internal/engine"
	"github.com/rosterdb/roster/internal/pgtest"
)

// sendRefusal mimics how pgproto3 reports a message it would not encode:
// a write failure that says it is safe to retry.
type sendRefusal struct{ msg string }

func (e sendRefusal) Error() string     { return "write failed: " + e.msg }
func (e sendRefusal) SafeToRetry() bool { return true }

// A statement the client refuses to send (over a limit of the protocol: a
// message over 1 GiB, too many format codes) is ErrInvalidInput, never a
// lost connection, and a write meeting one is not run again: it would be
// refused the same way.
func TestClientRefusalIsInvalidInputNotRetried(t *testing.T) {
	// pgx's own refusal, made for real: a Bind of 65,536 format codes.
	f := pgproto3.NewFrontend(stdbytes.NewReader(nil), io.Discard)
	f.Send(&pgproto3.Bind{ParameterFormatCodes: make([]int16, math.MaxUint16+1)})
	refusal := f.Flush()
	if refusal == nil {
		t.Fatal("pgproto3 encoded 65,536 format codes")
	}
	e := openAt(t, pgtest.Fresh(t))
	for name, refused := range map[string]error{
		"too many parameter format codes": refusal,
		"message body too large":          sendRefusal{"message body too large"},
	} {
		t.Run(name, func(t *testing.T) {
			got := translate(refused)
			if !errors.Is(got, engine.ErrInvalidInput) || errors.Is(got, engine.ErrUnavailable) || safeToRetry(got) || safeToRetry(refused) {
				t.Fatalf("translate(%v) = %v (safe to retry: %v), want ErrInvalidInput, not retried", refused, got, safeToRetry(got))
			}
			calls := 0
			err := e.Write(context.Background(), func(context.Context, engine.Queries) error {
				calls++
				return translate(refused)
			})
			if calls != 1 || !errors.Is(err, engine.ErrInvalidInput) {
				t.Fatalf("a write refused by the client ran %d times and answered %v, want once and ErrInvalidInput", calls, err)
			}
		})
	}
}
