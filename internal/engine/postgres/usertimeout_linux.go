package postgres

import "syscall"

// tcpUserTimeoutOpt is Linux's TCP_USER_TIMEOUT (not in package syscall).
const tcpUserTimeoutOpt = 0x12

// setUserTimeout bounds how long data sent on a TCP connection may remain
// unacknowledged before the kernel drops the connection (with keepalives,
// also when nothing is being sent). Other sockets are left alone.
func setUserTimeout(network, _ string, c syscall.RawConn) error {
	if network != "tcp" && network != "tcp4" && network != "tcp6" {
		return nil
	}
	_ = c.Control(func(fd uintptr) {
		_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeoutOpt, int(tcpUserTimeout.Milliseconds()))
	})
	return nil
}
