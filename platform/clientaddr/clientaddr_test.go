package clientaddr_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/clientaddr"
	"github.com/bmcis/knowledge/platform/config"
)

func TestClient(t *testing.T) {
	many := make([]string, 40)
	for i := range many {
		many[i] = "10.0.0.9"
	}
	tests := []struct {
		name    string
		trusted []string
		peer    string
		xff     []string // one element per header line
		headers map[string]string
		want    string
	}{
		{name: "empty setting ignores the header", peer: "10.0.0.1:4000", xff: []string{"203.0.113.7"}, want: "10.0.0.1"},
		{name: "empty setting keeps the peer as the server reports it", peer: "[::ffff:10.0.0.1]:4000", xff: []string{"203.0.113.7"}, want: "::ffff:10.0.0.1"},
		{name: "untrusted peer ignores the header", trusted: []string{"10.0.0.0/8"}, peer: "198.51.100.2:4000", xff: []string{"203.0.113.7"}, want: "198.51.100.2"},
		{name: "trusted peer, one hop", trusted: []string{"10.0.0.0/8"}, peer: "10.0.0.1:4000", xff: []string{"203.0.113.7"}, want: "203.0.113.7"},
		{name: "single IP entry", trusted: []string{"10.0.0.1"}, peer: "10.0.0.1:4000", xff: []string{"203.0.113.7"}, want: "203.0.113.7"},
		{name: "single IP entry trusts no neighbour", trusted: []string{"10.0.0.1"}, peer: "10.0.0.2:4000", xff: []string{"203.0.113.7"}, want: "10.0.0.2"},
		{name: "spoofed left entries ignored", trusted: []string{"10.0.0.0/8"}, peer: "10.0.0.1:4000", xff: []string{"1.2.3.4, 5.6.7.8, 203.0.113.7"}, want: "203.0.113.7"},
		{name: "chain of trusted proxies skipped", trusted: []string{"10.0.0.0/8"}, peer: "10.0.0.1:4000", xff: []string{"1.2.3.4, 203.0.113.7, 10.0.0.3, 10.0.0.2"}, want: "203.0.113.7"},
		{name: "chain across header lines", trusted: []string{"10.0.0.0/8"}, peer: "10.0.0.1:4000", xff: []string{"1.2.3.4", "203.0.113.7, 10.0.0.3", "10.0.0.2"}, want: "203.0.113.7"},
		{name: "every hop trusted: the leftmost", trusted: []string{"10.0.0.0/8"}, peer: "10.0.0.1:4000", xff: []string{"10.0.0.7, 10.0.0.3"}, want: "10.0.0.7"},
		{name: "header absent: the peer", trusted: []string{"10.0.0.0/8"}, peer: "10.0.0.1:4000", want: "10.0.0.1"},
		{name: "empty header: the peer", trusted: []string{"10.0.0.0/8"}, peer: "10.0.0.1:4000", xff: []string{""}, want: "10.0.0.1"},
		{name: "garbage: the peer", trusted: []string{"10.0.0.0/8"}, peer: "10.0.0.1:4000", xff: []string{"unknown"}, want: "10.0.0.1"},
		{name: "garbage left of the client is not reached", trusted: []string{"10.0.0.0/8"}, peer: "10.0.0.1:4000", xff: []string{"<script>, 203.0.113.7"}, want: "203.0.113.7"},
		{name: "garbage ends the walk at the last trusted hop", trusted: []string{"10.0.0.0/8"}, peer: "10.0.0.1:4000", xff: []string{"203.0.113.7, not-an-ip, 10.0.0.3"}, want: "10.0.0.3"},
		{name: "ports stripped", trusted: []string{"10.0.0.0/8"}, peer: "10.0.0.1:4000", xff: []string{"203.0.113.7:5150, 10.0.0.3:80"}, want: "203.0.113.7"},
		{name: "IPv4-mapped IPv6 normalised", trusted: []string{"10.0.0.0/8"}, peer: "10.0.0.1:4000", xff: []string{"::ffff:203.0.113.7, ::ffff:10.0.0.3"}, want: "203.0.113.7"},
		{name: "untrusted IPv4-mapped peer normalised", trusted: []string{"10.0.0.0/8"}, peer: "[::ffff:198.51.100.2]:4000", xff: []string{"203.0.113.7"}, want: "198.51.100.2"},
		{name: "IPv4-mapped peer trusted as IPv4", trusted: []string{"10.0.0.0/8"}, peer: "[::ffff:10.0.0.1]:4000", xff: []string{"203.0.113.7"}, want: "203.0.113.7"},
		{name: "IPv6 peer and client", trusted: []string{"fd00::/8"}, peer: "[fd00::1]:4000", xff: []string{"2001:db8::7, fd00::3"}, want: "2001:db8::7"},
		{name: "IPv6 with brackets and port", trusted: []string{"fd00::/8"}, peer: "[fd00::1]:4000", xff: []string{"[2001:db8::7]:443"}, want: "2001:db8::7"},
		{name: "IPv6 in brackets", trusted: []string{"fd00::/8"}, peer: "[fd00::1]:4000", xff: []string{"[2001:db8::7]"}, want: "2001:db8::7"},
		{name: "IPv6 zone dropped", trusted: []string{"fd00::/8"}, peer: "[fd00::1]:4000", xff: []string{"fe80::7%eth0"}, want: "fe80::7"},
		{name: "only X-Forwarded-For is read", trusted: []string{"10.0.0.0/8"}, peer: "10.0.0.1:4000",
			headers: map[string]string{"X-Real-IP": "203.0.113.7", "Forwarded": "for=203.0.113.8"}, want: "10.0.0.1"},
		{name: "at most MaxHops read", trusted: []string{"10.0.0.0/8"}, peer: "10.0.0.1:4000",
			xff: []string{"203.0.113.7, " + strings.Join(many, ", ")}, want: "10.0.0.9"},
		{name: "peer without a port", trusted: []string{"10.0.0.0/8"}, peer: "10.0.0.1", xff: []string{"203.0.113.7"}, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := clientaddr.Parse(tt.trusted)
			require.NoError(t, err)
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = tt.peer
			for _, line := range tt.xff {
				r.Header.Add("X-Forwarded-For", line)
			}
			for k, v := range tt.headers {
				r.Header.Set(k, v)
			}
			require.Equal(t, tt.want, p.Client(r))

			// Handler hands Of the same answer; without it Of reads the connection.
			var got string
			p.Handler(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got = clientaddr.Of(r) })).
				ServeHTTP(httptest.NewRecorder(), r)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		entries []string
		trusts  []string
		refuses []string
		err     string
	}{
		{name: "none", trusts: nil, refuses: []string{"10.0.0.1"}},
		{name: "CIDR and IPs", entries: []string{"10.0.0.0/8", " 192.0.2.1 ", "fd00::/8"},
			trusts: []string{"10.255.0.1", "192.0.2.1", "fd00::9"}, refuses: []string{"11.0.0.1", "192.0.2.2", "fe00::1"}},
		{name: "host bits masked", entries: []string{"10.1.2.3/16"}, trusts: []string{"10.1.200.1"}, refuses: []string{"10.2.0.1"}},
		{name: "IPv4-mapped entries read as IPv4", entries: []string{"::ffff:10.0.0.0/104", "::ffff:192.0.2.1"},
			trusts: []string{"10.3.0.1", "192.0.2.1"}, refuses: []string{"11.0.0.1"}},
		{name: "not an IP", entries: []string{"10.0.0.0/8", "proxy.internal"}, err: `"proxy.internal" is not a CIDR`},
		{name: "bad prefix length", entries: []string{"10.0.0.0/33"}, err: `"10.0.0.0/33" is not a CIDR`},
		{name: "zone", entries: []string{"fe80::1%eth0"}, err: `"fe80::1%eth0" is not a CIDR`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := clientaddr.Parse(tt.entries)
			if tt.err != "" {
				require.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			// A trusted peer's header is read, an untrusted one's is not.
			client := func(peer string) string {
				r := httptest.NewRequest(http.MethodGet, "/", nil)
				r.RemoteAddr = "[" + peer + "]:1"
				r.Header.Set("X-Forwarded-For", "203.0.113.7")
				return p.Client(r)
			}
			for _, a := range tt.trusts {
				require.Equal(t, "203.0.113.7", client(a), a)
			}
			for _, a := range tt.refuses {
				require.Equal(t, a, client(a), a)
			}
		})
	}
}

func TestLoadNamesTheVariable(t *testing.T) {
	env := config.FromMap(map[string]string{clientaddr.EnvTrustedProxies: "10.0.0.0/8,nope"})
	p := clientaddr.Load(env)
	require.Zero(t, p.Len())
	require.ErrorContains(t, env.Err(), clientaddr.EnvTrustedProxies+`: "nope" is not a CIDR`)

	env = config.FromMap(map[string]string{clientaddr.EnvTrustedProxies: " 10.0.0.0/8, ,::1 "})
	p = clientaddr.Load(env)
	require.NoError(t, env.Err())
	require.Equal(t, 2, p.Len())

	env = config.FromMap(nil)
	require.Zero(t, clientaddr.Load(env).Len())
	require.NoError(t, env.Err())
}
