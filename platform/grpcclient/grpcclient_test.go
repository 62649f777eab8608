package grpcclient

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// A URL or nothing where HOST:PORT belongs is refused before dialing, with
// ErrBadAddress, instead of failing later as an unreachable service.
func TestDialRefusesAnAddressThatIsNotHostPort(t *testing.T) {
	for _, tc := range []struct {
		addr string
		bad  bool
	}{
		{"127.0.0.1:50051", false},
		{"search.bmcis.svc:50051", false},
		{"dns:///search.bmcis.svc:50051", false},
		{"unix:///run/bmcis/search.sock", false},
		{"", true},
		{"   ", true},
		{"http://127.0.0.1:50051", true},
		{"https://kb.example.com/", true},
		{"HTTPS://kb.example.com:443", true},
	} {
		conn, err := Dial(tc.addr, "")
		if !tc.bad {
			require.NoError(t, err, tc.addr)
			require.NoError(t, conn.Close())
			continue
		}
		require.Error(t, err, tc.addr)
		require.True(t, errors.Is(err, ErrBadAddress), "%q: %v", tc.addr, err)
		require.Contains(t, err.Error(), "HOST:PORT")
	}
}
