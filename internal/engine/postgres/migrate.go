package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/golang-migrate/migrate/v4/database"
	"github.com/jackc/pgx/v5"
	"github.com/rosterdb/roster/internal/engine"
)

const migrationsTable = engine.MigrationsTable

// lockMigrations takes the migration lock of the current schema: many
// processes opening one new database at once run their migrations one after
// the other, each seeing the work of those before. A transaction-scoped lock,
// so it also works behind a transaction-pooling proxy.
const lockMigrations = "SELECT pg_advisory_xact_lock(hashtext('roster.migrate.' || coalesce(current_schema(), '')))"

// withMigrator runs fn with golang-migrate bound to one transaction under the
// migration lock, committing when fn succeeds.
func (e *Engine) withMigrator(ctx context.Context, fn func(g *engine.Migrator) error) error {
	tx, err := e.sess.begin(ctx, e.pool, txMigrate)
	if err != nil {
		return fmt.Errorf("roster: migrate: begin: %w", translate(err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, lockMigrations); err != nil {
		return fmt.Errorf("roster: migrate: lock: %w", translate(err))
	}
	// Under the lock (taken on the schema-less key when the schema is
	// missing): Opens racing on a fresh database create it once.
	if err := createSchema(ctx, tx); err != nil {
		return err
	}
	// The layout of golang-migrate's postgres driver, created when missing
	// only (so that a role without CREATE may open a current schema).
	var present bool
	if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", migrationsTable).Scan(&present); err != nil {
		return fmt.Errorf("roster: migrate: %w", translate(err))
	}
	if !present {
		if _, err := tx.Exec(ctx, "CREATE TABLE "+migrationsTable+
			" (version bigint NOT NULL PRIMARY KEY, dirty boolean NOT NULL)"); err != nil {
			return fmt.Errorf("roster: migrate: %w", translate(err))
		}
	}
	return engine.Migrate(ctx, engine.MigrationTx{
		// Without arguments pgx uses the simple protocol: a file may hold
		// many statements.
		Exec: engine.ExecFunc(tx.Exec), Scan: engine.ScanFunc(tx.QueryRow),
		NoRows: pgx.ErrNoRows, Values: "($1, $2)", Commit: func() error { return translate(tx.Commit(ctx)) },
	}, e.cfg.Migrations, fn)
}

// verifyCurrent checks, without writing anything, that the schema is exactly
// the latest this build knows.
func (e *Engine) verifyCurrent(ctx context.Context) error {
	version, dirty, present, err := e.readVersion(ctx)
	if err != nil {
		return err
	}
	return engine.VerifyVersion(version, dirty, present, e.cfg.Migrations)
}

// readVersion reads the recorded version with two plain reads: no lock, no
// write, nothing created (present is false when the version table is
// missing).
func (e *Engine) readVersion(ctx context.Context) (version int, dirty, present bool, err error) {
	if err := e.db.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", migrationsTable).Scan(&present); err != nil {
		return 0, false, false, fmt.Errorf("roster: reading the schema version: %w", translate(err))
	}
	v := int64(database.NilVersion)
	if present {
		err := e.db.QueryRow(ctx, "SELECT version, dirty FROM "+migrationsTable+" LIMIT 1").Scan(&v, &dirty)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return 0, false, false, fmt.Errorf("roster: reading the schema version: %w", translate(err))
		}
	}
	return int(v), dirty, present, nil
}

// Admin opens the database at rawURL for the migration commands, without
// checking its schema (repairing it is what they are for).
func Admin(ctx context.Context, rawURL string, cfg engine.Config) (engine.Admin, error) {
	e, err := connect(ctx, rawURL, cfg)
	if err != nil {
		return nil, err
	}
	close(e.done) // no clock to keep
	return admin{e}, nil
}

type admin struct{ e *Engine }

func (a admin) Close() error { return a.e.Close() }

// Version reads the version without writing anything (a role that may
// only read and write roster's tables may ask): a schema without
// golang-migrate's table is at version -1 and stays untouched.
func (a admin) Version(ctx context.Context) (version, latest int, err error) {
	if latest, err = engine.LatestIn(a.e.cfg.Migrations); err != nil {
		return 0, 0, err
	}
	version, dirty, _, err := a.e.readVersion(ctx)
	if err == nil && dirty {
		err = fmt.Errorf("roster: database is dirty at version %d", version)
	}
	return version, latest, err
}

func (a admin) Down(ctx context.Context, steps int) error {
	return a.e.withMigrator(ctx, func(g *engine.Migrator) error { return g.Down(steps) })
}

func (a admin) Force(ctx context.Context, version int) error {
	return a.e.withMigrator(ctx, func(g *engine.Migrator) error { return g.Force(version) })
}

// createSchema creates the schema that search_path names first when no
// schema of search_path exists (a fresh database told search_path=roster),
// so that migrating needs no step of its own; when it cannot, the error says
// what to run.
func createSchema(ctx context.Context, tx pgx.Tx) error {
	var current *string
	var path, user string
	err := tx.QueryRow(ctx, "SELECT current_schema(), current_setting('search_path'), session_user").Scan(&current, &path, &user)
	if err != nil {
		return fmt.Errorf("roster: migrate: reading search_path: %w", translate(err))
	}
	if current != nil {
		return nil
	}
	name := firstSchema(path, user)
	if name == "" {
		return fmt.Errorf("roster: migrate: search_path %q names no schema to create roster's tables in: set search_path in the URL", path)
	}
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+ident); err != nil {
		return fmt.Errorf("roster: migrate: schema %s of search_path does not exist and could not be created (%w): create it, e.g. CREATE SCHEMA %s AUTHORIZATION %s",
			ident, translate(err), ident, pgx.Identifier{user}.Sanitize())
	}
	return nil
}

// firstSchema returns the first schema search_path names ("$user" being
// user), unquoted; "" when it names none.
func firstSchema(path, user string) string {
	path = strings.TrimSpace(path)
	if path == "" {
		return ""
	}
	var name string
	if strings.HasPrefix(path, `"`) {
		var b strings.Builder
		for i := 1; i < len(path); i++ {
			if path[i] == '"' {
				if i+1 < len(path) && path[i+1] == '"' {
					b.WriteByte('"')
					i++
					continue
				}
				break
			}
			b.WriteByte(path[i])
		}
		name = b.String()
	} else {
		name, _, _ = strings.Cut(path, ",")
		name = strings.ToLower(strings.TrimSpace(name))
	}
	if name == "$user" {
		return user
	}
	return name
}
