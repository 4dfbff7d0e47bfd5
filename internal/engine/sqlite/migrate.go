package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/golang-migrate/migrate/v4/database"
	"github.com/rosterdb/roster/internal/engine"
	sqliteschema "github.com/rosterdb/roster/schema/sqlite"
)

const migrationsTable = engine.MigrationsTable

// withMigrator runs fn with golang-migrate bound to one BEGIN IMMEDIATE
// transaction, committing when fn succeeds.
func withMigrator(ctx context.Context, w *sql.DB, migrations fs.FS, fn func(g *engine.Migrator) error) error {
	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("roster: migrate: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	// The layout of golang-migrate's sqlite driver.
	if _, err := tx.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+migrationsTable+
		" (version uint64, dirty bool); CREATE UNIQUE INDEX IF NOT EXISTS version_unique ON "+
		migrationsTable+" (version)"); err != nil {
		return fmt.Errorf("roster: migrate: %w", err)
	}
	// One BEGIN IMMEDIATE transaction holds SQLite's write lock across
	// processes until it ends.
	return engine.Migrate(ctx, engine.MigrationTx{
		Exec: engine.ExecFunc(tx.ExecContext), Scan: engine.ScanFunc(tx.QueryRowContext),
		NoRows: sql.ErrNoRows, Values: "(?, ?)", Commit: tx.Commit,
	}, migrations, fn)
}

// migrateSchema brings the schema up to date (or, with apply false, verifies
// that it is) in one transaction.
func migrateSchema(ctx context.Context, w *sql.DB, migrations fs.FS, apply bool, log *slog.Logger) error {
	return withMigrator(ctx, w, migrations, func(g *engine.Migrator) error { return g.Up(apply, log) })
}

// readVersion reads golang-migrate's version row without writing anything
// (not even its table): present is false when the table does not exist, and
// the version is then database.NilVersion.
func readVersion(ctx context.Context, conn *sql.DB) (version int, dirty, present bool, err error) {
	var n int
	if err := conn.QueryRowContext(ctx,
		"SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?", migrationsTable).Scan(&n); err != nil {
		return 0, false, false, fmt.Errorf("roster: reading the schema version: %w", translate(err))
	}
	version = database.NilVersion
	if n > 0 {
		err := conn.QueryRowContext(ctx, "SELECT version, dirty FROM "+migrationsTable+" LIMIT 1").Scan(&version, &dirty)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return 0, false, false, fmt.Errorf("roster: reading the schema version: %w", translate(err))
		}
	}
	return version, dirty, n > 0, nil
}

// verifyCurrent checks, without writing anything, that the schema is exactly
// the latest this build knows.
func verifyCurrent(ctx context.Context, conn *sql.DB, migrations fs.FS) error {
	version, dirty, present, err := readVersion(ctx, conn)
	if err != nil {
		return err
	}
	return engine.VerifyVersion(version, dirty, present, migrations)
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
	return &admin{path: path}, nil
}

// admin opens the file as each command needs it: read-only for Version, so
// that reading the version writes nothing (not even the checkpoint a
// read-write connection runs as it closes, which would copy a crashed
// writer's -wal into the main file), and read-write for Down and Force.
type admin struct {
	path           string
	reader, writer *Engine // nil until needed
}

// open returns the read-only or the read-write connections, opening them on
// first use.
func (a *admin) open(readOnly bool) (*Engine, error) {
	p := &a.writer
	if readOnly {
		p = &a.reader
	}
	if *p == nil {
		e := &Engine{cfg: engine.Config{BusyTimeout: 5 * time.Second, SyncFull: true, ReadConns: 1, ReadOnly: readOnly}}
		if err := e.openDBs(a.path); err != nil {
			return nil, err
		}
		*p = e
	}
	return *p, nil
}

func (a *admin) Close() error {
	var err error
	for _, e := range []*Engine{a.reader, a.writer} {
		if e != nil {
			err = errors.Join(err, e.closeDBs())
		}
	}
	return err
}

func (a *admin) run(ctx context.Context, fn func(g *engine.Migrator) error) error {
	e, err := a.open(false)
	if err != nil {
		return err
	}
	return withMigrator(ctx, e.writer, sqliteschema.FS, fn)
}

// Version reads the version without writing anything: a database without
// golang-migrate's table is at version -1 and stays untouched.
func (a *admin) Version(ctx context.Context) (version, latest int, err error) {
	e, err := a.open(true)
	if err != nil {
		return 0, 0, err
	}
	latest, err = engine.LatestIn(sqliteschema.FS)
	if err != nil {
		return 0, 0, err
	}
	version, dirty, _, err := readVersion(ctx, e.reader)
	if err != nil {
		return 0, 0, err
	}
	if dirty {
		return version, latest, fmt.Errorf("roster: database is dirty at version %d", version)
	}
	return version, latest, nil
}

func (a *admin) Down(ctx context.Context, steps int) error {
	return a.run(ctx, func(g *engine.Migrator) error { return g.Down(steps) })
}

func (a *admin) Force(ctx context.Context, version int) error {
	return a.run(ctx, func(g *engine.Migrator) error { return g.Force(version) })
}
