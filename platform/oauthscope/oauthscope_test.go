package oauthscope

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name   string
		claim  string
		expect Grant
	}{
		{"nothing granted", "", Grant{}},
		{"only foreign scopes", "openid profile kb:write", Grant{}},
		{"read everything", "openid kb:read", Grant{Any: true}},
		{"read wins over categories", "kb:read:security kb:read", Grant{Any: true}},
		{"categories, sorted, deduplicated, lower case", "kb:read:Security kb:read:cloud kb:read:security", Grant{Any: true, Categories: []string{"cloud", "security"}}},
		{"an empty category is no scope", "kb:read:", Grant{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.expect, Parse(Split(tc.claim)))
		})
	}
}
