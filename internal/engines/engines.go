// Package engines picks the engine for a database path: a PostgreSQL URL
// (postgres:// or postgresql://) or a SQLite file path / ":memory:". It is
// the only package besides the engines themselves that knows which engines
// there are.
package engines

import (
	"context"
	"fmt"
	"strings"

	"github.com/rosterdb/roster/internal/connstr"
	"github.com/rosterdb/roster/internal/engine"
	"github.com/rosterdb/roster/internal/engine/postgres"
	"github.com/rosterdb/roster/internal/engine/sqlite"
)

// Open opens the database at path with the engine its form names. Its
// errors never show a password path holds (connstr.ScrubError), whichever
// engine or driver wrote them.
func Open(ctx context.Context, path string, cfg engine.Config) (engine.Engine, error) {
	e, err := open(ctx, path, cfg)
	return e, connstr.ScrubError(err, path)
}

func open(ctx context.Context, path string, cfg engine.Config) (engine.Engine, error) {
	if postgres.IsURL(path) {
		return postgres.Open(ctx, path, cfg)
	}
	if err := refuseUnknownURL(path); err != nil {
		return nil, err
	}
	return sqlite.Open(ctx, path, cfg)
}

// Admin opens the database at path for the migration commands. Neither its
// errors nor those of the Admin it returns show a password path holds.
func Admin(ctx context.Context, path string, cfg engine.Config) (engine.Admin, error) {
	a, err := openAdmin(ctx, path, cfg)
	if err != nil {
		return nil, connstr.ScrubError(err, path)
	}
	return scrubbedAdmin{a: a, path: path}, nil
}

func openAdmin(ctx context.Context, path string, cfg engine.Config) (engine.Admin, error) {
	if postgres.IsURL(path) {
		return postgres.Admin(ctx, path, cfg)
	}
	if err := refuseUnknownURL(path); err != nil {
		return nil, err
	}
	return sqlite.Admin(path)
}

// scrubbedAdmin hides the password of path in the errors of a.
type scrubbedAdmin struct {
	a    engine.Admin
	path string
}

func (s scrubbedAdmin) Version(ctx context.Context) (version, latest int, err error) {
	version, latest, err = s.a.Version(ctx)
	return version, latest, connstr.ScrubError(err, s.path)
}

func (s scrubbedAdmin) Down(ctx context.Context, steps int) error {
	return connstr.ScrubError(s.a.Down(ctx, steps), s.path)
}

func (s scrubbedAdmin) Force(ctx context.Context, version int) error {
	return connstr.ScrubError(s.a.Force(ctx, version), s.path)
}

func (s scrubbedAdmin) Close() error { return connstr.ScrubError(s.a.Close(), s.path) }

// refuseUnknownURL rejects URLs of databases this build has no engine for, so
// that "mysql://..." is never created as a SQLite file of that name.
func refuseUnknownURL(path string) error {
	scheme, _, ok := strings.Cut(path, "://")
	if ok && scheme != "" && !strings.ContainsAny(scheme, "/.\\") {
		return fmt.Errorf("%w: path: no engine for %s:// databases in this build", engine.ErrInvalidInput, scheme)
	}
	return nil
}
