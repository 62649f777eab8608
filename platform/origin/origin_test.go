package origin_test

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/origin"
)

func TestAllows(t *testing.T) {
	p := origin.New("127.0.0.1:8090", "https://App.example.com/")
	cases := []struct {
		origin string
		want   bool
	}{
		{"", true},
		{"https://app.example.com", true},
		{"http://localhost:8090", true},
		{"http://127.0.0.1:8090", true},
		{"http://[::1]:8090", true},
		{"http://localhost:8091", false},
		{"https://evil.example.com", false},
		{"http://app.example.com", false},
		{"null", false},
	}
	for _, c := range cases {
		t.Run(c.origin, func(t *testing.T) {
			require.Equal(t, c.want, p.Allows(c.origin))
		})
	}
	require.True(t, origin.New(":8080", "*").Allows("https://anything.example"))
	require.False(t, origin.New("").Allows("http://localhost"), "no port, no own origins")
}

func TestValidate(t *testing.T) {
	require.NoError(t, origin.Validate([]string{"*", "https://a.example.com", "http://localhost:3000/"}))
	for _, bad := range []string{"a.example.com", "ftp://a.example.com", "https://a.example.com/path", "https://u@a.example.com"} {
		require.Error(t, origin.Validate([]string{bad}), bad)
	}
}

// A page served by the listener itself on a loopback address passes, at
// whatever port it really listens; the same request through another name
// (DNS rebinding: evil.example resolving to 127.0.0.1) does not.
func TestAllowsRequest(t *testing.T) {
	p := origin.New("127.0.0.1:0")
	cases := []struct {
		host, origin string
		want         bool
	}{
		{"127.0.0.1:43123", "", true},
		{"127.0.0.1:43123", "http://127.0.0.1:43123", true},
		{"localhost:43123", "http://localhost:43123", true},
		{"[::1]:43123", "http://[::1]:43123", true},
		{"127.0.0.1:43123", "http://127.0.0.1:9999", false},
		{"evil.example:43123", "http://evil.example:43123", false},
		{"127.0.0.1:43123", "http://evil.example:43123", false},
		{"127.0.0.1:43123", "null", false},
	}
	for _, c := range cases {
		t.Run(c.host+" "+c.origin, func(t *testing.T) {
			r := httptest.NewRequest("POST", "http://"+c.host+"/mcp", nil)
			if c.origin != "" {
				r.Header.Set("Origin", c.origin)
			}
			require.Equal(t, c.want, p.AllowsRequest(r))
		})
	}
}
