package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/rosterdb/roster/internal/engine"
	"github.com/rosterdb/roster/internal/pgtest"
)

// migrateOwner migrates the schema at ownerURL as its owner.
func migrateOwner(t testing.TB, ownerURL string) {
	t.Helper()
	e, err := Open(context.Background(), ownerURL, testConfig())
	if err != nil {
		t.Fatalf("migrating as the owner: %v", err)
	}
	must(t, e.Close())
}

// productionTargets are the least-privilege role with hostile defaults,
// directly and through PgBouncer in transaction pooling mode.
var productionTargets = []struct {
	name  string
	fresh func(t testing.TB, migrate func(testing.TB, string)) string
}{
	{"app", pgtest.FreshApp},
	{"pgbouncer", pgtest.FreshPgBouncer},
}

const settingsSQL = `SELECT current_setting('transaction_isolation') || ' ' || current_setting('statement_timeout') || ' ' ||
	current_setting('lock_timeout') || ' ' || current_setting('idle_in_transaction_session_timeout') || ' ' ||
	coalesce(current_schema(), '-')`

// README "Whatever the server's defaults": on a role whose defaults are
// SERIALIZABLE, no timeouts and another search_path, every way the engine
// runs statements (alone, in a write, in a snapshot) runs them READ
// COMMITTED (the snapshot: REPEATABLE READ), with roster's timeouts, in the
// URL's schema; directly and through PgBouncer.
func TestSettingsWhateverTheDefaults(t *testing.T) {
	for _, target := range productionTargets {
		t.Run(target.name, func(t *testing.T) {
			t.Parallel()
			loc := target.fresh(t, migrateOwner)
			e := openAt(t, loc, func(c *engine.Config) { c.Migrate = false })
			u, err := url.Parse(loc)
			must(t, err)
			schema := u.Query().Get("search_path")
			ctx := context.Background()
			want := "read committed 30s 10s 1min " + schema
			var got string
			must(t, e.db.QueryRow(ctx, settingsSQL).Scan(&got))
			if got != want {
				t.Errorf("a statement alone runs with %q, want %q", got, want)
			}
			for kind, want := range map[txKind]string{txWrite: want, txSnapshot: strings.Replace(want, "read committed", "repeatable read", 1)} {
				tx, err := e.sess.begin(ctx, e.pool, kind)
				must(t, err)
				must(t, tx.QueryRow(ctx, settingsSQL).Scan(&got))
				must(t, tx.Rollback(ctx))
				if got != want {
					t.Errorf("a transaction (kind %d) runs with %q, want %q", kind, got, want)
				}
			}
			// The URL may set the timeouts, never the isolation level.
			e = openAt(t, loc+"&statement_timeout=5s&default_transaction_isolation=serializable", func(c *engine.Config) { c.Migrate = false })
			must(t, e.db.QueryRow(ctx, settingsSQL).Scan(&got))
			if want := "read committed 5s 10s 1min " + schema; got != want {
				t.Errorf("with the URL's settings a statement runs with %q, want %q", got, want)
			}
		})
	}
}

// README "Roles" (least privilege): a role with only SELECT, INSERT, UPDATE and
// DELETE on roster's tables opens WithoutMigrate (and reads the version, as
// `roster migrate version` does) without creating or changing anything; so
// does a plain Open once the schema is current.
func TestLeastPrivilegeCreatesNothing(t *testing.T) {
	ctx := context.Background()
	loc := pgtest.FreshApp(t, migrateOwner)
	direct, err := pgx.Connect(ctx, pgtest.Direct(t, loc))
	must(t, err)
	defer direct.Close(ctx)
	objects := func() string {
		var s string
		must(t, direct.QueryRow(ctx, `SELECT string_agg(c.relname || ':' || c.relkind::text, ',' ORDER BY c.relname) FROM pg_class AS c
			WHERE c.relnamespace = current_schema()::regnamespace`).Scan(&s))
		return s
	}
	before := objects()
	for _, migrate := range []bool{false, true} {
		e := openAt(t, loc, func(c *engine.Config) { c.Migrate = migrate })
		a := admin{e}
		if v, latest, err := a.Version(ctx); err != nil || v != latest {
			t.Fatalf("Version: %d of %d, %v", v, latest, err)
		}
		must(t, e.Close())
	}
	if after := objects(); after != before {
		t.Fatalf("the application role changed the schema:\nbefore %s\nafter  %s", before, after)
	}
}

// README "Roles" and `roster migrate up`: a fresh database told search_path=NAME
// gets schema NAME created by the migration; a role that may not create it
// is told what to run.
func TestMigrateCreatesTheSchema(t *testing.T) {
	base := pgtest.URL(t)
	if base == "" {
		t.Skip(pgtest.SkipMessage)
	}
	ctx := context.Background()
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "roster_test_new_" + hex.EncodeToString(b[:])
	admin, err := pgx.Connect(ctx, base)
	must(t, err)
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		_ = admin.Close(context.Background())
	})

	// A role that may not create schemas is told what to run.
	app := pgtest.FreshApp(t, func(testing.TB, string) {}) // makes the role
	u, err := url.Parse(pgtest.WithSchema(t, base, schema))
	must(t, err)
	au, err := url.Parse(app)
	must(t, err)
	u.User = au.User
	_, err = Open(ctx, u.String(), testConfig())
	if err == nil || !strings.Contains(err.Error(), `CREATE SCHEMA "`+schema+`"`) {
		t.Fatalf("Open as a role that cannot create the schema: %v", err)
	}

	e := openAt(t, pgtest.WithSchema(t, base, schema))
	must(t, e.Close())
	var version int
	must(t, admin.QueryRow(ctx, "SELECT version FROM "+schema+".schema_migrations").Scan(&version))
	if latest, _ := engine.LatestIn(e.cfg.Migrations); version != latest {
		t.Fatalf("schema %s at version %d, want %d", schema, version, latest)
	}
	if errors.Is(err, engine.ErrSchemaOutdated) {
		t.Fatal(err)
	}
}

// Behind PgBouncer the owner migrates too: the migration's transaction
// carries search_path and its lock is transaction-scoped.
func TestMigrateThroughPgBouncer(t *testing.T) {
	loc := pgtest.ThroughPgBouncer(t, pgtest.Fresh(t))
	e := openAt(t, loc)
	v, latest, err := admin{e}.Version(context.Background())
	if err != nil || v != latest {
		t.Fatalf("after migrating through PgBouncer: version %d of %d, %v", v, latest, err)
	}
}

// Many Opens at once on a fresh database told search_path=NAME: the schema
// is created once, and every Open succeeds.
func TestConcurrentOpensCreateTheSchemaOnce(t *testing.T) {
	base := pgtest.URL(t)
	if base == "" {
		t.Skip(pgtest.SkipMessage)
	}
	ctx := context.Background()
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "roster_test_new_" + hex.EncodeToString(b[:])
	admin, err := pgx.Connect(ctx, base)
	must(t, err)
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		_ = admin.Close(context.Background())
	})
	loc := pgtest.WithSchema(t, base, schema)
	errs := make(chan error, 4)
	for range cap(errs) {
		go func() {
			e, err := Open(ctx, loc, testConfig())
			if err == nil {
				err = e.Close()
			}
			errs <- err
		}()
	}
	for range cap(errs) {
		must(t, <-errs)
	}
}
