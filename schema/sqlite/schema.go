// Package sqliteschema embeds roster's golang-migrate migrations for SQLite.
//
// Files are named NNNN_name.up.sql / NNNN_name.down.sql with zero-padded
// numbers, so that sqlc (which reads them in lexicographic order) and
// golang-migrate (which orders them numerically) agree.
package sqliteschema

import "embed"

// FS holds every migration file.
//
//go:embed *.sql
var FS embed.FS
