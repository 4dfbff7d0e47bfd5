package enginetest

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"testing"

	"github.com/rosterdb/roster/internal/engine"
)

// methodTest tests one method of engine.Engine or engine.Queries on the
// engine h opens, each behaviour a subtest of its own.
type methodTest func(t *testing.T, h Harness)

// methodTests is the suite's table of tests: one per method of engine.Engine
// and engine.Queries, keyed by the method's name, gathered from the domain
// files (workers, executions, leases, claims, fleet, agents, stats, engine).
func methodTests() map[string]methodTest {
	all := map[string]methodTest{}
	for _, domain := range []map[string]methodTest{
		workerTests(), executionTests(), leaseTests(), claimTests(), fleetTests(), flowTests(), agentTests(), statsTests(), engineTests(),
		queueTests(),
	} {
		for name, test := range domain {
			if _, dup := all[name]; dup {
				panic("enginetest: two tests of " + name)
			}
			all[name] = test
		}
	}
	return all
}

// runMethodTests runs every test of the table, in the order of the methods'
// names.
func runMethodTests(t *testing.T, h Harness, tests map[string]methodTest) {
	for _, name := range slices.Sorted(maps.Keys(tests)) {
		t.Run(name, func(t *testing.T) { tests[name](t, h) })
	}
}

// env is one test's engine on a fresh database, with the helpers its steps
// use to set up and read back (the setup(t) bundle of River's suite).
type env struct {
	t   *testing.T
	h   Harness
	loc string
	e   engine.Engine
	ctx context.Context
}

// setup opens an engine on a fresh database for t.
func setup(t *testing.T, h Harness) *env {
	t.Helper()
	loc := h.Fresh(t)
	return &env{t: t, h: h, loc: loc, e: h.Open(t, loc), ctx: context.Background()}
}

// write runs fn in a Write and fails the test on its error.
func (v *env) write(fn func(ctx context.Context, q engine.Queries) error) {
	v.t.Helper()
	if err := v.e.Write(v.ctx, fn); err != nil {
		v.t.Fatal(err)
	}
}

// tryWrite runs fn in a Write and returns its value and error.
func tryWrite[T any](v *env, fn func(ctx context.Context, q engine.Queries) (T, error)) (T, error) {
	var out T
	err := v.e.Write(v.ctx, func(ctx context.Context, q engine.Queries) error {
		var err error
		out, err = fn(ctx, q)
		return err
	})
	return out, err
}

// tryRead runs fn in a Read and returns its value and error.
func tryRead[T any](v *env, fn func(ctx context.Context, q engine.Queries) (T, error)) (T, error) {
	var out T
	err := v.e.Read(v.ctx, func(ctx context.Context, q engine.Queries) error {
		var err error
		out, err = fn(ctx, q)
		return err
	})
	return out, err
}

// writeGet is tryWrite that fails the test on an error.
func writeGet[T any](v *env, fn func(ctx context.Context, q engine.Queries) (T, error)) T {
	v.t.Helper()
	out, err := tryWrite(v, fn)
	if err != nil {
		v.t.Fatal(err)
	}
	return out
}

// readGet is tryRead that fails the test on an error.
func readGet[T any](v *env, fn func(ctx context.Context, q engine.Queries) (T, error)) T {
	v.t.Helper()
	out, err := tryRead(v, fn)
	if err != nil {
		v.t.Fatal(err)
	}
	return out
}

// wantNoRows fails the test unless err is ErrNoRows.
func wantNoRows(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, engine.ErrNoRows) {
		t.Errorf("%s: err = %v, want ErrNoRows", what, err)
	}
}

// register registers worker inst of ns serving lanes with caps, its
// heartbeat at hb and its TTL ttl.
func (v *env) register(ns, inst string, lanes, caps []string, hb, ttl int64) {
	v.t.Helper()
	v.write(func(ctx context.Context, q engine.Queries) error {
		return q.WorkerRegister(ctx, engine.Worker{
			Namespace: ns, InstanceID: inst, WorkerID: "w-" + inst, Lanes: lanes, Capabilities: caps,
			LastHeartbeatMs: hb, TTLMs: ttl,
		})
	})
}

// itoa formats n in decimal.
func itoa(n int64) string { return strconv.FormatInt(n, 10) }
