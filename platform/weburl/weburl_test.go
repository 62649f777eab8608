package weburl_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/weburl"
)

func TestSecure(t *testing.T) {
	cases := []struct {
		url  string
		want bool
	}{
		{"https://kb.example.com/mcp", true},
		{"https://10.0.0.5:8443/mcp", true},
		{"http://127.0.0.1:8090/mcp", true},
		{"http://127.8.9.10/mcp", true},
		{"http://localhost:8090/mcp", true},
		{"http://[::1]:8090/mcp", true},
		{"http://kb.example.com/mcp", false},
		{"http://10.0.0.5:8090/mcp", false},
		{"http://localhost.example.com/mcp", false},
		{"http://127.0.0.1.nip.io/mcp", false},
		{"http://0.0.0.0:8090/mcp", false},
		{"https://user:pass@kb.example.com/mcp", false},
		{"ftp://kb.example.com/mcp", false},
		{"https:///mcp", false},
		{"kb.example.com/mcp", false},
		{"", false},
		{"https://kb.example.com/%zz", false},
	}
	for _, tc := range cases {
		t.Run(tc.url, func(t *testing.T) {
			require.Equal(t, tc.want, weburl.Secure(tc.url))
		})
	}
}
