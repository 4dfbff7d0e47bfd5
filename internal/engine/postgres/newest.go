package postgres

import (
	"context"

	pgdb "github.com/rosterdb/roster/db/postgres"
	"github.com/rosterdb/roster/internal/engine"
)

// executionListNewest is ExecutionList newest first: the same leading
// filters, each index walked the other way, below p.AfterID.
func (x queries) executionListNewest(ctx context.Context, p engine.ExecutionListParams) ([]engine.Execution, error) {
	n := int32(p.Limit)
	var rows []pgdb.Execution
	var err error
	switch {
	case p.Namespace != "":
		rows, err = x.q.ExecutionListByNamespaceNewest(ctx, pgdb.ExecutionListByNamespaceNewestParams{
			Namespace: p.Namespace, BeforeID: p.AfterID, Lane: p.Lane, State: p.State, MaxRows: n,
		})
	case p.State == "running":
		rows, err = x.q.ExecutionListRunningNewest(ctx, pgdb.ExecutionListRunningNewestParams{BeforeID: p.AfterID, Lane: p.Lane, MaxRows: n})
	case p.State != "":
		rows, err = x.q.ExecutionListByStateNewest(ctx, pgdb.ExecutionListByStateNewestParams{State: p.State, BeforeID: p.AfterID, Lane: p.Lane, MaxRows: n})
	case p.Lane != "":
		rows, err = x.q.ExecutionListByLaneNewest(ctx, pgdb.ExecutionListByLaneNewestParams{Lane: p.Lane, BeforeID: p.AfterID, MaxRows: n})
	default:
		rows, err = x.q.ExecutionListNewest(ctx, pgdb.ExecutionListNewestParams{BeforeID: p.AfterID, MaxRows: n})
	}
	return engine.Rows(len(rows), err, translate, func(i int) engine.Execution { return executionFromRow(rows[i]) })
}
