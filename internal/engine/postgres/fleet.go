package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"

	pgdb "github.com/rosterdb/roster/db/postgres"
	"github.com/rosterdb/roster/internal/engine"
)

func (x queries) ExecutionInsertUnique(ctx context.Context, e engine.Execution) (bool, error) {
	woken, err := x.q.ExecutionInsertUnique(ctx, pgdb.ExecutionInsertUniqueParams{
		ID: e.ID, Namespace: e.Namespace, Lane: e.Lane, Priority: e.Priority, Payload: engine.NonNilBytes(e.Payload),
		RequiredCapabilities: array(e.RequiredCapabilities), MaxAttempts: e.MaxAttempts, CreatedAtMs: e.CreatedAtMs,
		RunAtMs: e.RunAtMs, RetryBackoffMs: e.RetryBackoffMs, Ready: e.ReadyAtCreate(), UniqueKey: text(e.UniqueKey),
		GroupKey: e.Group,
		Metadata: text(e.Metadata), TimeoutMs: e.TimeoutMs,
	})
	return len(woken) == 1, translate(err)
}

func (x queries) ExecutionFindLiveByKey(ctx context.Context, namespace, key string) (uuid.UUID, error) {
	id, err := x.q.ExecutionFindLiveByKey(ctx, pgdb.ExecutionFindLiveByKeyParams{Namespace: namespace, UniqueKey: text(key)})
	return id, translate(err)
}

func (x queries) ExecutionKeyGet(ctx context.Context, namespace, key string, nowMs int64) (uuid.UUID, error) {
	id, err := x.q.ExecutionKeyGet(ctx, pgdb.ExecutionKeyGetParams{Namespace: namespace, UniqueKey: key, Now: nowMs})
	return id, translate(err)
}

func (x queries) ExecutionKeyPut(ctx context.Context, namespace, key string, id uuid.UUID, untilMs, nowMs int64) (bool, error) {
	n, err := x.q.ExecutionKeyPut(ctx, pgdb.ExecutionKeyPutParams{
		Namespace: namespace, UniqueKey: key, ExecutionID: id, UntilMs: untilMs, Now: nowMs,
	})
	return n == 1, translate(err)
}

// ExecutionKeyLock takes the keys' transaction advisory locks, in the
// order of their lock keys.
func (x queries) ExecutionKeyLock(ctx context.Context, namespaces, keys []string) error {
	return translate(x.q.ExecutionKeyLock(ctx, pgdb.ExecutionKeyLockParams{Namespaces: namespaces, UniqueKeys: keys}))
}

func (x queries) ExecutionKeyPruneBatch(ctx context.Context, beforeMs int64, batch int) (int, error) {
	n, err := x.q.ExecutionKeyPruneBatch(ctx, pgdb.ExecutionKeyPruneBatchParams{Before: beforeMs, BatchSize: int32(batch)})
	return int(n), translate(err)
}

func (x queries) ExecutionRetry(ctx context.Context, id uuid.UUID, runAtMs int64, atOnce bool) (bool, error) {
	_, err := x.q.ExecutionRetry(ctx, pgdb.ExecutionRetryParams{RunAt: runAtMs, Ready: atOnce, ID: id})
	return engine.Found(translate(err))
}

func (x queries) LeaderTake(ctx context.Context, name, holder string, epoch, nowMs, expiresAtMs int64) (int64, error) {
	e, err := x.q.LeaderTake(ctx, pgdb.LeaderTakeParams{Name: name, Holder: holder, ExpiresAtMs: expiresAtMs, Epoch: epoch, Now: nowMs})
	return e, translate(err)
}

// ExecutionInsertManyUnique sends the batch column by column (unnest) in
// one statement that looks up the held keys, inserts the rest and records
// their UniqueFor holds.
func (x queries) ExecutionInsertManyUnique(ctx context.Context, es []engine.Execution, untilMs []int64) ([]uuid.UUID, error) {
	n := len(es)
	p := pgdb.ExecutionInsertManyUniqueParams{
		Ords: make([]int32, n), Ids: make([]uuid.UUID, n), Namespaces: make([]string, n), Lanes: make([]string, n),
		Priorities: make([]int64, n), Payloads: make([][]byte, n), Capabilities: make([]string, n),
		MaxAttempts: make([]int64, n), RunAtMs: make([]int64, n), RetryBackoffMs: make([]int64, n),
		Ready: make([]bool, n), CreatedAtMs: make([]int64, n), UniqueKeys: make([]string, n), UntilMs: untilMs,
		GroupKeys:  make([]string, n),
		Metadata:   make([]string, n),
		TimeoutsMs: make([]int64, n),
	}
	for i, e := range es {
		p.Ords[i], p.Ids[i], p.Namespaces[i], p.Lanes[i], p.Priorities[i] = int32(i), e.ID, e.Namespace, e.Lane, e.Priority
		p.Payloads[i] = engine.NonNilBytes(e.Payload)
		p.Capabilities[i] = strings.Join(e.RequiredCapabilities, "\x1f")
		p.MaxAttempts[i], p.RunAtMs[i], p.RetryBackoffMs[i] = e.MaxAttempts, e.RunAtMs, e.RetryBackoffMs
		p.Ready[i], p.CreatedAtMs[i], p.UniqueKeys[i], p.GroupKeys[i] = e.ReadyAtCreate(), e.CreatedAtMs, e.UniqueKey, e.Group
		p.Ready[i], p.CreatedAtMs[i], p.UniqueKeys[i], p.Metadata[i] = e.ReadyAtCreate(), e.CreatedAtMs, e.UniqueKey, e.Metadata
		p.TimeoutsMs[i] = e.TimeoutMs
	}
	rows, err := x.q.ExecutionInsertManyUnique(ctx, p)
	if err != nil {
		return nil, translate(err)
	}
	if len(rows) != n {
		return nil, fmt.Errorf("roster: a batch of %d executions returned %d rows", n, len(rows))
	}
	ids := make([]uuid.UUID, n)
	for i, r := range rows {
		if !r.Kept {
			return nil, &engine.ConstraintError{Constraint: engine.UniqueOther, Err: fmt.Errorf(
				"roster: unique key %q of namespace %q is held by another execution", es[i].UniqueKey, es[i].Namespace)}
		}
		ids[i] = r.ID
	}
	return ids, nil
}
