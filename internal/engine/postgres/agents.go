package postgres

import (
	"context"

	pgdb "github.com/rosterdb/roster/db/postgres"
	"github.com/rosterdb/roster/internal/engine"
)

// Agents.

func (x queries) AgentInsert(ctx context.Context, a engine.Agent) error {
	return translate(x.q.AgentInsert(ctx, pgdb.AgentInsertParams(agentParams(a))))
}

func (x queries) AgentSpawn(ctx context.Context, a engine.Agent) (bool, error) {
	n, err := x.q.AgentSpawn(ctx, agentParams(a))
	return n > 0, translate(err)
}

func agentParams(a engine.Agent) pgdb.AgentSpawnParams {
	return pgdb.AgentSpawnParams{
		ID:                     a.ID,
		State:                  a.State,
		TerminalReason:         text(a.TerminalReason),
		Provider:               a.Provider,
		ProviderSessionID:      text(a.ProviderSessionID),
		CheckpointSessionID:    text(a.CheckpointSessionID),
		CheckpointCursor:       a.CheckpointCursor,
		OwnerActor:             a.OwnerActor,
		OwnerPeerClass:         a.OwnerPeerClass,
		OwnerWriteNamespace:    a.OwnerWriteNamespace,
		OwnerVisibleNamespaces: array(a.OwnerVisibleNamespaces),
		SpawnFingerprint:       a.SpawnFingerprint,
		SpawnedAtMs:            a.SpawnedAtMs,
		StateChangedAtMs:       a.StateChangedAtMs,
		IdempotencyKey:         text(a.IdempotencyKey),
		Host:                   text(a.Host),
		HolderNamespace:        text(a.HolderNamespace),
		HolderInstanceID:       text(a.HolderInstanceID),
	}
}

func (x queries) AgentGet(ctx context.Context, id string) (engine.Agent, error) {
	r, err := x.q.AgentGet(ctx, id)
	return agentFromRow(r), translate(err)
}

func (x queries) AgentSetState(ctx context.Context, id, fromState, state, reason string, atMs int64) (bool, error) {
	n, err := x.q.AgentSetState(ctx, pgdb.AgentSetStateParams{
		State: state, TerminalReason: text(reason), StateChangedAtMs: atMs, ID: id, FromState: fromState,
	})
	return n > 0, translate(err)
}

func (x queries) AgentSetCheckpoint(ctx context.Context, id, sessionID string, cursor int64) (bool, error) {
	n, err := x.q.AgentSetCheckpoint(ctx, pgdb.AgentSetCheckpointParams{
		ID: id, CheckpointSessionID: text(sessionID), CheckpointCursor: cursor,
	})
	return n > 0, translate(err)
}

func (x queries) AgentFindByIdempotencyKey(ctx context.Context, ownerActor, key string) (engine.Agent, error) {
	r, err := x.q.AgentFindByIdempotencyKey(ctx, pgdb.AgentFindByIdempotencyKeyParams{OwnerActor: ownerActor, IdempotencyKey: text(key)})
	return agentFromRow(r), translate(err)
}

func (x queries) AgentFindLiveByProviderSession(ctx context.Context, provider, sessionID string) (engine.Agent, error) {
	r, err := x.q.AgentFindLiveByProviderSession(ctx, pgdb.AgentFindLiveByProviderSessionParams{Provider: provider, ProviderSessionID: text(sessionID)})
	return agentFromRow(r), translate(err)
}

func (x queries) AgentTerminateLive(ctx context.Context, atMs int64) (int, error) {
	n, err := x.q.AgentTerminateLive(ctx, atMs)
	return int(n), translate(err)
}

func (x queries) AgentTerminateLiveOnHost(ctx context.Context, host string, atMs int64) (int, error) {
	n, err := x.q.AgentTerminateLiveOnHost(ctx, pgdb.AgentTerminateLiveOnHostParams{AtMs: atMs, Host: text(host)})
	return int(n), translate(err)
}

