package service

// Creating executions: one, or a batch in one transaction, each validated
// before anything is written (a unique key's are in unique.go).

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/rosterdb/roster/internal/engine"
)

// maxCreateBatch bounds CreateExecutions.
const maxCreateBatch = 10000

// CreateExecution adds a waiting execution and returns its id (a UUIDv7).
// With a UniqueKey that a live (or, within its UniqueFor, any) execution of
// the namespace holds, it writes nothing and returns that execution's id.
func (s *Store) CreateExecution(ctx context.Context, a CreateExecutionArgs) (uuid.UUID, error) {
	if err := s.notClosed(); err != nil {
		return uuid.Nil, err
	}
	if len(s.cfg.middleware) == 0 {
		return s.createExecution(ctx, a)
	}
	ids, err := s.createMiddleware(ctx, []CreateExecutionArgs{a}, func(ctx context.Context, items []CreateExecutionArgs) ([]uuid.UUID, error) {
		if len(items) != 1 {
			return s.createExecutions(ctx, items)
		}
		id, err := s.createExecution(ctx, items[0])
		if err != nil {
			return nil, err
		}
		return []uuid.UUID{id}, nil
	})
	if err != nil {
		return uuid.Nil, err
	}
	if len(ids) != 1 {
		return uuid.Nil, fmt.Errorf("roster: a Create middleware returned %d ids for one execution", len(ids))
	}
	return ids[0], nil
}

// createExecution is CreateExecution once its middleware ran.
func (s *Store) createExecution(ctx context.Context, a CreateExecutionArgs) (uuid.UUID, error) {
	row, err := s.executionRow(a, "")
	if err != nil {
		return uuid.Nil, err
	}
	if err := s.touchTurns(ctx, []engine.Execution{row}); err != nil {
		return uuid.Nil, err
	}
	if row.UniqueKey != "" {
		ids, err := s.createUnique(ctx, []engine.Execution{row}, []int64{uniqueUntil(row, a.UniqueFor)})
		if err != nil {
			return uuid.Nil, err
		}
		return ids[0], nil
	}
	err = s.writeOne(ctx, func(ctx context.Context, q engine.Queries) error {
		return q.ExecutionInsert(ctx, row)
	})
	if err != nil {
		return uuid.Nil, err
	}
	s.work.signal()
	return row.ID, nil
}

// CreateExecutions adds 1 to 10,000 waiting executions in one transaction
// and returns their ids in input order. Every item is validated first: the
// first bad one is ErrInvalidInput naming its index, and nothing is written.
// On PostgreSQL a batch without unique keys is one statement, one round
// trip, per 64 MiB of payloads (a larger batch is several statements in the
// one transaction). Items whose UniqueKey is held (by a stored execution or
// an earlier item of the batch) get the holder's id and write nothing.
func (s *Store) CreateExecutions(ctx context.Context, as []CreateExecutionArgs) ([]uuid.UUID, error) {
	if err := s.notClosed(); err != nil {
		return nil, err
	}
	if len(s.cfg.middleware) == 0 {
		return s.createExecutions(ctx, as)
	}
	return s.createMiddleware(ctx, as, s.createExecutions)
}

// batchRows validates a batch create's items and makes their rows: the
// first bad item is ErrInvalidInput naming its index. It reports whether
// any item holds a unique key, and until when each key is held.
func (s *Store) batchRows(as []CreateExecutionArgs) (rows []engine.Execution, until []int64, keyed bool, err error) {
	if len(as) == 0 || len(as) > maxCreateBatch {
		return nil, nil, false, invalid("executions", "%d items is outside 1..%d", len(as), maxCreateBatch)
	}
	rows = make([]engine.Execution, len(as))
	for i, a := range as {
		row, err := s.executionRow(a, fmt.Sprintf("[%d].", i))
		if err != nil {
			return nil, nil, false, err
		}
		rows[i] = row
		keyed = keyed || row.UniqueKey != ""
	}
	if keyed {
		until = make([]int64, len(as))
		for i := range as {
			until[i] = uniqueUntil(rows[i], as[i].UniqueFor)
		}
	}
	return rows, until, keyed, nil
}

// insertBatch returns the write of a batch without unique keys: a
// statement per 64 MiB of payloads.
func (s *Store) insertBatch(rows []engine.Execution) (write func(ctx context.Context, q engine.Queries) error, statements int) {
	chunks := s.byPayloadBytes(rows)
	return func(ctx context.Context, q engine.Queries) error {
		for _, chunk := range chunks {
			if err := q.ExecutionInsertMany(ctx, chunk); err != nil {
				return err
			}
		}
		return nil
	}, len(chunks)
}

// createExecutions is CreateExecutions once its middleware ran.
func (s *Store) createExecutions(ctx context.Context, as []CreateExecutionArgs) ([]uuid.UUID, error) {
	rows, until, keyed, err := s.batchRows(as)
	if err != nil {
		return nil, err
	}
	if err := s.touchTurns(ctx, rows); err != nil {
		return nil, err
	}
	if keyed {
		return s.createUnique(ctx, rows, until)
	}
	ids := make([]uuid.UUID, len(rows))
	for i, row := range rows {
		ids[i] = row.ID
	}
	insert, statements := s.insertBatch(rows)
	if statements == 1 {
		err = s.writeOne(ctx, insert)
	} else {
		err = s.write(ctx, insert) // one transaction, whatever the statements
	}
	if err != nil {
		return nil, err
	}
	s.work.signal()
	return ids, nil
}

