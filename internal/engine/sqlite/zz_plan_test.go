package sqlite

import (
	"context"
	"testing"

	sqlitedb "github.com/rosterdb/roster/db/sqlite"
)

func TestZZPlan(t *testing.T) {
	e := openMemory(t)
	rec := &planRecorder{conn: e.writer}
	_, _ = sqlitedb.New(rec).ExecutionPickGroups(context.Background(), sqlitedb.ExecutionPickGroupsParams{GroupKeys: `["g","h"]`, Namespace: "n", Lane: "l", Capabilities: "[]", Limit: 4})
	t.Log(rec.plans)
}
