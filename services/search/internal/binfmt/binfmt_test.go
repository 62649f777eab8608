package binfmt

import (
	"bytes"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

// Values written come back in order whatever the source's read sizes,
// across many refills of the reader's buffer.
func TestRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	const n = 200_000
	for i := 0; i < n; i++ {
		w.Uvarint(uint64(i) * 977)
		w.Varint(-int64(i) * 31)
	}
	w.Uvarint(math.MaxUint64)
	w.Varint(math.MinInt64)
	w.String("héllo")
	w.String(strings.Repeat("x", 300_000))
	w.Raw([]byte("END"))
	require.NoError(t, w.Flush())
	data := buf.Bytes()

	sources := map[string]func() io.Reader{
		"whole":       func() io.Reader { return bytes.NewReader(data) },
		"one byte":    func() io.Reader { return iotest.OneByteReader(bytes.NewReader(data)) },
		"half buffer": func() io.Reader { return iotest.HalfReader(bytes.NewReader(data)) },
	}
	for name, src := range sources {
		t.Run(name, func(t *testing.T) {
			r := NewReader(src())
			for i := 0; i < n; i++ {
				require.Equal(t, uint64(i)*977, r.Uvarint())
				require.Equal(t, -int64(i)*31, r.Varint())
			}
			require.Equal(t, uint64(math.MaxUint64), r.Uvarint())
			require.Equal(t, int64(math.MinInt64), r.Varint())
			require.Equal(t, "héllo", r.String())
			require.Len(t, r.String(), 300_000)
			end := make([]byte, 3)
			r.Raw(end)
			require.Equal(t, "END", string(end))
			require.Zero(t, r.Rest())
			require.NoError(t, r.Err())
		})
	}
}

func TestDamage(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		read func(r *Reader)
	}{
		{"empty", nil, func(r *Reader) { r.Uvarint() }},
		{"varint cut", []byte{0x80, 0x80}, func(r *Reader) { r.Uvarint() }},
		{"varint over 64 bits", bytes.Repeat([]byte{0xff}, 11), func(r *Reader) { r.Uvarint() }},
		{"string cut", []byte{5, 'a', 'b'}, func(r *Reader) { _ = r.String() }},
		{"string too long", []byte{0xff, 0xff, 0xff, 0x7f}, func(r *Reader) { _ = r.String() }},
		{"count over its limit", []byte{11}, func(r *Reader) { r.Count("things", 10) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReader(bytes.NewReader(tc.data))
			tc.read(r)
			require.True(t, errors.Is(r.Err(), ErrCorrupt), "%v", r.Err())
			require.Zero(t, r.Uvarint(), "reads after an error give zero")
		})
	}
	r := NewReader(bytes.NewReader([]byte{1, 2, 3}))
	r.Uvarint()
	require.Equal(t, int64(2), r.Rest(), "bytes left over are counted")
}
