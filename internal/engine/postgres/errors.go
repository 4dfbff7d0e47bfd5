package postgres

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/rosterdb/roster/internal/engine"
)

// constraints maps the schema's constraint and unique index names (which
// PostgreSQL reports in pgconn.PgError.ConstraintName) to roster's.
var constraints = map[string]engine.Constraint{
	string(engine.UniqueAgentID):                  engine.UniqueAgentID,
	string(engine.UniqueAgentLiveProviderSession): engine.UniqueAgentLiveProviderSession,
	string(engine.UniqueAgentIdempotency):         engine.UniqueAgentIdempotency,
	string(engine.UniqueLeaseID):                  engine.UniqueLeaseID,
	string(engine.UniqueExecutionID):              engine.UniqueExecutionID,
}

// SQLSTATE codes roster acts on.
const (
	codeUniqueViolation      = "23505"
	codeCheckViolation       = "23514"
	codeNotNullViolation     = "23502"
	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
	codeProgramLimitExceeded = "54000"
	codeCharacterNotInRepert = "22021" // e.g. a NUL byte in text
	codeStringDataTooLong    = "22001"
)

// translate is the PostgreSQL engine's one translation of driver errors: no
// rows becomes engine.ErrNoRows, a broken schema rule a
// *engine.ConstraintError named by the constraint, a value PostgreSQL cannot
// store engine.ErrInvalidInput. Anything else (serialization failures and
// deadlocks included, which Write retries) is returned as it is.
func translate(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return engine.ErrNoRows
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return err
	}
	switch pe.Code {
	case codeUniqueViolation:
		c, ok := constraints[pe.ConstraintName]
		if !ok {
			c = engine.UniqueOther
		}
		return &engine.ConstraintError{Constraint: c, Err: err}
	case codeCheckViolation, codeNotNullViolation:
		return &engine.ConstraintError{Constraint: engine.CheckViolation, Err: err}
	case codeProgramLimitExceeded, codeCharacterNotInRepert, codeStringDataTooLong:
		return fmt.Errorf("%w: PostgreSQL cannot store a value: %s", engine.ErrInvalidInput, pe.Message)
	}
	return err
}

// retryable reports whether a write failed on a serialization failure or a
// deadlock, which running it again may not meet.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == codeSerializationFailure || pe.Code == codeDeadlockDetected)
}
