package sqlite

import (
	"context"

	sqlitedb "github.com/rosterdb/roster/db/sqlite"
	"github.com/rosterdb/roster/internal/engine"
)

// Agents.

func (x queries) AgentAbandonHeldBy(ctx context.Context, holders []engine.WorkerKey, atMs int64) (int, error) {
	n, err := x.q.AgentAbandonHeldBy(ctx, sqlitedb.AgentAbandonHeldByParams{AtMs: atMs, Holders: keyPairs(holders)})
	return int(n), translate(err)
}
