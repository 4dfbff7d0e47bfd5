package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	"github.com/golang-migrate/migrate/v4/source"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/rosterdb/roster/internal/engine"
	sqliteschema "github.com/rosterdb/roster/schema/sqlite"
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
		return 0, 0, fmt.Errorf("%w: database at version %d, this build knows up to %d", engine.ErrSchemaTooNew, current, latest)
	}
	if current != database.NilVersion {
		if _, _, err := src.ReadUp(uint(current)); err != nil {
			return 0, 0, fmt.Errorf("%w: database at version %d, which this build does not know", engine.ErrSchemaTooNew, current)
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
			return fmt.Errorf("%w: database at version %d, this build needs %d", engine.ErrSchemaOutdated, current, latest)
		}
		if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
			return fmt.Errorf("roster: migrate from version %d: %w", current, err)
		}
		log.Info("roster: schema migrated", "from", current, "to", latest)
		return nil
	})
}

// verifyCurrent checks, without writing anything (not even golang-migrate's
// version table), that the schema is exactly the latest this build knows.
func verifyCurrent(ctx context.Context, conn *sql.DB, migrations fs.FS) error {
	src, err := iofs.New(migrations, ".")
	if err != nil {
		return fmt.Errorf("roster: migrate: reading migrations: %w", err)
	}
	latest, err := latestVersion(src)
	if err != nil {
		return fmt.Errorf("roster: migrate: reading migrations: %w", err)
	}
	var n int
	if err := conn.QueryRowContext(ctx,
		"SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?", migrationsTable).Scan(&n); err != nil {
		return fmt.Errorf("roster: reading the schema version: %w", translate(err))
	}
	if n == 0 {
		return fmt.Errorf("%w: no roster schema in this database, this build needs version %d", engine.ErrSchemaOutdated, latest)
	}
	version, dirty := database.NilVersion, false
	err = conn.QueryRowContext(ctx, "SELECT version, dirty FROM "+migrationsTable+" LIMIT 1").Scan(&version, &dirty)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("roster: reading the schema version: %w", translate(err))
	}
	switch {
	case dirty:
		return fmt.Errorf("roster: database is dirty at version %d (a migration failed outside roster); repair it, then run `roster migrate force`", version)
	case version > latest:
		return fmt.Errorf("%w: database at version %d, this build knows up to %d", engine.ErrSchemaTooNew, version, latest)
	case version < latest:
		return fmt.Errorf("%w: database at version %d, this build needs %d", engine.ErrSchemaOutdated, version, latest)
	}
	return nil
}

// Admin opens the database file at path (which must exist) for the migration
// commands.
func Admin(path string) (engine.Admin, error) {
	if path == MemoryPath || path == "" {
		return nil, fmt.Errorf("%w: path: migrate commands need a database file", engine.ErrInvalidInput)
	}
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: database file %s does not exist", engine.ErrNotFound, path)
		}
		return nil, fmt.Errorf("roster: %w", err)
	}
	e := &Engine{cfg: engine.Config{BusyTimeout: defaultBusyTimeout, SyncFull: true, ReadConns: 1}}
	if err := e.openDBs(path); err != nil {
		return nil, err
	}
	return admin{e}, nil
}

// defaultBusyTimeout is the busy timeout of the migration commands.
const defaultBusyTimeout = 5 * time.Second

type admin struct{ e *Engine }

func (a admin) Close() error { return a.e.closeDBs() }

func (a admin) Version(ctx context.Context) (version, latest int, err error) {
	err = withMigrationTx(ctx, a.e.writer, sqliteschema.FS, func(_ *migrate.Migrate, src source.Driver, d *txDriver) error {
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
	return version, latest, err
}

func (a admin) Down(ctx context.Context, steps int) error {
	return withMigrationTx(ctx, a.e.writer, sqliteschema.FS, func(m *migrate.Migrate, src source.Driver, d *txDriver) error {
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
}

func (a admin) Force(ctx context.Context, version int) error {
	return withMigrationTx(ctx, a.e.writer, sqliteschema.FS, func(m *migrate.Migrate, _ source.Driver, _ *txDriver) error {
		return m.Force(version)
	})
}
