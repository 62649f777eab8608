package cursor_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/mcp-adapter/internal/cursor"
)

func codec(t *testing.T, secret string) *cursor.Codec {
	c, err := cursor.New([]byte(secret))
	require.NoError(t, err)
	return c
}

func TestRoundTrip(t *testing.T) {
	k := codec(t, "secret-one-0123456789")
	h := cursor.QueryHash("cloud providers")
	cases := []cursor.Cursor{
		{QueryHash: h, Offset: 20, ResponseMode: "metadata", PageSize: 10},
		{QueryHash: h, Offset: 10, ResponseMode: "ids_only", PageSize: 50},
		{QueryHash: h, Offset: 123456, ResponseMode: "full", PageSize: 1},
		{QueryHash: h, Offset: 0, ResponseMode: "", PageSize: 7},
	}
	for _, want := range cases {
		s := k.Encode(want)
		require.LessOrEqual(t, len(s), 40, "a cursor is short: %s", s)
		require.NotContains(t, s, "=")
		got, err := k.Decode(s, h)
		require.NoError(t, err)
		require.Equal(t, want, got)
		// another replica with the same secret accepts it
		got, err = codec(t, "secret-one-0123456789").Decode(s, h)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	// the usual cursor (offset and page size under 128) is 18 characters
	require.Len(t, k.Encode(cases[0]), 18)
	// surrounding white space in the query does not matter
	require.Equal(t, h, cursor.QueryHash("  cloud providers \n"))
}

func TestRefused(t *testing.T) {
	k := codec(t, "secret-one-0123456789")
	h := cursor.QueryHash("q")
	good := k.Encode(cursor.Cursor{QueryHash: h, Offset: 10, ResponseMode: "metadata", PageSize: 10})
	raw, err := base64.RawURLEncoding.DecodeString(good)
	require.NoError(t, err)
	flip := func(i int) string {
		b := append([]byte(nil), raw...)
		b[i] ^= 0x01
		return base64.RawURLEncoding.EncodeToString(b)
	}
	cases := []struct {
		name  string
		s     string
		query string
		want  cursor.Problem
	}{
		{"empty", "", "q", cursor.Malformed},
		{"not base64", "!!!!!!!!!!!!!!!!!!", "q", cursor.Malformed},
		{"too short", good[:10], "q", cursor.Malformed},
		{"offset changed", flip(3), "q", cursor.Tampered},
		{"mode changed", flip(0), "q", cursor.Tampered},
		{"tag changed", flip(len(raw) - 1), "q", cursor.Tampered},
		{"other secret", codec(t, "secret-two-0123456789").Encode(cursor.Cursor{QueryHash: h, Offset: 10, ResponseMode: "metadata", PageSize: 10}), "q", cursor.Tampered},
		{"other query", good, "another query", cursor.OtherQuery},
		{"case matters", k.Encode(cursor.Cursor{QueryHash: cursor.QueryHash("Q"), Offset: 1, PageSize: 1}), "q", cursor.OtherQuery},
		{"zero page size", k.Encode(cursor.Cursor{QueryHash: h, Offset: 1, PageSize: 0}), "q", cursor.Malformed},
		{"too long", strings.Repeat("a", 2000), "q", cursor.Malformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := k.Decode(tc.s, cursor.QueryHash(tc.query))
			require.Error(t, err)
			var ce *cursor.Error
			require.ErrorAs(t, err, &ce)
			require.Equal(t, tc.want, ce.Problem)
		})
	}
}

func TestEmptySecretRefused(t *testing.T) {
	_, err := cursor.New(nil)
	require.Error(t, err)
}
