// Package engines picks the engine for a database path: a PostgreSQL URL
// (postgres:// or postgresql://) or a SQLite file path / ":memory:". It is
// the only package besides the engines themselves that knows which engines
// there are.
package engines

import (
	"context"
	"fmt"
	"strings"

	"github.com/rosterdb/roster/internal/engine"
	"github.com/rosterdb/roster/internal/engine/postgres"
	"github.com/rosterdb/roster/internal/engine/sqlite"
)

// Open opens the database at path with the engine its form names.
func Open(ctx context.Context, path string, cfg engine.Config) (engine.Engine, error) {
	if postgres.IsURL(path) {
		return postgres.Open(ctx, path, cfg)
	}
	if err := refuseUnknownURL(path); err != nil {
		return nil, err
	}
	return sqlite.Open(ctx, path, cfg)
}

// Admin opens the database at path for the migration commands.
func Admin(ctx context.Context, path string, cfg engine.Config) (engine.Admin, error) {
	if postgres.IsURL(path) {
		return postgres.Admin(ctx, path, cfg)
	}
	if err := refuseUnknownURL(path); err != nil {
		return nil, err
	}
	return sqlite.Admin(path)
}

// refuseUnknownURL rejects URLs of databases this build has no engine for, so
// that "mysql://..." is never created as a SQLite file of that name.
func refuseUnknownURL(path string) error {
	scheme, _, ok := strings.Cut(path, "://")
	if ok && scheme != "" && !strings.ContainsAny(scheme, "/.\\") {
		return fmt.Errorf("%w: path: no engine for %s:// databases in this build", engine.ErrInvalidInput, scheme)
	}
	return nil
}
