package server

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// After failures in a row a source waits one minute, doubling, never longer
// than its schedule nor maxBackoff.
func TestSourceBackoff(t *testing.T) {
	day := 24 * time.Hour
	require.Equal(t, time.Minute, backoff(1, day))
	require.Equal(t, 2*time.Minute, backoff(2, day))
	require.Equal(t, 16*time.Minute, backoff(5, day))
	require.Equal(t, maxBackoff, backoff(20, day))
	require.Equal(t, maxBackoff, backoff(1000, day))
	require.Equal(t, 15*time.Minute, backoff(5, 15*time.Minute), "never later than the next scheduled run")
}
