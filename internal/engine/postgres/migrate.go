package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/golang-migrate/migrate/v4/database"
	"github.com/jackc/pgx/v5"
	"github.com/rosterdb/roster/internal/engine"
)

const migrationsTable = engine.MigrationsTable

// migrationTx is an engine.MigrationTx on one transaction that holds the
// schema's migration advisory lock until it ends.
type migrationTx struct{ tx pgx.Tx }

func (m migrationTx) Exec(ctx context.Context, query string) error {
	// Without arguments pgx uses the simple protocol: a file may hold many
	// statements.
	_, err := m.tx.Exec(ctx, query)
	return err
}

func (m migrationTx) Version(ctx context.Context) (int, bool, error) {
	var version int64
	var dirty bool
	err := m.tx.QueryRow(ctx, "SELECT version, dirty FROM "+migrationsTable+" LIMIT 1").Scan(&version, &dirty)
	if errors.Is(err, pgx.ErrNoRows) {
		return database.NilVersion, false, nil
	}
	return int(version), dirty, err
}

func (m migrationTx) SetVersion(ctx context.Context, version int, dirty bool) error {
	if _, err := m.tx.Exec(ctx, "DELETE FROM "+migrationsTable); err != nil {
		return err
	}
	if version >= 0 || (version == database.NilVersion && dirty) {
		_, err := m.tx.Exec(ctx, "INSERT INTO "+migrationsTable+" (version, dirty) VALUES ($1, $2)", int64(version), dirty)
		return err
	}
	return nil
}

// lockMigrations takes the migration lock of the current schema: many
// processes opening one new database at once run their migrations one after
// the other, each seeing the work of those before. A transaction-scoped lock,
// so it also works behind a transaction-pooling proxy.
const lockMigrations = "SELECT pg_advisory_xact_lock(hashtext('roster.migrate.' || coalesce(current_schema(), '')))"

// withMigrator runs fn with golang-migrate bound to one transaction under the
// migration lock, committing when fn succeeds.
func (e *Engine) withMigrator(ctx context.Context, fn func(g *engine.Migrator) error) error {
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("roster: migrate: begin: %w", translate(err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, lockMigrations); err != nil {
		return fmt.Errorf("roster: migrate: lock: %w", translate(err))
	}
	// The layout of golang-migrate's postgres driver.
	if _, err := tx.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+migrationsTable+
		" (version bigint NOT NULL PRIMARY KEY, dirty boolean NOT NULL)"); err != nil {
		return fmt.Errorf("roster: migrate: %w", translate(err))
	}
	g, err := engine.NewMigrator(ctx, migrationTx{tx}, e.cfg.Migrations)
	if err != nil {
		return err
	}
	if err := fn(g); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("roster: migrate: commit: %w", translate(err))
	}
	return nil
}

// verifyCurrent checks, without writing anything, that the schema is exactly
// the latest this build knows.
func (e *Engine) verifyCurrent(ctx context.Context) error {
	var present bool
	if err := e.pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", migrationsTable).Scan(&present); err != nil {
		return fmt.Errorf("roster: reading the schema version: %w", translate(err))
	}
	version, dirty := int64(database.NilVersion), false
	if present {
		err := e.pool.QueryRow(ctx, "SELECT version, dirty FROM "+migrationsTable+" LIMIT 1").Scan(&version, &dirty)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("roster: reading the schema version: %w", translate(err))
		}
	}
	return engine.VerifyVersion(int(version), dirty, present, e.cfg.Migrations)
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

// Version reads the version without writing anything: a schema without
// golang-migrate's table is at version -1 and stays untouched.
func (a admin) Version(ctx context.Context) (version, latest int, err error) {
	var present bool
	if err := a.e.pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", migrationsTable).Scan(&present); err != nil {
		return 0, 0, fmt.Errorf("roster: reading the schema version: %w", translate(err))
	}
	if !present {
		latest, err := engine.LatestIn(a.e.cfg.Migrations)
		return database.NilVersion, latest, err
	}
	err = a.e.withMigrator(ctx, func(g *engine.Migrator) error {
		version, latest, err = g.Version()
		return err
	})
	return version, latest, err
}

func (a admin) Down(ctx context.Context, steps int) error {
	return a.e.withMigrator(ctx, func(g *engine.Migrator) error { return g.Down(steps) })
}

func (a admin) Force(ctx context.Context, version int) error {
	return a.e.withMigrator(ctx, func(g *engine.Migrator) error { return g.Force(version) })
}
