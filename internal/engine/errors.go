package engine

import (
	"context"
	"errors"
	"fmt"
)

// Transient reports whether err is a failure that may pass by itself: the
// database unavailable, the storage refusing writes, or the write queue
// full. A caller that can repeat its operation safely retries these.
func Transient(err error) bool {
	return errors.Is(err, ErrUnavailable) || errors.Is(err, ErrStorage) || errors.Is(err, ErrOverloaded)
}

// ErrNoRows is what every engine returns when a query that reads or writes
// one row found none. service says what that means for its operation
// (ErrNotFound, ErrNotRegistered, ErrLeaseLost, ...).
var ErrNoRows = errors.New("roster: no rows")

// Constraint names a uniqueness rule or CHECK of the schema. The names are the
// schema's own (index or constraint names), identical on every engine.
type Constraint string

// ConstraintError is a write that broke a schema rule.
type ConstraintError struct {
	Constraint Constraint
	Err        error // the driver's error, for the log
}

// Error names the rule and the driver's words.
func (e *ConstraintError) Error() string {
	return fmt.Sprintf("constraint %s violated: %v", e.Constraint, e.Err)
}

// Unwrap returns the driver's error.
func (e *ConstraintError) Unwrap() error { return e.Err }

// IsConstraint reports whether err is a violation of c.
func IsConstraint(err error, c Constraint) bool {
	var ce *ConstraintError
	return errors.As(err, &ce) && ce.Constraint == c
}

// IsUnique reports whether err is a violation of any uniqueness rule.
func IsUnique(err error) bool {
	var ce *ConstraintError
	return errors.As(err, &ce) && ce.Constraint != CheckViolation
}

// ConsistencyCheck is one of roster's consistency rules: a query that counts
// the rows breaking it (queries/ENGINE/check.sql).
type ConsistencyCheck struct {
	Problem string
	Count   func(ctx context.Context) (int64, error)
}

// ConsistencyProblems runs the checks in order and returns one line per rule
// broken ("N <problem>"); translate turns a driver error into the engine's.
func ConsistencyProblems(ctx context.Context, checks []ConsistencyCheck, translate func(error) error) ([]string, error) {
	var problems []string
	for _, c := range checks {
		n, err := c.Count(ctx)
		if err != nil {
			return nil, fmt.Errorf("roster: check: %w", translate(err))
		}
		if n > 0 {
			problems = append(problems, fmt.Sprintf("%d %s", n, c.Problem))
		}
	}
	return problems, nil
}

// Sentinel errors that engines return and service exports under the same
// names. Every other driver error is wrapped with the step that failed.
var (
	ErrInvalidInput   = errors.New("roster: invalid input")
	ErrNotFound       = errors.New("roster: not found")
	ErrOverloaded     = errors.New("roster: overloaded")
	ErrClosed         = errors.New("roster: store closed")
	ErrReadOnly       = errors.New("roster: store is read-only")
	ErrSchemaTooNew   = errors.New("roster: database schema is newer than this build")
	ErrSchemaOutdated = errors.New("roster: database schema is outdated")
	// ErrUnavailable: the database could not be reached, or the connection
	// broke before the outcome was known (a write may or may not have been
	// applied).
	ErrUnavailable = errors.New("roster: database unavailable")
	// ErrStorage: the storage refused the write (disk full, read-only file
	// system, I/O error); nothing was written.
	ErrStorage = errors.New("roster: storage refused the write")
)

// The constraints service translates into its sentinel errors.
const (
	UniqueAgentID                  Constraint = "agents_pkey"
	UniqueAgentLiveProviderSession Constraint = "agents_live_provider_session"
	UniqueAgentIdempotency         Constraint = "agents_idempotency"
	UniqueExecutionID              Constraint = "executions_pkey"
	// CheckViolation is any CHECK of the schema (SQLite does not name them
	// reliably; the detail says which rule failed), or any other rule of the
	// database that refused a row (a trigger's RAISE, a foreign key).
	CheckViolation Constraint = "check"
	// UniqueOther is a uniqueness rule without a constant of its own.
	UniqueOther Constraint = "unique"
)

// Found reports whether a statement that addresses one row found it, from
// its translated error: ErrNoRows is false, not a failure.
func Found(err error) (bool, error) {
	if err == ErrNoRows {
		return false, nil
	}
	return err == nil, err
}
