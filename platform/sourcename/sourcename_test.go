package sourcename

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestValid(t *testing.T) {
	for _, ok := range []string{"handbook", "h", "0day", "wiki.v2", "team_a-docs", strings.Repeat("a", 64)} {
		require.True(t, Valid(ok), ok)
	}
	for _, bad := range []string{"", "Handbook", "-wiki", ".hidden", "a b", "a/b", strings.Repeat("a", 65), "wiki\n"} {
		require.False(t, Valid(bad), "%q", bad)
	}
}
