package service

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Sentinel errors. Every error roster returns wraps at most one of them with a
// detail; test for them with errors.Is.
var (
	// ErrInvalidInput: an argument breaks a rule; nothing was written.
	ErrInvalidInput = errors.New("roster: invalid input")
	// ErrNotFound: the execution or agent does not exist.
	ErrNotFound = errors.New("roster: not found")
	// ErrNotRegistered: the worker instance is not registered, or its TTL has lapsed.
	ErrNotRegistered = errors.New("roster: worker not registered")
	// ErrConflict: a uniqueness or ownership rule, or a compare-and-set mismatch.
	ErrConflict = errors.New("roster: conflict")
	// ErrInvalidTransition: the agent state machine forbids the change.
	ErrInvalidTransition = errors.New("roster: invalid state transition")
	// ErrLeaseLost: the lease is stale, expired, or its execution no longer running.
	ErrLeaseLost = errors.New("roster: lease lost")
	// ErrNoWork: no execution can be claimed now.
	ErrNoWork = errors.New("roster: no work")
	// ErrOverloaded: the write queue stayed full past the admission time; nothing changed.
	ErrOverloaded = errors.New("roster: overloaded")
	// ErrClosed: the Store is closed.
	ErrClosed = errors.New("roster: store closed")
	// ErrSchemaTooNew: the database was migrated by a newer roster than this build.
	ErrSchemaTooNew = errors.New("roster: database schema is newer than this build")
	// ErrSchemaOutdated: WithoutMigrate found pending migrations.
	ErrSchemaOutdated = errors.New("roster: database schema is outdated")
)

// invalid returns ErrInvalidInput with a detail naming the field.
func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidInput, field, fmt.Sprintf(format, args...))
}

// sqliteCode returns the extended result code of a driver error, or 0.
func sqliteCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()
	}
	return 0
}

// isUniqueViolation reports whether err is a UNIQUE or PRIMARY KEY violation,
// of exactly the given columns ("table.col, table.col") when any are given.
func isUniqueViolation(err error, columns ...string) bool {
	code := sqliteCode(err)
	if code != sqlite3.SQLITE_CONSTRAINT_UNIQUE && code != sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY {
		return false
	}
	if len(columns) == 0 {
		return true
	}
	// The message reads "... UNIQUE constraint failed: t.a, t.b (2067)".
	msg := err.Error()
	const marker = "constraint failed: "
	i := strings.LastIndex(msg, marker)
	if i < 0 {
		return false
	}
	got, _, _ := strings.Cut(msg[i+len(marker):], " (")
	return slices.Contains(columns, got)
}

// isCheckViolation reports whether err is a CHECK constraint failure.
func isCheckViolation(err error) bool {
	return sqliteCode(err) == sqlite3.SQLITE_CONSTRAINT_CHECK
}
