package service

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	"github.com/golang-migrate/migrate/v4/source"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/rosterdb/roster/schema"
)

// migrationsTable is golang-migrate's version table, in the layout of its
// sqlite driver, so that the migrate CLI reads a roster database as its own.
const migrationsTable = "schema_migrations"

// txDriver is a golang-migrate database driver that runs on one open
// BEGIN IMMEDIATE transaction. A whole migration run is therefore a single
// transaction: it holds SQLite's write lock from the version check to the
// commit (so concurrent Opens from many processes serialize, and each sees
// the others' work), and a failing migration rolls back everything, leaving
// the previous version in place and no dirty flag behind.
//
// golang-migrate's own sqlite driver commits each migration and its dirty
// flag separately under an in-process lock, which is why roster does not use it.
type txDriver struct {
	ctx context.Context
	tx  *sql.Tx
}

var _ database.Driver = (*txDriver)(nil)

// Open is not used: roster builds txDriver itself.
func (d *txDriver) Open(string) (database.Driver, error) {
	return nil, errors.New("roster: txDriver is opened by roster only")
}

// Close does nothing: the transaction's owner ends it.
func (d *txDriver) Close() error { return nil }

// Lock does nothing: the BEGIN IMMEDIATE transaction already holds SQLite's
// write lock, across processes.
func (d *txDriver) Lock() error { return nil }

// Unlock does nothing: the lock ends with the transaction.
func (d *txDriver) Unlock() error { return nil }

// Run executes one migration file inside the transaction.
func (d *txDriver) Run(migration io.Reader) error {
	body, err := io.ReadAll(migration)
	if err != nil {
		return err
	}
	if _, err := d.tx.ExecContext(d.ctx, string(body)); err != nil {
		return &database.Error{OrigErr: err, Query: body}
	}
	return nil
}

// SetVersion records the version in golang-migrate's table, inside the
// transaction: a dirty flag set before a failing migration rolls back with it.
func (d *txDriver) SetVersion(version int, dirty bool) error {
	if _, err := d.tx.ExecContext(d.ctx, "DELETE FROM "+migrationsTable); err != nil {
		return err
	}
	if version >= 0 || (version == database.NilVersion && dirty) {
		_, err := d.tx.ExecContext(d.ctx,
			"INSERT INTO "+migrationsTable+" (version, dirty) VALUES (?, ?)", version, dirty)
		return err
	}
	return nil
}

// Version reads the recorded version (database.NilVersion when none).
func (d *txDriver) Version() (int, bool, error) {
	var version int
	var dirty bool
	err := d.tx.QueryRowContext(d.ctx,
		"SELECT version, dirty FROM "+migrationsTable+" LIMIT 1").Scan(&version, &dirty)
	if errors.Is(err, sql.ErrNoRows) {
		return database.NilVersion, false, nil
	}
	return version, dirty, err
}

// Drop is refused: roster never drops a database.
func (d *txDriver) Drop() error {
	return errors.New("roster: dropping the database is not supported")
}

// withMigrationTx runs fn with a golang-migrate instance bound to one
// BEGIN IMMEDIATE transaction, committing when fn succeeds.
func withMigrationTx(ctx context.Context, w *sql.DB, migrations fs.FS, fn func(m *migrate.Migrate, src source.Driver, d *txDriver) error) error {
	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("roster: migrate: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+migrationsTable+
		" (version uint64, dirty bool); CREATE UNIQUE INDEX IF NOT EXISTS version_unique ON "+
		migrationsTable+" (version)"); err != nil {
		return fmt.Errorf("roster: migrate: %w", err)
	}
	src, err := iofs.New(migrations, ".")
	if err != nil {
		return fmt.Errorf("roster: migrate: reading migrations: %w", err)
	}
	d := &txDriver{ctx: ctx, tx: tx}
	m, err := migrate.NewWithInstance("iofs", src, "roster", d)
	if err != nil {
		return fmt.Errorf("roster: migrate: %w", err)
	}
	if err := fn(m, src, d); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("roster: migrate: commit: %w", err)
	}
	return nil
}

// latestVersion returns the highest version among the migrations.
func latestVersion(src source.Driver) (int, error) {
	v, err := src.First()
	if err != nil {
		return 0, err
	}
	for {
		next, err := src.Next(v)
		if errors.Is(err, fs.ErrNotExist) {
			return int(v), nil
		}
		if err != nil {
			return 0, err
		}
		v = next
	}
}

