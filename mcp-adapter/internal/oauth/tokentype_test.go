package oauth

import (
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/require"
)

// The JOSE typ an access token must carry (RFC 9068), and what
// AcceptUntypedTokens lets through for providers that do not set it.
func TestCheckType(t *testing.T) {
	jwt := func(header string) string {
		return base64.RawURLEncoding.EncodeToString([]byte(header)) + ".e30.sig"
	}
	for _, tc := range []struct {
		name, header    string
		strict, untyped bool // accepted without / with AcceptUntypedTokens
	}{
		{"at+jwt", `{"alg":"RS256","typ":"at+jwt"}`, true, true},
		{"media type with prefix and case", `{"alg":"RS256","typ":"Application/AT+JWT"}`, true, true},
		{"JWT", `{"alg":"RS256","typ":"JWT"}`, false, true},
		{"no typ", `{"alg":"RS256"}`, false, true},
		{"another type", `{"alg":"RS256","typ":"logout+jwt"}`, false, false},
		{"typ not a string", `{"alg":"RS256","typ":1}`, false, false},
		{"header not JSON", `at+jwt`, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.strict, checkType(jwt(tc.header), false) == nil, "strict")
			require.Equal(t, tc.untyped, checkType(jwt(tc.header), true) == nil, "untyped accepted")
		})
	}
	require.ErrorContains(t, checkType("no-dots", true), "not a JWT")
	require.ErrorContains(t, checkType(jwt(`{"typ":"JWT"}`), false), `typ "JWT" is not at+jwt`)
}
