package service

import (
	"errors"
	"fmt"

	"github.com/rosterdb/roster/internal/engine"
)

// Sentinel errors. Every error roster returns wraps at most one of them with a
// detail; test for them with errors.Is. No raw driver error escapes where one
// of them applies.
var (
	// ErrInvalidInput: an argument breaks a rule; nothing was written.
	ErrInvalidInput = engine.ErrInvalidInput
	// ErrNotFound: the execution or agent (or, for Open WithReadOnly, the
	// database file) does not exist.
	ErrNotFound = engine.ErrNotFound
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
	ErrOverloaded = engine.ErrOverloaded
	// ErrUnavailable: the database could not be reached, or the connection
	// broke before the outcome was known: a write may or may not have been
	// applied. Retry it idempotently (a lease fences a retried complete; a
	// retried create may make a second execution).
	ErrUnavailable = engine.ErrUnavailable
	// ErrStorage: the storage refused the write (disk full, read-only file
	// system, I/O error); nothing was written. It may pass (space freed).
	ErrStorage = engine.ErrStorage
	// ErrClosed: the Store is closed.
	ErrClosed = engine.ErrClosed
	// ErrReadOnly: a write on a Store opened WithReadOnly; nothing changed.
	ErrReadOnly = engine.ErrReadOnly
	// ErrSchemaTooNew: the database was migrated by a newer roster than this build.
	ErrSchemaTooNew = engine.ErrSchemaTooNew
	// ErrSchemaOutdated: WithoutMigrate or WithReadOnly found pending migrations.
	ErrSchemaOutdated = engine.ErrSchemaOutdated
)

// sentinels are the errors above, in their order.
var sentinels = []error{
	ErrInvalidInput, ErrNotFound, ErrNotRegistered, ErrConflict, ErrInvalidTransition, ErrLeaseLost,
	ErrNoWork, ErrOverloaded, ErrUnavailable, ErrStorage, ErrClosed, ErrReadOnly, ErrSchemaTooNew,
	ErrSchemaOutdated,
}

// Sentinel returns the sentinel error above that err is or wraps (the first
// in that order when it wraps several), or nil when it wraps none: a label
// for an error in a metric or a log.
func Sentinel(err error) error {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return s
		}
	}
	return nil
}

// IsSentinel reports whether err is, or wraps, one of the sentinel errors
// above. Every failure of roster's own is; an error that is not came from
// elsewhere (a handler's own error, or the context's when ctx ended).
func IsSentinel(err error) bool { return Sentinel(err) != nil }

// invalid returns ErrInvalidInput with a detail naming the field.
func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidInput, field, fmt.Sprintf(format, args...))
}
