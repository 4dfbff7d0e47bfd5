package sqlite

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/rosterdb/roster/internal/engine"
	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// uniqueColumns maps the column list SQLite reports for a uniqueness
// violation ("UNIQUE constraint failed: t.a, t.b") to the schema's name for
// that rule. SQLite names a failed unique index only by its columns, so this
// table is the one place that knows them.
var uniqueColumns = map[string]engine.Constraint{
	"agents.id": engine.UniqueAgentID,
	"agents.provider, agents.provider_session_id": engine.UniqueAgentLiveProviderSession,
	"agents.owner_actor, agents.idempotency_key":  engine.UniqueAgentIdempotency,
	"executions.id": engine.UniqueExecutionID,
}

// translate is the SQLite engine's one translation of driver errors: no rows
// becomes engine.ErrNoRows, a broken schema rule a *engine.ConstraintError, a
// value over SQLite's size limit engine.ErrInvalidInput, a full disk, an I/O
// error or a read-only file engine.ErrStorage, a lock held past the busy
// timeout engine.ErrUnavailable. Anything else is returned as it is.
func translate(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return engine.ErrNoRows
	}
	switch code := sqliteCode(err); code {
	case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		c, ok := uniqueColumns[failedColumns(err)]
		if !ok {
			c = engine.UniqueOther
		}
		return &engine.ConstraintError{Constraint: c, Err: err}
	case sqlite3.SQLITE_CONSTRAINT_CHECK, sqlite3.SQLITE_CONSTRAINT_NOTNULL:
		return &engine.ConstraintError{Constraint: engine.CheckViolation, Err: err}
	case sqlite3.SQLITE_TOOBIG:
		return fmt.Errorf("%w: a value exceeds SQLite's size limit", engine.ErrInvalidInput)
	}
	switch sqliteCode(err) & 0xff {
	case sqlite3.SQLITE_CONSTRAINT:
		// Any other rule of the database (a trigger's RAISE, a foreign key).
		return &engine.ConstraintError{Constraint: engine.CheckViolation, Err: err}
	case sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CORRUPT,
		sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM, sqlite3.SQLITE_NOLFS:
		return fmt.Errorf("%w: %w", engine.ErrStorage, err)
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_PROTOCOL:
		return fmt.Errorf("%w: the database stayed locked past the busy timeout: %w", engine.ErrUnavailable, err)
	}
	return err
}

// sqliteCode returns the extended result code of a driver error, or 0.
func sqliteCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()
	}
	return 0
}

// failedColumns extracts "t.a, t.b" from "... constraint failed: t.a, t.b (2067)".
func failedColumns(err error) string {
	msg := err.Error()
	const marker = "constraint failed: "
	i := strings.LastIndex(msg, marker)
	if i < 0 {
		return ""
	}
	cols, _, _ := strings.Cut(msg[i+len(marker):], " (")
	return cols
}
