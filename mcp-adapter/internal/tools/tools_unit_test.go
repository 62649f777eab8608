package tools

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWellFormedKey(t *testing.T) {
	tests := []struct {
		key  string
		want bool
	}{
		{"bmcis_l5rpjostovdel7ay_zcbnwrzc6ajyise3ju6xpm33rgqjjgf4ijd5axjhbjaeib353fta", true},
		{"bmcis_abcdefgh_abcdefghijklmnop", true},
		{"", false},
		{"sk-live-123", false},
		{"bmcis_short_abcdefghijklmnop", false},
		{"bmcis_abcdefgh_short", false},
		{"bmcis_ABCDEFGH_abcdefghijklmnop", false},
		{"bmcis_abcdefgh", false},
		{"bmcis_abcdefgh_abcdefghijklmnop; DROP", false},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, wellFormedKey(tc.key), tc.key)
	}
}
