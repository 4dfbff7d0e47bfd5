package sqlite

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	sqlitedb "github.com/rosterdb/roster/db/sqlite"
	"github.com/rosterdb/roster/internal/engine"
)

func (x queries) ExecutionInsertUnique(ctx context.Context, e engine.Execution) (bool, error) {
	n, err := x.q.ExecutionInsertUnique(ctx, sqlitedb.ExecutionInsertUniqueParams{
		ID: e.ID, Namespace: e.Namespace, Lane: e.Lane, Priority: e.Priority, Payload: engine.NonNilBytes(e.Payload),
		RequiredCapabilities: jsonArray(e.RequiredCapabilities), MaxAttempts: e.MaxAttempts, CreatedAtMs: e.CreatedAtMs,
		RunAtMs: e.RunAtMs, RetryBackoffMs: e.RetryBackoffMs, Ready: e.ReadyAtCreate(), UniqueKey: nullString(e.UniqueKey),
		GroupKey: e.Group,
		Metadata: nullString(e.Metadata), TimeoutMs: e.TimeoutMs,
	})
	return n == 1, translate(err)
}

func (x queries) ExecutionFindLiveByKey(ctx context.Context, namespace, key string) (uuid.UUID, error) {
	id, err := x.q.ExecutionFindLiveByKey(ctx, sqlitedb.ExecutionFindLiveByKeyParams{Namespace: namespace, UniqueKey: nullString(key)})
	return id, translate(err)
}

func (x queries) ExecutionKeyGet(ctx context.Context, namespace, key string, nowMs int64) (uuid.UUID, error) {
	id, err := x.q.ExecutionKeyGet(ctx, sqlitedb.ExecutionKeyGetParams{Namespace: namespace, UniqueKey: key, Now: nowMs})
	return id, translate(err)
}

func (x queries) ExecutionKeyPut(ctx context.Context, namespace, key string, id uuid.UUID, untilMs, nowMs int64) (bool, error) {
	n, err := x.q.ExecutionKeyPut(ctx, sqlitedb.ExecutionKeyPutParams{
		Namespace: namespace, UniqueKey: key, ExecutionID: id, UntilMs: untilMs, Now: nowMs,
	})
	return n == 1, translate(err)
}

// ExecutionKeyLock locks nothing: the single writer runs one transaction at
// a time, which already serializes the creates of every key.
func (x queries) ExecutionKeyLock(context.Context, []string, []string) error { return nil }

func (x queries) ExecutionKeyPruneBatch(ctx context.Context, beforeMs int64, batch int) (int, error) {
	n, err := x.q.ExecutionKeyPruneBatch(ctx, sqlitedb.ExecutionKeyPruneBatchParams{Before: beforeMs, BatchSize: int64(batch)})
	return int(n), translate(err)
}

func (x queries) ExecutionRetry(ctx context.Context, id uuid.UUID, runAtMs int64, atOnce bool) (bool, error) {
	_, err := x.q.ExecutionRetry(ctx, sqlitedb.ExecutionRetryParams{RunAt: runAtMs, Ready: sqliteBool(atOnce), ID: id})
	return engine.Found(translate(err))
}

// LeaderTake renews or takes over the lease, else creates it: the single
// writer runs both statements in one transaction.
func (x queries) LeaderTake(ctx context.Context, name, holder string, epoch, nowMs, expiresAtMs int64) (int64, error) {
	e, err := x.q.LeaderTake(ctx, sqlitedb.LeaderTakeParams{Name: name, Holder: holder, ExpiresAtMs: expiresAtMs, Epoch: epoch, Now: nowMs})
	if err = translate(err); err != engine.ErrNoRows {
		return e, err
	}
	n, err := x.q.LeaderInsert(ctx, sqlitedb.LeaderInsertParams{Name: name, Holder: holder, ExpiresAtMs: expiresAtMs})
	if err != nil {
		return 0, translate(err)
	}
	if n == 0 {
		return 0, engine.ErrNoRows
	}
	return 1, nil
}

// ExecutionInsertManyUnique runs the item statements one by one in the
// writer's transaction (the single writer: no concurrent create can race).
func (x queries) ExecutionInsertManyUnique(ctx context.Context, es []engine.Execution, untilMs []int64) ([]uuid.UUID, error) {
	ids := make([]uuid.UUID, len(es))
	for i, e := range es {
		if e.UniqueKey == "" {
			if err := x.ExecutionInsert(ctx, e); err != nil {
				return nil, err
			}
			ids[i] = e.ID
			continue
		}
		id, err := x.ExecutionFindLiveByKey(ctx, e.Namespace, e.UniqueKey)
		if err == engine.ErrNoRows {
			id, err = x.ExecutionKeyGet(ctx, e.Namespace, e.UniqueKey, e.CreatedAtMs)
		}
		switch {
		case err == nil:
			ids[i] = id
			continue
		case err != engine.ErrNoRows:
			return nil, err
		}
		inserted, err := x.ExecutionInsertUnique(ctx, e)
		if err != nil {
			return nil, err
		}
		if !inserted {
			continue // ids[i] stays nil: look again (cannot happen under the single writer)
		}
		if untilMs[i] > 0 {
			kept, err := x.ExecutionKeyPut(ctx, e.Namespace, e.UniqueKey, e.ID, untilMs[i], e.CreatedAtMs)
			if err != nil {
				return nil, err
			}
			if !kept {
				return nil, &engine.ConstraintError{Constraint: engine.UniqueOther, Err: fmt.Errorf(
					"roster: unique key %q of namespace %q is held by another execution", e.UniqueKey, e.Namespace)}
			}
		}
		ids[i] = e.ID
	}
	return ids, nil
}
