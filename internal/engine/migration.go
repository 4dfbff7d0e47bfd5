package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	"github.com/golang-migrate/migrate/v4/source"
	"github.com/golang-migrate/migrate/v4/source/iofs"
)

// MigrationsTable is golang-migrate's version table (version, dirty), so that
// golang-migrate's own tools read a roster database as theirs.
const MigrationsTable = "schema_migrations"

// MigrationTx is one open transaction of an engine, holding the engine's
// cross-process migration lock (SQLite: BEGIN IMMEDIATE; PostgreSQL:
// pg_advisory_xact_lock) and a MigrationsTable that exists, through the
// engine's own calls.
type MigrationTx struct {
	// Exec runs one migration file (no args), or a statement of its own.
	Exec func(ctx context.Context, query string, args ...any) error
	// Scan reads the first row of query into dest, or returns NoRows.
	Scan   func(ctx context.Context, query string, dest ...any) error
	NoRows error
	// Values is the VALUES of an INSERT of (version, dirty) in the engine's
	// placeholders.
	Values string
	// Commit commits the transaction.
	Commit func() error
}

// ExecFunc is a MigrationTx.Exec that runs a driver's exec and drops its
// result.
func ExecFunc[R any](exec func(ctx context.Context, query string, args ...any) (R, error)) func(ctx context.Context, query string, args ...any) error {
	return func(ctx context.Context, query string, args ...any) error {
		_, err := exec(ctx, query, args...)
		return err
	}
}

// ScanFunc is a MigrationTx.Scan that reads the one row of a driver's query
// (without arguments).
func ScanFunc[Row interface{ Scan(dest ...any) error }](queryRow func(ctx context.Context, query string, args ...any) Row) func(ctx context.Context, query string, dest ...any) error {
	return func(ctx context.Context, query string, dest ...any) error {
		return queryRow(ctx, query).Scan(dest...)
	}
}

// Version reads the recorded version (database.NilVersion when none).
func (t MigrationTx) Version(ctx context.Context) (version int, dirty bool, err error) {
	var v int64
	err = t.Scan(ctx, "SELECT version, dirty FROM "+MigrationsTable+" LIMIT 1", &v, &dirty)
	if errors.Is(err, t.NoRows) {
		return database.NilVersion, false, nil
	}
	return int(v), dirty, err
}

// SetVersion replaces the recorded version.
func (t MigrationTx) SetVersion(ctx context.Context, version int, dirty bool) error {
	if err := t.Exec(ctx, "DELETE FROM "+MigrationsTable); err != nil {
		return err
	}
	if version >= 0 || (version == database.NilVersion && dirty) {
		return t.Exec(ctx, "INSERT INTO "+MigrationsTable+" (version, dirty) VALUES "+t.Values, int64(version), dirty)
	}
	return nil
}

// Migrate runs fn with golang-migrate bound to tx (the migrations of fsys),
// then commits tx when fn succeeds.
func Migrate(ctx context.Context, tx MigrationTx, fsys fs.FS, fn func(g *Migrator) error) error {
	g, err := NewMigrator(ctx, tx, fsys)
	if err != nil {
		return err
	}
	if err := fn(g); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("roster: migrate: commit: %w", err)
	}
	return nil
}

// txDriver is a golang-migrate database driver that runs on one open
// transaction. A whole migration run is therefore a single transaction: it
// holds the engine's lock from the version check to the commit (so
// concurrent Opens from many processes serialize, and each sees the others'
// work), and a failing migration rolls back everything, leaving the previous
// version in place and no dirty flag behind. golang-migrate's own drivers
// commit each migration and its dirty flag separately, which is why roster
// does not use them.
type txDriver struct {
	ctx context.Context
	tx  MigrationTx
}

var _ database.Driver = (*txDriver)(nil)

// Open is not used: roster builds txDriver itself.
func (d *txDriver) Open(string) (database.Driver, error) {
	return nil, errors.New("roster: txDriver is opened by roster only")
}

// Close does nothing: the transaction's owner ends it.
func (d *txDriver) Close() error { return nil }

// Lock does nothing: the transaction already holds the engine's lock.
func (d *txDriver) Lock() error { return nil }

// Unlock does nothing: the lock ends with the transaction.
func (d *txDriver) Unlock() error { return nil }

// Run executes one migration file inside the transaction.
func (d *txDriver) Run(migration io.Reader) error {
	body, err := io.ReadAll(migration)
	if err != nil {
		return err
	}
	if err := d.tx.Exec(d.ctx, string(body)); err != nil {
		return &database.Error{OrigErr: err, Query: body}
	}
	return nil
}