func (x queries) AgentSetHolder(ctx context.Context, id, holderNamespace, holderInstanceID string) (bool, error) {
	n, err := x.q.AgentSetHolder(ctx, pgdb.AgentSetHolderParams{
		ID: id, HolderNamespace: text(holderNamespace), HolderInstanceID: text(holderInstanceID),
	})
	return n > 0, translate(err)
}

func (x queries) AgentAbandonHeldBy(ctx context.Context, holders []engine.WorkerKey, atMs int64) (int, error) {
	namespaces, instances := splitKeys(holders)
	n, err := x.q.AgentAbandonHeldBy(ctx, pgdb.AgentAbandonHeldByParams{AtMs: atMs, Namespaces: namespaces, InstanceIds: instances})
	return int(n), translate(err)
}

func (x queries) AgentList(ctx context.Context, p engine.AgentListParams) ([]engine.Agent, error) {
	var rows []pgdb.Agent
	var err error
	n := int32(p.Limit)
	holderID := text(p.HolderInstanceID)
	switch p.Route() {
	case engine.AgentListVisibleIn:
		rows, err = x.q.AgentListVisibleIn(ctx, pgdb.AgentListVisibleInParams{
			Namespace: p.VisibleIn, AfterID: p.AfterID, State: p.State, OwnerActor: p.OwnerActor,
			Host: p.Host, HolderNamespace: p.HolderNamespace, HolderInstanceID: holderID, MaxRows: n,
		})
	case engine.AgentListByOwner:
		rows, err = x.q.AgentListByOwner(ctx, pgdb.AgentListByOwnerParams{
			OwnerActor: p.OwnerActor, AfterID: p.AfterID, State: p.State,
			Host: p.Host, HolderNamespace: p.HolderNamespace, HolderInstanceID: holderID, MaxRows: n,
		})
	case engine.AgentListLiveOnHost:
		rows, err = x.q.AgentListLiveOnHost(ctx, pgdb.AgentListLiveOnHostParams{
			Host: text(p.Host), AfterID: p.AfterID, State: p.State,
			HolderNamespace: p.HolderNamespace, HolderInstanceID: holderID, MaxRows: n,
		})
	case engine.AgentListLiveByHolder:
		rows, err = x.q.AgentListLiveByHolder(ctx, pgdb.AgentListLiveByHolderParams{
			HolderNamespace: text(p.HolderNamespace), HolderInstanceID: holderID, AfterID: p.AfterID, State: p.State, MaxRows: n,
		})
	case engine.AgentListByState:
		rows, err = x.q.AgentListByState(ctx, pgdb.AgentListByStateParams{
			State: p.State, AfterID: p.AfterID, Host: p.Host, HolderNamespace: p.HolderNamespace, HolderInstanceID: holderID, MaxRows: n,
		})
	default:
		rows, err = x.q.AgentList(ctx, pgdb.AgentListParams{
			AfterID: p.AfterID, Host: p.Host, HolderNamespace: p.HolderNamespace, HolderInstanceID: holderID, MaxRows: n,
		})
	}
	return engine.Rows(len(rows), err, translate, func(i int) engine.Agent { return agentFromRow(rows[i]) })
}

func agentFromRow(r pgdb.Agent) engine.Agent {
	return engine.Agent{
		ID:                     r.ID,
		State:                  r.State,
		TerminalReason:         r.TerminalReason.String,
		Provider:               r.Provider,
		ProviderSessionID:      r.ProviderSessionID.String,
		CheckpointSessionID:    r.CheckpointSessionID.String,
		CheckpointCursor:       r.CheckpointCursor,
		OwnerActor:             r.OwnerActor,
		OwnerPeerClass:         r.OwnerPeerClass,
		OwnerWriteNamespace:    r.OwnerWriteNamespace,
		OwnerVisibleNamespaces: list(r.OwnerVisibleNamespaces),
		SpawnFingerprint:       r.SpawnFingerprint,
		SpawnedAtMs:            r.SpawnedAtMs,
		StateChangedAtMs:       r.StateChangedAtMs,
		IdempotencyKey:         r.IdempotencyKey.String,
		Host:                   r.Host.String,
		HolderNamespace:        r.HolderNamespace.String,
		HolderInstanceID:       r.HolderInstanceID.String,
	}
}
