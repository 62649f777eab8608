// Package deadaddr gives tests a loopback address that refuses every
// connection and that no other listener can take while the test runs.
//
// Listening on 127.0.0.1:0 and closing the listener to get a "dead" port is
// a race: the kernel may hand that port to the next listener (another
// test's server, even the same test's), which then answers. A socket bound
// to the port without listening holds it, and connecting to it is refused.
package deadaddr

import (
	"fmt"
	"syscall"
	"testing"
)

// Loopback returns host:port on 127.0.0.1 where connections are refused,
// held until the test (and its subtests) end.
func Loopback(t testing.TB) string {
	t.Helper()
	addr, release, err := Hold()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	return addr
}

// Hold is Loopback for an address that must outlive one test (a process
// shared by a package's tests): the port stays held until release.
func Hold() (addr string, release func(), err error) {
	// Processes the test starts must not inherit the socket (and hold the
	// port): close-on-exec, set under ForkLock as the net package does.
	syscall.ForkLock.RLock()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fd)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return "", nil, fmt.Errorf("deadaddr: socket: %w", err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		_ = syscall.Close(fd)
		return "", nil, fmt.Errorf("deadaddr: bind: %w", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		_ = syscall.Close(fd)
		return "", nil, fmt.Errorf("deadaddr: getsockname: %w", err)
	}
	in4, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		_ = syscall.Close(fd)
		return "", nil, fmt.Errorf("deadaddr: unexpected socket address %T", sa)
	}
	return fmt.Sprintf("127.0.0.1:%d", in4.Port), func() { _ = syscall.Close(fd) }, nil
}
