//go:build unix

package netfault

import (
	"net"

	"golang.org/x/sys/unix"
)

// peerClosed reports whether the peer of c has closed or reset it with no
// data left to read, without consuming any byte.
func peerClosed(c *net.TCPConn) bool {
	rc, err := c.SyscallConn()
	if err != nil {
		return true
	}
	closed := false
	err = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		switch {
		case err == unix.EAGAIN || err == unix.EINTR:
		case err != nil:
			closed = true
		case n == 0:
			closed = true
		}
		return true
	})
	return err != nil || closed
}
