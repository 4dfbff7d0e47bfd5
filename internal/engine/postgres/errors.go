package postgres

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

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
	string(engine.UniqueExecutionID):              engine.UniqueExecutionID,
}

// SQLSTATE codes roster acts on.
const (
	codeUniqueViolation      = "23505"
	codeCheckViolation       = "23514"
	codeRaiseException       = "P0001" // a RAISE in a trigger or function: a rule of the database
	classIntegrity           = "23"
	codeNotNullViolation     = "23502"
	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
	codeProgramLimitExceeded = "54000"
	codeCharacterNotInRepert = "22021" // e.g. a NUL byte in text
	codeStringDataTooLong    = "22001"
	codeDiskFull             = "53100"
	codeIOError              = "58030"
	codeTooManyConnections   = "53300"
	codeQueryCanceled        = "57014" // a statement timeout, or a cancel request
	codeAdminShutdown        = "57P01"
	codeCrashShutdown        = "57P02"
	codeCannotConnectNow     = "57P03"
	codeLockNotAvailable     = "55P03"
	codeReadOnlyTransaction  = "25006" // a standby, or a server in recovery
	classConnectionException = "08"
)

// translate is the PostgreSQL engine's one translation of driver errors: no
// rows becomes engine.ErrNoRows, a broken schema rule a
// *engine.ConstraintError named by the constraint, a value PostgreSQL cannot
// store or a statement the client cannot send (over a limit of the
// protocol) engine.ErrInvalidInput, a full disk or an I/O error engine.ErrStorage,
// and a server that cannot be reached, is shutting down or restarting, or a
// connection that broke, engine.ErrUnavailable. Anything else (serialization
// failures and deadlocks included, which Write retries) is returned as it is.
func translate(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return engine.ErrNoRows
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		if clientRefusal(err) {
			// The statement never left the client, and sending it again
			// would meet the same limit: not a lost connection, not
			// retried. (%v: the refusal's SafeToRetry must not show.)
			return fmt.Errorf("%w: the PostgreSQL client refused the statement: %v", engine.ErrInvalidInput, err)
		}
		if connectionLost(err) {
			return fmt.Errorf("%w: %w", engine.ErrUnavailable, err)
		}
		return err
	}
	switch pe.Code {
	case codeDiskFull, codeIOError:
		return fmt.Errorf("%w: %w", engine.ErrStorage, err)
	case codeTooManyConnections, codeQueryCanceled, codeAdminShutdown, codeCrashShutdown,
		codeCannotConnectNow, codeLockNotAvailable, codeReadOnlyTransaction:
		return fmt.Errorf("%w: %w", engine.ErrUnavailable, err)
	}
	if strings.HasPrefix(pe.Code, classConnectionException) {
		return fmt.Errorf("%w: %w", engine.ErrUnavailable, err)
	}
	if strings.HasPrefix(pe.Code, classIntegrity) && pe.Code != codeUniqueViolation {
		// A foreign key, an exclusion: a rule of the database.
		return &engine.ConstraintError{Constraint: engine.CheckViolation, Err: err}
	}
	switch pe.Code {
	case codeUniqueViolation:
		c, ok := constraints[pe.ConstraintName]
		if !ok {
			c = engine.UniqueOther
		}
		return &engine.ConstraintError{Constraint: c, Err: err}
	case codeCheckViolation, codeNotNullViolation, codeRaiseException:
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

// connectionLost reports whether a driver error that carries no SQLSTATE is
// the connection's: refused, reset, closed, cut short, or timed out. A
// caller's own cancellation is not.
func connectionLost(err error) bool {
	if errors.Is(err, context.Canceled) || clientRefusal(err) {
		return false
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case errors.As(err, &ce), errors.As(err, &ne), pgconn.Timeout(err), pgconn.SafeToRetry(err), errors.Is(err, driver.ErrBadConn),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	}
	return strings.Contains(err.Error(), "conn closed")
}

// readOnlyServer reports whether a write failed because the server takes no
// writes (a standby, or a transaction forced read-only).
func readOnlyServer(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == codeReadOnlyTransaction
}

// safeToRetry reports whether a write failed before anything reached the
// server (a pooled connection found dead), so running it again cannot apply
// it twice. A statement the client refused to send is not: it would be
// refused again.
func safeToRetry(err error) bool { return pgconn.SafeToRetry(err) && !clientRefusal(err) }

// clientRefusals are the texts of the errors with which pgx refuses, before
// sending anything, a statement that breaks a limit of the protocol: a
// message over 1 GiB, too many parameters or format codes. pgx gives them
// no type of their own (pgproto3 reports them as a write failure that is
// safe to retry, which it is not: it would fail the same way).
var clientRefusals = []string{
	"message body too large",
	"too many parameters",
	"too many parameter format codes",
	"too many result format codes",
	"extended protocol limited to",
}

// clientRefusal reports whether err is pgx refusing a statement it cannot
// send (see clientRefusals).
func clientRefusal(err error) bool {
	var pe *pgconn.PgError
	if err == nil || errors.As(err, &pe) {
		return false
	}
	msg := err.Error()
	for _, r := range clientRefusals {
		if strings.Contains(msg, r) {
			return true
		}
	}
	return false
}