// maxStatementPayload bounds the payload bytes one statement of a batch
// create carries: PostgreSQL's protocol messages and arrays stop at 1 GiB,
// and a batch may hold 10,000 payloads of 16 MiB.
const maxStatementPayload = 64 << 20

// byPayloadBytes cuts a batch into consecutive chunks whose payloads add up
// to at most maxStatementPayload each (a chunk holds at least one row;
// tests lower the bound).
func (s *Store) byPayloadBytes(rows []engine.Execution) [][]engine.Execution {
	bound := maxStatementPayload
	if s.cfg.statementBytes > 0 {
		bound = s.cfg.statementBytes
	}
	var chunks [][]engine.Execution
	start, size := 0, 0
	for i, row := range rows {
		if i > start && size+len(row.Payload) > bound {
			chunks = append(chunks, rows[start:i])
			start, size = i, 0
		}
		size += len(row.Payload)
	}
	return append(chunks, rows[start:])
}

// executionRow validates a and makes the row of a new execution; prefix
// goes before the field names of errors (an item of a batch).
func (s *Store) executionRow(a CreateExecutionArgs, prefix string) (engine.Execution, error) {
	if err := validIdentifier(prefix+"Namespace", a.Namespace); err != nil {
		return engine.Execution{}, err
	}
	if err := validIdentifier(prefix+"Lane", a.Lane); err != nil {
		return engine.Execution{}, err
	}
	caps, err := identifierSet(prefix+"RequiredCapabilities", a.RequiredCapabilities)
	if err != nil {
		return engine.Execution{}, err
	}
	if a.MaxAttempts < 0 {
		return engine.Execution{}, invalid(prefix+"MaxAttempts", "%d is negative", a.MaxAttempts)
	}
	if a.UniqueKey != "" {
		if err := validIdentifier(prefix+"UniqueKey", a.UniqueKey); err != nil {
			return engine.Execution{}, err
		}
	}
	if err := validOptionalIdentifier(prefix+"Group", a.Group); err != nil {
		return engine.Execution{}, err
	}
	switch {
	case a.Timeout < 0 || a.Timeout > maxUniqueFor || (a.Timeout > 0 && a.Timeout < time.Millisecond):
		return engine.Execution{}, invalid(prefix+"Timeout", "%v is neither 0 nor between 1ms and 30 days", a.Timeout)
	case a.Timeout%time.Millisecond != 0:
		return engine.Execution{}, invalid(prefix+"Timeout", "%v is not a whole number of milliseconds", a.Timeout)
	}
	if a.UniqueFor < 0 || a.UniqueFor > maxUniqueFor {
		return engine.Execution{}, invalid(prefix+"UniqueFor", "%v is outside 0..30 days", a.UniqueFor)
	}
	if a.UniqueFor > 0 && a.UniqueKey == "" {
		return engine.Execution{}, invalid(prefix+"UniqueFor", "needs a UniqueKey")
	}
	if err := validPayload(prefix+"Payload", a.Payload); err != nil {
		return engine.Execution{}, err
	}
	metadata, err := encodeMetadata(prefix+"Metadata", a.Metadata)
	if err != nil {
		return engine.Execution{}, err
	}
	if a.RetryBackoff < 0 || (a.RetryBackoff > 0 && a.RetryBackoff < time.Millisecond) || a.RetryBackoff > maxRetryBackoff {
		return engine.Execution{}, invalid(prefix+"RetryBackoff", "%v is neither 0 nor between 1ms and 24h", a.RetryBackoff)
	}
	now, err := s.at(prefix+"Now", a.Now)
	if err != nil {
		return engine.Execution{}, err
	}
	if err := validTime(prefix+"RunAt", a.RunAt); err != nil {
		return engine.Execution{}, err
	}
	runAt := now
	if !a.RunAt.IsZero() {
		runAt = a.RunAt.UnixMilli()
	}
	maxAttempts, backoff := a.MaxAttempts, a.RetryBackoff
	if maxAttempts == 0 {
		maxAttempts = s.cfg.defaultMaxAttempts
	}
	if backoff == 0 {
		backoff = s.cfg.defaultRetryBackoff
	}
	id, err := uuid.NewV7()
	if err != nil {
		return engine.Execution{}, fmt.Errorf("roster: new execution id: %w", err)
	}
	return engine.Execution{
		ID:                   id,
		Namespace:            a.Namespace,
		Lane:                 a.Lane,
		Priority:             int64(a.Priority),
		Payload:              a.Payload,
		RequiredCapabilities: caps,
		MaxAttempts:          int64(maxAttempts),
		CreatedAtMs:          now,
		RunAtMs:              runAt,
		RetryBackoffMs:       backoff.Milliseconds(),
		UniqueKey:            a.UniqueKey,
		Group:                a.Group,
		Metadata:             metadata,
		TimeoutMs:            a.Timeout.Milliseconds(),
	}, nil
}
