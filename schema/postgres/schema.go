// Package postgresschema embeds roster's golang-migrate migrations for
// PostgreSQL. Versions match schema/sqlite: version N means the same
// features on both engines.
package postgresschema

import "embed"

// FS holds every migration file.
//
//go:embed *.sql
var FS embed.FS
