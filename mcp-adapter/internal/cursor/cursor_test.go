package cursor_test

import (
	"encoding/base64"
	"encoding/json"
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
	want := cursor.Cursor{QueryHash: h, Offset: 20, ResponseMode: "metadata", PageSize: 10}
	s := k.Encode(want)
	payload, _, ok := strings.Cut(s, ".")
	require.True(t, ok)
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	require.NoError(t, err)
	var fields map[string]any
	require.NoError(t, json.Unmarshal(raw, &fields))
	require.ElementsMatch(t, []string{"query_hash", "offset", "response_mode", "page_size"}, keys(fields), "the payload is the documented JSON")

	got, err := k.Decode(s, h)
	require.NoError(t, err)
	require.Equal(t, want, got)
	// another replica with the same secret accepts it
	got, err = codec(t, "secret-one-0123456789").Decode(s, h)
	require.NoError(t, err)
	require.Equal(t, want, got)
	// surrounding white space in the query does not matter
	require.Equal(t, h, cursor.QueryHash("  cloud providers \n"))
}

func TestRefused(t *testing.T) {
	k := codec(t, "secret-one-0123456789")
	h := cursor.QueryHash("q")
	good := k.Encode(cursor.Cursor{QueryHash: h, Offset: 10, ResponseMode: "metadata", PageSize: 10})
	payload, tag, _ := strings.Cut(good, ".")
	forged := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b) + "." + tag
	}
	cases := []struct {
		name  string
		s     string
		query string
		want  cursor.Problem
	}{
		{"empty", "", "q", cursor.Malformed},
		{"no tag", payload, "q", cursor.Malformed},
		{"not base64", "!!!." + tag, "q", cursor.Malformed},
		{"short tag", payload + ".AAAA", "q", cursor.Malformed},
		{"two dots", good + ".x", "q", cursor.Malformed},
		{"offset changed", forged(map[string]any{"query_hash": h, "offset": 1000, "response_mode": "metadata", "page_size": 10}), "q", cursor.Tampered},
		{"other secret", codec(t, "secret-two-0123456789").Encode(cursor.Cursor{QueryHash: h, Offset: 10, ResponseMode: "metadata", PageSize: 10}), "q", cursor.Tampered},
		{"other query", good, "another query", cursor.OtherQuery},
		{"case matters", k.Encode(cursor.Cursor{QueryHash: cursor.QueryHash("Q"), Offset: 1, PageSize: 1}), "q", cursor.OtherQuery},
		{"negative offset", k.Encode(cursor.Cursor{QueryHash: h, Offset: -1, PageSize: 10}), "q", cursor.Malformed},
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

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
