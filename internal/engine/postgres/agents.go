package postgres

import (
	"context"

	pgdb "github.com/rosterdb/roster/db/postgres"
	"github.com/rosterdb/roster/internal/engine"
)

// Agents.

func (x queries) AgentInsert(ctx context.Context, a engine.Agent) error {
	return translate(x.q.AgentInsert(ctx, engine.AgentParams[pgdb.AgentInsertParams](a, arrays{})))
}

func (x queries) AgentSpawn(ctx context.Context, a engine.Agent) (bool, error) {
	n, err := x.q.AgentSpawn(ctx, engine.AgentParams[pgdb.AgentSpawnParams](a, arrays{}))
	return n > 0, translate(err)
}

func (x queries) AgentGet(ctx context.Context, id string) (engine.Agent, error) {
	return agentFromRow(x.q.AgentGet(ctx, id))
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
	return agentFromRow(x.q.AgentFindByIdempotencyKey(ctx, pgdb.AgentFindByIdempotencyKeyParams{
		OwnerActor: ownerActor, IdempotencyKey: text(key),
	}))
}

func (x queries) AgentFindLiveByProviderSession(ctx context.Context, provider, sessionID string) (engine.Agent, error) {
	return agentFromRow(x.q.AgentFindLiveByProviderSession(ctx, pgdb.AgentFindLiveByProviderSessionParams{
		Provider: provider, ProviderSessionID: text(sessionID),
	}))
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
	rows, err := agentLists.List(ctx, x.q, int(p.Route()), p)
	return engine.RowsErr(len(rows), err, translate, func(i int) (engine.Agent, error) { return engine.AgentFromRow(rows[i], arrays{}) })
}

// agentFromRow maps a row (and the error of reading it) to an engine.Agent.
func agentFromRow(r pgdb.Agent, err error) (engine.Agent, error) {
	if err != nil {
		return engine.Agent{}, translate(err)
	}
	return engine.AgentFromRow(r, arrays{})
}
