package service

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"
)

// "Idle costs nothing": on SQLite a claim that finds nothing
// claimable writes nothing, also in a flow lane (empty; or capped, paused,
// rate-limited with ready work held back). PRAGMA data_version on another
// connection changes exactly when some connection commits.
func TestReviewFlowSQLiteIdleWritesNothing(t *testing.T) {
	b := backends()[1] // sqlite-file
	ctx := context.Background()
	loc := b.fresh(t)
	s, _ := b.open(t, loc)
	worker(t, s, "ns", "i", []string{"capped", "empty", "paused", "rated"}, nil)
	_, err := s.RegisterWorker(ctx, RegisterWorkerArgs{Namespace: "ns", WorkerID: "x", InstanceID: "x", Lanes: []string{"capped", "rated"}, TTL: time.Hour, Now: t0})
	must(t, err)
	putLimits(t, s, LaneLimits{Lane: "empty", MaxRunning: 3})
	putLimits(t, s, LaneLimits{Lane: "capped", MaxRunning: 1})
	putLimits(t, s, LaneLimits{Lane: "paused", Paused: true})
	putLimits(t, s, LaneLimits{Lane: "rated", Rate: 1, RatePeriod: time.Hour})
	for _, lane := range []string{"capped", "capped", "paused", "rated", "rated"} {
		create(t, s, CreateExecutionArgs{Lane: lane, Group: "g"})
	}
	for range 2 { // one of capped, one of rated
		_, err := s.ClaimExecution(ctx, ClaimArgs{Namespace: "ns", InstanceID: "x", LeaseTTL: time.Hour, Now: t0})
		must(t, err)
	}
	db, err := sql.Open("sqlite", loc)
	must(t, err)
	defer db.Close()
	db.SetMaxOpenConns(1)
	version := func() (v int64) {
		must(t, db.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v))
		return v
	}
	before := version()
	for range 20 {
		_, err := s.ClaimExecutions(ctx, ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Hour, Now: t0}, 5)
		if !errors.Is(err, ErrNoWork) {
			t.Fatalf("claim: %v, want ErrNoWork", err)
		}
	}
	if after := version(); after != before {
		t.Fatalf("20 idle claims of flow lanes changed data_version from %d to %d: they wrote", before, after)
	}
}
