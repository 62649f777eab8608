package deadaddr_test

import (
	"errors"
	"net"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/deadaddr"
)

func TestLoopbackRefusesAndCannotBeTaken(t *testing.T) {
	addr := deadaddr.Loopback(t)
	_, err := net.Dial("tcp", addr)
	require.True(t, errors.Is(err, syscall.ECONNREFUSED), "dial %s: %v", addr, err)
	l, err := net.Listen("tcp", addr)
	if err == nil {
		_ = l.Close()
	}
	require.Error(t, err, "another listener took the held port %s", addr)
}
