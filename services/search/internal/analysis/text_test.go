package analysis

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNormalizeQuery(t *testing.T) {
	for in, want := range map[string]string{
		"  Security   Reviews\t": "security reviews",
		"ＳＥＣＵＲＩＴＹ":               "security",
		"café":                   "café",
		"cafe\u0301":             "café",
		"multi\nline\r\n query ": "multi line query",
	} {
		require.Equal(t, want, NormalizeQuery(in), "%q", in)
	}
}

func TestIndexedText(t *testing.T) {
	require.Equal(t, "body", IndexedText("", "body"))
	require.Equal(t, "Guide > Setup\nbody", IndexedText("Guide > Setup", "body"))
}
