package service

import (
	"context"

	"github.com/rosterdb/roster/internal/engine"
	"github.com/rosterdb/roster/internal/engines"
)

// adminConfig is the engine configuration of the migration commands.
func adminConfig() engine.Config {
	c := defaultConfig()
	return c.engineConfig()
}

// SchemaVersion reports the schema version of the database at path (-1 when
// no migration was applied) and the latest version this build knows.
func SchemaVersion(ctx context.Context, path string) (version, latest int, err error) {
	a, err := engines.Admin(ctx, path, adminConfig())
	if err != nil {
		return 0, 0, err
	}
	defer a.Close()
	return a.Version(ctx)
}

// MigrateDown rolls back the latest steps migrations (0 = all) of the
// database at path, in one transaction.
func MigrateDown(ctx context.Context, path string, steps int) error {
	if steps < 0 {
		return invalid("steps", "%d is negative", steps)
	}
	a, err := engines.Admin(ctx, path, adminConfig())
	if err != nil {
		return err
	}
	defer a.Close()
	return a.Down(ctx, steps)
}

// ForceVersion records version (-1 = none) as the clean schema version of the
// database at path without running any migration: the repair after a
// migration failed outside roster. Only versions this build knows are
// accepted.
func ForceVersion(ctx context.Context, path string, version int) error {
	if version < -1 {
		return invalid("version", "%d is below -1", version)
	}
	a, err := engines.Admin(ctx, path, adminConfig())
	if err != nil {
		return err
	}
	defer a.Close()
	_, latest, err := a.Version(ctx)
	if err != nil && version > latest {
		return err
	}
	if version > latest {
		return invalid("version", "%d is above %d, the latest version this build knows", version, latest)
	}
	return a.Force(ctx, version)
}
