package postgres

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rosterdb/roster/internal/engine"
)

// unreachableAfter is how long connection attempts may go on without one
// succeeding before a write that waits for a new connection calls the
// server unreachable: a healthy server answers a connect well within it.
const unreachableAfter = time.Second

// contact is what the engine last heard from the server, so that a write
// that found no pooled connection within the admission time can say which
// it met: a pool that is only busy (the server answers: ErrOverloaded), or a
// server that cannot be reached (ErrUnavailable). The times are Unix
// nanoseconds of the local clock, 0 for never.
type contact struct {
	answered atomic.Int64 // the last statement or connect the server answered
	lost     atomic.Int64 // the last write whose connection broke or went silent
	// connecting is when the connection attempts under way began: the
	// first attempt since the last one that succeeded (0: none since).
	connecting atomic.Int64
}

// watch hooks the pool's connects: an attempt starts the connecting clock,
// a success stops it.
func (c *contact) watch(pcfg *pgxpool.Config) {
	before, after := pcfg.BeforeConnect, pcfg.AfterConnect
	pcfg.BeforeConnect = func(ctx context.Context, cc *pgx.ConnConfig) error {
		c.connecting.CompareAndSwap(0, time.Now().UnixNano())
		if before != nil {
			return before(ctx, cc)
		}
		return nil
	}
	pcfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		if after != nil {
			if err := after(ctx, conn); err != nil {
				return err
			}
		}
		c.answered.Store(time.Now().UnixNano())
		c.connecting.Store(0)
		return nil
	}
}

// note records the outcome of a write's statements: the server answered
// (no error, or an error of its own), or the connection was lost.
func (c *contact) note(err error) {
	var pe *pgconn.PgError
	switch {
	case err == nil, errors.As(err, &pe), errors.Is(err, engine.ErrNoRows):
		c.answered.Store(time.Now().UnixNano())
	case connectionLost(err):
		c.lost.Store(time.Now().UnixNano())
	}
}

// unreachable reports whether the server looks unreachable now: the last
// write's connection was lost after it last answered, or connection
// attempts have gone on without success for unreachableAfter.
func (c *contact) unreachable() bool {
	if c.lost.Load() > c.answered.Load() {
		return true
	}
	since := c.connecting.Load()
	return since != 0 && time.Since(time.Unix(0, since)) >= unreachableAfter
}
