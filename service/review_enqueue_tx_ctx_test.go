package service

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestReviewCreateExecutionsTxCallerContext: a create in the caller's
// transaction that waits for a lock until the caller's own ctx ends fails
// with that ctx's error in the chain (context.DeadlineExceeded or
// context.Canceled), whichever driver the transaction is on: lib/pq's
// error translates as pgx's does, never as a database unavailable for a
// cancel of the caller's own.
func TestReviewCreateExecutionsTxCallerContext(t *testing.T) {
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 200*time.Millisecond)
		}},
		{"cancel", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(200*time.Millisecond, cancel)
			return ctx, cancel
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conformanceShared(t, func(t *testing.T, b backend) {
				ctx := context.Background()
				loc := b.fresh(t)
				s, _ := b.open(t, loc)
				url := appURL(t, b, loc)
				item := []CreateExecutionArgs{{Namespace: "ns", Lane: "l", UniqueKey: "busy"}}
				if !b.postgres {
					// SQLite: the caller's ctx ended before the create began.
					cctx, cancel := tc.ctx()
					defer cancel()
					<-cctx.Done()
					tx := txKinds(b)[0].begin(t, url)
					defer tx.rollback()
					_, err := s.CreateExecutionsTx(cctx, tx.tx, item)
					if !errors.Is(err, cctx.Err()) {
						t.Fatalf("the caller's ctx ended (%v): err = %v, want it in the chain", cctx.Err(), err)
					}
					return
				}
				// Another transaction holds the key's lock.
				holder := txKinds(b)[0].begin(t, url)
				_, err := s.CreateExecutionsTx(ctx, holder.tx, item)
				must(t, err)
				defer holder.rollback()
				for _, k := range txKinds(b) {
					t.Run(k.name, func(t *testing.T) {
						tx := k.begin(t, url)
						defer tx.rollback()
						cctx, cancel := tc.ctx()
						defer cancel()
						_, err := s.CreateExecutionsTx(cctx, tx.tx, item)
						if cctx.Err() == nil || !errors.Is(err, cctx.Err()) {
							t.Fatalf("the caller's ctx ended (%v): err = %v, want it in the chain", cctx.Err(), err)
						}
						if errors.Is(cctx.Err(), context.Canceled) && errors.Is(err, ErrUnavailable) {
							t.Fatalf("the caller's own cancel reads as the database unavailable: %v", err)
						}
					})
				}
			})
		})
	}
}
