package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rosterdb/roster/internal/pgtest"
)

// migrate version on a database without any migration says so ("no
// migrations applied"; JSON: "version": null), on both engines.
func TestCLIMigrateVersionWithoutMigrations(t *testing.T) {
	latest := latestVersion(t)
	engines := map[string]func(t *testing.T) string{
		"sqlite, an empty file": func(t *testing.T) string {
			path := filepath.Join(t.TempDir(), "empty.db")
			must(t, os.WriteFile(path, nil, 0o600))
			return path
		},
		"sqlite, migrated down": func(t *testing.T) string {
			path := filepath.Join(t.TempDir(), "down.db")
			if code, _, errOut := runCLI(t, "migrate", "up", "--db", path); code != 0 {
				t.Fatal(errOut)
			}
			if code, _, errOut := runCLI(t, "migrate", "down", "--steps", "0", "--db", path); code != 0 {
				t.Fatal(errOut)
			}
			return path
		},
		"postgres, an empty schema": func(t *testing.T) string { return pgtest.Fresh(t) },
	}
	for name, db := range engines {
		t.Run(name, func(t *testing.T) {
			path := db(t)
			code, out, errOut := runCLI(t, "migrate", "version", "--db", path)
			if code != 0 || !strings.Contains(out, "no migrations applied") || strings.Contains(out, "-1") {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			code, out, errOut = runCLI(t, "migrate", "version", "--db", path, "--json")
			var v struct {
				Version *int
				Latest  int
			}
			if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.Version != nil || v.Latest != latest || !strings.Contains(out, `"version": null`) {
				t.Fatalf("--json: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
		})
	}
}
