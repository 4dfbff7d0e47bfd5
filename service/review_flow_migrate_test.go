package service

import (
	"context"
	"testing"
)

// Migration 12 down and up again with limits, groups and running
// executions of a flow lane; Check finds nothing and claims work.
func TestReviewFlowMigrateDownUp(t *testing.T) {
	conformanceShared(t, func(t *testing.T, b backend) {
		if b.migrated {
			t.Skip("the fixture grants the app role its tables once (README: ALTER DEFAULT PRIVILEGES); a table made again is not granted")
		}
		ctx := context.Background()
		loc := b.fresh(t)
		s, _ := b.open(t, loc)
		worker(t, s, "ns", "i", []string{"default"}, nil)
		putLimits(t, s, LaneLimits{MaxRunning: 2, MaxRunningPerGroup: 1})
		for _, g := range []string{"a", "a", "b", ""} {
			create(t, s, CreateExecutionArgs{Group: g})
		}
		claim(t, s, "i", t0)
		must(t, s.Close())
		_, latest, err := SchemaVersion(ctx, loc)
		must(t, err)
		must(t, MigrateDown(ctx, b.direct(t, loc), latest-11)) // to before migration 12
		if b.migrated {
			migrateAsOwner(t, b.direct(t, loc))
		}
		s, _ = b.open(t, loc)
		problems, err := s.Check(ctx)
		must(t, err)
		if len(problems) != 0 {
			t.Fatalf("check after the round trip: %v", problems)
		}
		if ls, _ := s.ListLaneLimits(ctx, ""); len(ls) != 0 {
			t.Fatalf("limits after down/up: %+v", ls)
		}
		if got := claimAll(t, s, "i", t0, 10); len(got) != 3 {
			t.Fatalf("after down/up, without limits, claimed %d, want 3", len(got))
		}
	})
}
