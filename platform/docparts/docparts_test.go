package docparts

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSend(t *testing.T) {
	for _, tc := range []struct {
		name  string
		size  int
		parts int
		total int64
	}{
		{"empty", 0, 1, 0},
		{"one part", PartBytes, 1, 0},
		{"two parts", PartBytes + 1, 2, PartBytes + 1},
		{"five parts", 4*PartBytes + 7, 5, 4*PartBytes + 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			content := bytes.Repeat([]byte{'x'}, tc.size)
			var got []byte
			msgs := 0
			require.NoError(t, Send(content, func(head []byte, total int64) error {
				msgs++
				require.Equal(t, tc.total, total)
				got = append(got, head...)
				return nil
			}, func(part []byte) error {
				msgs++
				require.LessOrEqual(t, len(part), PartBytes)
				got = append(got, part...)
				return nil
			}))
			require.Equal(t, tc.parts, msgs)
			require.True(t, bytes.Equal(content, got))
		})
	}
	t.Run("stops at the first error", func(t *testing.T) {
		stop := errors.New("stop")
		calls := 0
		err := Send(make([]byte, 3*PartBytes), func([]byte, int64) error { return nil },
			func([]byte) error { calls++; return stop })
		require.ErrorIs(t, err, stop)
		require.Equal(t, 1, calls)
	})
}
