package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/rosterdb/roster/internal/engine"
)

// maxUniqueFor bounds CreateExecutionArgs.UniqueFor.
const maxUniqueFor = 30 * 24 * time.Hour

// uniqueUntil is until when a new execution's key stays held whatever its
// state (0: only while it is live).
func uniqueUntil(row engine.Execution, uniqueFor time.Duration) int64 {
	if row.UniqueKey == "" || uniqueFor <= 0 {
		return 0
	}
	// Rounded up to the millisecond, so that a hold of 1.5 ms lasts 2.
	return row.CreatedAtMs + (uniqueFor + time.Millisecond - 1).Milliseconds()
}

// createUnique writes a batch some of whose items hold unique keys, in one
// transaction (on PostgreSQL the keys' locks, then a statement per 64 MiB
// of payloads): an item whose key is held (by a live execution, by a key
// whose UniqueFor has not ended, or by an earlier item) gets the holder's
// id; the others are inserted, and a keyed insert that meets a concurrent
// redrive of an execution of its key (the schema's unique index) gets that
// execution's id. Keys with a UniqueFor are then held until it ends.
func (s *Store) createUnique(ctx context.Context, rows []engine.Execution, until []int64) ([]uuid.UUID, error) {
	var ids []uuid.UUID
	err := s.write(ctx, func(ctx context.Context, q engine.Queries) error {
		var err error
		ids, err = s.createUniqueIn(ctx, q, rows, until)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.work.signal()
	return ids, nil
}

// createUniqueIn is createUnique's work inside a transaction of q's.
func (s *Store) createUniqueIn(ctx context.Context, q engine.Queries, rows []engine.Execution, until []int64) ([]uuid.UUID, error) {
	// Each key goes to the engine once, with its first item.
	firstOf := map[[2]string]int{}
	var batch []engine.Execution
	var batchUntil []int64
	slot := make([]int, len(rows)) // rows[i]'s place in batch
	for i, row := range rows {
		if row.UniqueKey != "" {
			k := [2]string{row.Namespace, row.UniqueKey}
			if j, ok := firstOf[k]; ok {
				slot[i] = j
				continue
			}
			firstOf[k] = len(batch)
		}
		slot[i] = len(batch)
		batch, batchUntil = append(batch, row), append(batchUntil, until[i])
	}
	var namespaces, keys []string
	for _, row := range batch {
		if row.UniqueKey != "" {
			namespaces, keys = append(namespaces, row.Namespace), append(keys, row.UniqueKey)
		}
	}
	// The keys' creates run one at a time from here, so that the insert
	// sees every create of them that committed before it.
	if err := q.ExecutionKeyLock(ctx, namespaces, keys); err != nil {
		return nil, err
	}
	got := make([]uuid.UUID, 0, len(batch))
	for _, chunk := range s.byPayloadBytes(batch) {
		from := len(got)
		part, err := q.ExecutionInsertManyUnique(ctx, chunk, batchUntil[from:from+len(chunk)])
		if err != nil {
			return nil, err
		}
		got = append(got, part...)
	}
	var err error
	for j, id := range got {
		if id == uuid.Nil { // met a concurrent redrive of the key's execution
			if got[j], err = s.createKeyed(ctx, q, batch[j], batchUntil[j]); err != nil {
				return nil, err
			}
		}
	}
	ids := make([]uuid.UUID, len(rows))
	for i := range rows {
		ids[i] = got[slot[i]]
	}
	return ids, nil
}

// createKeyed inserts row unless its key is held, and returns the id of
// the execution holding the key. It takes the key's lock first, so that it
// reads every create of the key that committed; an insert that meets a
// concurrent redrive of the key's execution (which it waited for) reads
// again.
func (s *Store) createKeyed(ctx context.Context, q engine.Queries, row engine.Execution, until int64) (uuid.UUID, error) {
	if err := q.ExecutionKeyLock(ctx, []string{row.Namespace}, []string{row.UniqueKey}); err != nil {
		return uuid.Nil, err
	}
	for range 3 {
		id, err := s.holderOf(ctx, q, row.Namespace, row.UniqueKey, row.CreatedAtMs)
		if !errors.Is(err, engine.ErrNoRows) {
			return id, err
		}
		inserted, err := q.ExecutionInsertUnique(ctx, row)
		if err != nil {
			return uuid.Nil, err
		}
		if inserted {
			if until > 0 {
				kept, err := q.ExecutionKeyPut(ctx, row.Namespace, row.UniqueKey, row.ID, until, row.CreatedAtMs)
				if err != nil {
					return uuid.Nil, err
				}
				if !kept { // another's hold, which the lock should have shown
					break
				}
			}
			return row.ID, nil
		}
	}
	return uuid.Nil, fmt.Errorf("%w: unique key %q of namespace %q changed hands repeatedly during the create; retry",
		ErrConflict, row.UniqueKey, row.Namespace)
}

// holderOf reads the execution holding a unique key at now: the live one,
// else the one whose UniqueFor has not ended; ErrNoRows when none.
func (s *Store) holderOf(ctx context.Context, q engine.Queries, namespace, key string, nowMs int64) (uuid.UUID, error) {
	id, err := q.ExecutionFindLiveByKey(ctx, namespace, key)
	if !errors.Is(err, engine.ErrNoRows) {
		return id, err
	}
	return q.ExecutionKeyGet(ctx, namespace, key, nowMs)
}
