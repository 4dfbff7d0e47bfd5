package postgres

import (
	"context"

	pgdb "github.com/rosterdb/roster/db/postgres"
	"github.com/rosterdb/roster/internal/engine"
)

// Agents.

func (x queries) AgentAbandonHeldBy(ctx context.Context, holders []engine.WorkerKey, atMs int64) (int, error) {
	namespaces, instances := splitKeys(holders)
	n, err := x.q.AgentAbandonHeldBy(ctx, pgdb.AgentAbandonHeldByParams{AtMs: atMs, Namespaces: namespaces, InstanceIds: instances})
	return int(n), translate(err)
}
