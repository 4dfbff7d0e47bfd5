//go:build tools

// Package tools pins the versions of the code generators and linters that the
// Makefile runs with `go run`, so a fresh machine needs nothing but Go.
package tools

import (
	_ "github.com/sqlc-dev/sqlc/cmd/sqlc"
	_ "honnef.co/go/tools/cmd/staticcheck"
)
