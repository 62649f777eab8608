package docid

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want error
	}{
		{"handbook:policies/leave.md", nil},
		{"doc-1", nil},
		{"ünïcode/文書.md", nil},
		{strings.Repeat("a", MaxBytes), nil},
		{"", ErrEmpty},
		{strings.Repeat("a", MaxBytes+1), ErrTooLong},
		{"doc\xff", ErrUTF8},
		{"doc\n1", ErrControl},
		{"doc\x00", ErrControl},
		{"doc\u0085", ErrControl},
	} {
		require.Equal(t, tc.want, Check(tc.id), "%q", tc.id)
	}
}
