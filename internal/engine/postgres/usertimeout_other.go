//go:build !linux

package postgres

import "syscall"

// setUserTimeout does nothing where TCP_USER_TIMEOUT is unknown: keepalives
// alone notice a vanished peer.
func setUserTimeout(string, string, syscall.RawConn) error { return nil }