// checkVersion refuses a dirty database, or one whose version this build does
// not know, and returns the current and latest versions.
func checkVersion(src source.Driver, d *txDriver) (current, latest int, err error) {
	latest, err = latestVersion(src)
	if err != nil {
		return 0, 0, fmt.Errorf("roster: migrate: reading migrations: %w", err)
	}
	current, dirty, err := d.Version()
	if err != nil {
		return 0, 0, fmt.Errorf("roster: migrate: reading version: %w", err)
	}
	if dirty {
		return 0, 0, fmt.Errorf("roster: migrate: database is dirty at version %d (a migration failed outside roster); repair it, then run `roster migrate force`", current)
	}
	if current > latest {
		return 0, 0, fmt.Errorf("%w: database at version %d, this build knows up to %d", ErrSchemaTooNew, current, latest)
	}
	if current != database.NilVersion {
		if _, _, err := src.ReadUp(uint(current)); err != nil {
			return 0, 0, fmt.Errorf("%w: database at version %d, which this build does not know", ErrSchemaTooNew, current)
		}
	}
	return current, latest, nil
}

// migrateSchema brings the schema up to date (or, with apply false, verifies
// that it is) in one transaction.
func migrateSchema(ctx context.Context, w *sql.DB, migrations fs.FS, apply bool, log *slog.Logger) error {
	return withMigrationTx(ctx, w, migrations, func(m *migrate.Migrate, src source.Driver, d *txDriver) error {
		current, latest, err := checkVersion(src, d)
		if err != nil {
			return err
		}
		if current == latest {
			return nil
		}
		if !apply {
			return fmt.Errorf("%w: database at version %d, this build needs %d", ErrSchemaOutdated, current, latest)
		}
		if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
			return fmt.Errorf("roster: migrate from version %d: %w", current, err)
		}
		log.Info("roster: schema migrated", "from", current, "to", latest)
		return nil
	})
}

// SchemaVersion reports the schema version of the database file at path (-1
// when no migration was applied) and the latest version this build knows. It
// changes nothing beyond creating golang-migrate's version table.
func SchemaVersion(ctx context.Context, path string) (version, latest int, err error) {
	err = withAdminWriter(ctx, path, func(w *sql.DB) error {
		return withMigrationTx(ctx, w, schema.FS, func(_ *migrate.Migrate, src source.Driver, d *txDriver) error {
			var dirty bool
			if latest, err = latestVersion(src); err != nil {
				return err
			}
			version, dirty, err = d.Version()
			if err == nil && dirty {
				err = fmt.Errorf("roster: database is dirty at version %d", version)
			}
			return err
		})
	})
	return version, latest, err
}

// MigrateDown rolls back the latest steps migrations (0 = all) of the
// database file at path, in one transaction.
func MigrateDown(ctx context.Context, path string, steps int) error {
	if steps < 0 {
		return invalid("steps", "%d is negative", steps)
	}
	return withAdminWriter(ctx, path, func(w *sql.DB) error {
		return withMigrationTx(ctx, w, schema.FS, func(m *migrate.Migrate, src source.Driver, d *txDriver) error {
			if _, _, err := checkVersion(src, d); err != nil {
				return err
			}
			var err error
			if steps == 0 {
				err = m.Down()
			} else {
				err = m.Steps(-steps)
			}
			if errors.Is(err, migrate.ErrNoChange) {
				return nil
			}
			return err
		})
	})
}

// ForceVersion records version (-1 = none) as the schema version of the
// database file at path, clean, without running any migration: the repair
// after a migration failed outside roster.
func ForceVersion(ctx context.Context, path string, version int) error {
	if version < -1 {
		return invalid("version", "%d is below -1", version)
	}
	return withAdminWriter(ctx, path, func(w *sql.DB) error {
		return withMigrationTx(ctx, w, schema.FS, func(m *migrate.Migrate, _ source.Driver, _ *txDriver) error {
			return m.Force(version)
		})
	})
}

// withAdminWriter opens only the writer connection of an existing database
// file, for the migrate commands.
func withAdminWriter(ctx context.Context, path string, fn func(w *sql.DB) error) error {
	if path == ":memory:" || path == "" {
		return invalid("path", "migrate commands need a database file")
	}
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("roster: %w", err)
	}
	s := &Store{cfg: defaultConfig()}
	if err := s.openDBs(path); err != nil {
		return err
	}
	defer s.closeDBs()
	return fn(s.writer)
}
