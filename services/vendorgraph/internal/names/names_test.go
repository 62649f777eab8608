package names

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNormalize(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"Acme Corp", "acme corp"},
		{"  ACME,   Corp. ", "acme corp"},
		{"Acme-Corp", "acme corp"},
		{"AT&T", "at t"},
		{"Société Générale", "société générale"},
		{"!!!", ""},
		{"", ""},
		{"Ünïcode\tTabs\nLines", "ünïcode tabs lines"},
		{"3M", "3m"},
	} {
		require.Equal(t, tc.want, Normalize(tc.in), "Normalize(%q)", tc.in)
	}
}

func BenchmarkNormalize(b *testing.B) {
	for b.Loop() {
		_ = Normalize("  Acme Corporation, Inc. (Europe) ")
	}
}
