// Package enginetest holds the tests every engine passes at the seam (below
// service's conformance suite): the translation of constraint violations and
// the per-lease fencing of batch completions. Each engine's tests call Run.
package enginetest

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/rosterdb/roster/internal/engine"
)

// Run runs the seam tests on engines opened by open, each test on a fresh
// database.
func Run(t *testing.T, open func(t *testing.T) engine.Engine) {
	t.Run("Translate", func(t *testing.T) { testTranslate(t, open(t)) })
	t.Run("LeaseCompleteManyFencesEachLease", func(t *testing.T) { testLeaseCompleteMany(t, open(t)) })
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// testTranslate: unique and CHECK violations come back named, no rows as
// ErrNoRows.
func testTranslate(t *testing.T, e engine.Engine) {
	ctx := context.Background()
	insert := func(a engine.Agent) error {
		return e.Write(ctx, func(ctx context.Context, q engine.Queries) error { return q.AgentInsert(ctx, a) })
	}
	base := engine.Agent{
		ID: "a", State: "running", Provider: "p", ProviderSessionID: "s", OwnerActor: "o",
		OwnerPeerClass: "c", OwnerWriteNamespace: "ns", SpawnFingerprint: "f", IdempotencyKey: "k",
	}
	must(t, insert(base))
	for _, tc := range []struct {
		name string
		edit func(a *engine.Agent)
		want engine.Constraint
	}{
		{"id", func(a *engine.Agent) { a.ProviderSessionID, a.IdempotencyKey = "s2", "k2" }, engine.UniqueAgentID},
		{"live session", func(a *engine.Agent) { a.ID, a.IdempotencyKey = "b", "k2" }, engine.UniqueAgentLiveProviderSession},
		{"idempotency", func(a *engine.Agent) { a.ID, a.ProviderSessionID = "b", "s2" }, engine.UniqueAgentIdempotency},
		{"check", func(a *engine.Agent) {
			a.ID, a.ProviderSessionID, a.IdempotencyKey, a.State = "b", "s2", "k2", "zombie"
		}, engine.CheckViolation},
	} {
		a := base
		tc.edit(&a)
		if err := insert(a); !engine.IsConstraint(err, tc.want) {
			t.Errorf("%s: err = %v, want constraint %s", tc.name, err, tc.want)
		}
	}
	err := e.Read(ctx, func(ctx context.Context, q engine.Queries) error {
		_, err := q.AgentGet(ctx, "nobody")
		return err
	})
	if !errors.Is(err, engine.ErrNoRows) {
		t.Fatalf("err = %v, want ErrNoRows", err)
	}
}

// testLeaseCompleteMany: a stale epoch, an unknown execution and a good lease
// in one call complete only the good one.
func testLeaseCompleteMany(t *testing.T, e engine.Engine) {
	ctx := context.Background()
	var claimed []engine.ClaimedLease
	must(t, e.Write(ctx, func(ctx context.Context, q engine.Queries) error {
		if err := q.WorkerRegister(ctx, engine.Worker{Namespace: "ns", InstanceID: "i", WorkerID: "w", Lanes: []string{"l"}, LastHeartbeatMs: 1, TTLMs: 100000}); err != nil {
			return err
		}
		for range 2 {
			id, _ := uuid.NewV7()
			if err := q.ExecutionInsert(ctx, engine.Execution{ID: id, Namespace: "ns", Lane: "l", MaxAttempts: 1, CreatedAtMs: 1, RunAtMs: 1}); err != nil {
				return err
			}
		}
		var err error
		claimed, err = q.ExecutionClaim(ctx, engine.ClaimParams{Namespace: "ns", InstanceID: "i", NowMs: 2, ExpiresAtMs: 1000,
			LeaseIDs: []uuid.UUID{uuid.New(), uuid.New()}})
		return err
	}))
	if len(claimed) != 2 {
		t.Fatalf("claimed %d", len(claimed))
	}
	var done []uuid.UUID
	must(t, e.Write(ctx, func(ctx context.Context, q engine.Queries) error {
		var err error
		done, err = q.LeaseCompleteMany(ctx, []engine.LeaseRef{
			{ExecutionID: claimed[0].ExecutionID, Epoch: claimed[0].Epoch},
			{ExecutionID: claimed[1].ExecutionID, Epoch: claimed[1].Epoch + 1}, // stale
			{ExecutionID: uuid.New(), Epoch: 1},                                // unknown
		}, [][]byte{[]byte("a"), []byte("b"), []byte("c")}, 3)
		return err
	}))
	if len(done) != 1 || done[0] != claimed[0].ExecutionID {
		t.Fatalf("completed %v", done)
	}
	must(t, e.Read(ctx, func(ctx context.Context, q engine.Queries) error {
		first, err := q.ExecutionGet(ctx, claimed[0].ExecutionID)
		if err != nil {
			return err
		}
		second, err := q.ExecutionGet(ctx, claimed[1].ExecutionID)
		if err != nil {
			return err
		}
		if first.State != "completed" || string(first.Result) != "a" || second.State != "running" || second.Result != nil {
			t.Fatalf("after the batch: %+v / %+v", first, second)
		}
		return nil
	}))
}
