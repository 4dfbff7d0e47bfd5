package service

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rosterdb/roster/internal/pgtest"
)

// t0 is the fixed start of every test clock.
var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// fakeClock is an injected clock that moves only when told to.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock { return &fakeClock{t: t0} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// backend is one engine configuration the conformance suite runs on: every
// behavioural test of SPEC sections 2-6 runs once per backend.
type backend struct {
	name string
	// shared: several Stores may open one location (a file, a server);
	// a private in-memory database is not shared.
	shared bool
	// fresh returns the location of a new, empty database, removed when
	// the test ends.
	fresh func(t testing.TB) string
}

// backends lists the engines under test. A new engine adds one line here.
func backends() []backend {
	return []backend{
		{name: "sqlite-memory", fresh: func(testing.TB) string { return ":memory:" }},
		{name: "sqlite-file", shared: true, fresh: func(t testing.TB) string {
			return filepath.Join(t.TempDir(), "roster.db")
		}},
		{name: "postgres", shared: true, fresh: pgtest.Fresh},
	}
}

// open opens a Store at loc on a fake clock, closed when the test ends.
func (b backend) open(t testing.TB, loc string, opts ...Option) (*Store, *fakeClock) {
	t.Helper()
	clock := newClock()
	s, err := Open(context.Background(), loc, append([]Option{WithClock(clock.Now)}, opts...)...)
	if err != nil {
		t.Fatalf("%s: Open: %v", b.name, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, clock
}

// newStore opens a Store on a fresh database of the backend.
func (b backend) newStore(t testing.TB, opts ...Option) (*Store, *fakeClock) {
	t.Helper()
	return b.open(t, b.fresh(t), opts...)
}

// conformance runs a behavioural test once per backend, the backends in
// parallel.
func conformance(t *testing.T, f func(t *testing.T, b backend)) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f(t, b)
		})
	}
}

// conformanceShared is conformance on the backends where several Stores share
// one database.
func conformanceShared(t *testing.T, f func(t *testing.T, b backend)) {
	for _, b := range backends() {
		if b.shared {
			t.Run(b.name, func(t *testing.T) {
				t.Parallel()
				f(t, b)
			})
		}
	}
}

// newStore opens a private in-memory Store on a fake clock (fuzzing and
// benchmarks of logic that no engine changes).
func newStore(t testing.TB, opts ...Option) (*Store, *fakeClock) {
	t.Helper()
	return backends()[0].newStore(t, opts...)
}

func wantErr(t testing.TB, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("err = %v, want %v", err, want)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
