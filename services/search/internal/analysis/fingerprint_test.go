package analysis

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The fingerprint is stable for equal analysis and differs whenever the
// terms a chunk is indexed under could differ.
func TestFingerprint(t *testing.T) {
	base := Fingerprint(NewEnglish())
	require.Len(t, base, 32)
	require.Equal(t, base, Fingerprint(New(Options{})), "same options, same fingerprint")
	tests := []struct {
		name string
		opts Options
	}{
		{"other stop list", Options{Stop: StopSnowball}},
		{"no stop words", Options{Stop: StopNone}},
		{"no stemming", Options{NoStem: true}},
		{"hyphen joining", Options{JoinHyphenated: true}},
		{"minimum length", Options{MinLength: 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.NotEqual(t, base, Fingerprint(New(tc.opts)))
		})
	}
}