// SetVersion records the version inside the transaction: a dirty flag set
// before a failing migration rolls back with it.
func (d *txDriver) SetVersion(version int, dirty bool) error {
	return d.tx.SetVersion(d.ctx, version, dirty)
}

// Version reads the recorded version.
func (d *txDriver) Version() (int, bool, error) { return d.tx.Version(d.ctx) }

// Drop is refused: roster never drops a database.
func (d *txDriver) Drop() error {
	return errors.New("roster: dropping the database is not supported")
}

// Migrator runs golang-migrate on one migration transaction.
type Migrator struct {
	m   *migrate.Migrate
	src source.Driver
	d   *txDriver
}

// NewMigrator binds golang-migrate, with the migrations of fsys as its iofs
// source, to tx.
func NewMigrator(ctx context.Context, tx MigrationTx, fsys fs.FS) (*Migrator, error) {
	src, err := iofs.New(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("roster: migrate: reading migrations: %w", err)
	}
	d := &txDriver{ctx: ctx, tx: tx}
	m, err := migrate.NewWithInstance("iofs", src, "roster", d)
	if err != nil {
		return nil, fmt.Errorf("roster: migrate: %w", err)
	}
	return &Migrator{m: m, src: src, d: d}, nil
}

// Latest returns the highest version among the migrations.
func (g *Migrator) Latest() (int, error) { return LatestVersion(g.src) }

// LatestVersion returns the highest version of a migration source.
func LatestVersion(src source.Driver) (int, error) {
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

// LatestIn returns the highest version among the migrations of fsys.
func LatestIn(fsys fs.FS) (int, error) {
	src, err := iofs.New(fsys, ".")
	if err != nil {
		return 0, fmt.Errorf("roster: migrate: reading migrations: %w", err)
	}
	return LatestVersion(src)
}

// Check refuses a dirty database, or one whose version this build does not
// know, and returns the current and latest versions.
func (g *Migrator) Check() (current, latest int, err error) {
	latest, err = g.Latest()
	if err != nil {
		return 0, 0, fmt.Errorf("roster: migrate: reading migrations: %w", err)
	}
	current, dirty, err := g.d.Version()
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
		if _, _, err := g.src.ReadUp(uint(current)); err != nil {
			return 0, 0, fmt.Errorf("%w: database at version %d, which this build does not know", ErrSchemaTooNew, current)
		}
	}
	return current, latest, nil
}

// Up brings the schema up to date (or, with apply false, verifies that it
// is).
func (g *Migrator) Up(apply bool, log *slog.Logger) error {
	current, latest, err := g.Check()
	if err != nil || current == latest {
		return err
	}
	if !apply {
		return fmt.Errorf("%w: database at version %d, this build needs %d", ErrSchemaOutdated, current, latest)
	}
	if err := g.m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("roster: migrate from version %d: %w", current, err)
	}
	log.Info("roster: schema migrated", "from", current, "to", latest)
	return nil
}

// Version reports the recorded version (-1 when none) and the latest one.
func (g *Migrator) Version() (version, latest int, err error) {
	if latest, err = g.Latest(); err != nil {
		return 0, 0, err
	}
	version, dirty, err := g.d.Version()
	if err == nil && dirty {
		err = fmt.Errorf("roster: database is dirty at version %d", version)
	}
	return version, latest, err
}

// Down rolls back steps migrations (0 = all).
func (g *Migrator) Down(steps int) error {
	if _, _, err := g.Check(); err != nil {
		return err
	}
	var err error
	if steps == 0 {
		err = g.m.Down()
	} else {
		err = g.m.Steps(-steps)
	}
	if errors.Is(err, migrate.ErrNoChange) {
		return nil
	}
	return err
}

// Force records version (-1 = none) as the clean version without running
// anything.
func (g *Migrator) Force(version int) error { return g.m.Force(version) }

// VerifyVersion compares a version read without any lock or write (read-only
// Stores) with the latest of fsys.
func VerifyVersion(version int, dirty, present bool, fsys fs.FS) error {
	latest, err := LatestIn(fsys)
	if err != nil {
		return err
	}
	switch {
	case !present:
		return fmt.Errorf("%w: no roster schema in this database, this build needs version %d", ErrSchemaOutdated, latest)
	case dirty:
		return fmt.Errorf("roster: database is dirty at version %d (a migration failed outside roster); repair it, then run `roster migrate force`", version)
	case version > latest:
		return fmt.Errorf("%w: database at version %d, this build knows up to %d", ErrSchemaTooNew, version, latest)
	case version < latest:
		return fmt.Errorf("%w: database at version %d, this build needs %d", ErrSchemaOutdated, version, latest)
	}
	return nil
}
