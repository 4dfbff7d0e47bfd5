package sqlite

import (
	"context"

	sqlitedb "github.com/rosterdb/roster/db/sqlite"
	"github.com/rosterdb/roster/internal/engine"
)

// executionListNewest is ExecutionList newest first: the same leading
// filters, each index walked the other way, below p.AfterID.
func (x queries) executionListNewest(ctx context.Context, p engine.ExecutionListParams) ([]engine.Execution, error) {
	n := int64(p.Limit)
	var rows []sqlitedb.Execution
	var err error
	switch {
	case p.Namespace != "":
		rows, err = x.q.ExecutionListByNamespaceNewest(ctx, sqlitedb.ExecutionListByNamespaceNewestParams{
			Namespace: p.Namespace, BeforeID: p.AfterID, Lane: p.Lane, State: p.State, Limit: n,
		})
	case p.State == "running":
		rows, err = x.q.ExecutionListRunningNewest(ctx, sqlitedb.ExecutionListRunningNewestParams{BeforeID: p.AfterID, Lane: p.Lane, Limit: n})
	case p.State != "":
		rows, err = x.q.ExecutionListByStateNewest(ctx, sqlitedb.ExecutionListByStateNewestParams{State: p.State, BeforeID: p.AfterID, Lane: p.Lane, Limit: n})
	case p.Lane != "":
		rows, err = x.q.ExecutionListByLaneNewest(ctx, sqlitedb.ExecutionListByLaneNewestParams{Lane: p.Lane, BeforeID: p.AfterID, Limit: n})
	default:
		rows, err = x.q.ExecutionListNewest(ctx, sqlitedb.ExecutionListNewestParams{BeforeID: p.AfterID, Limit: n})
	}
	return engine.RowsErr(len(rows), err, translate, func(i int) (engine.Execution, error) { return executionFromRow(rows[i]) })
}
