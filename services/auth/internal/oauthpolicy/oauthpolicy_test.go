package oauthpolicy

import (
	"testing"

	"github.com/stretchr/testify/require"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
)

func TestKey(t *testing.T) {
	const iss = "https://idp.example.com"
	p := New([]string{" " + iss + " ", ""})
	for _, tc := range []struct {
		name       string
		sub        *authv1.OAuthSubject
		refusal    string
		categories []string
	}{
		{"kb:read reads everything", &authv1.OAuthSubject{Issuer: iss, Subject: "alice", Scopes: []string{"openid", "kb:read"}}, "", nil},
		{"category scopes limit reads", &authv1.OAuthSubject{Issuer: iss, Subject: "bob", Scopes: []string{"kb:read:security"}}, "", []string{"security"}},
		{"no scope of ours", &authv1.OAuthSubject{Issuer: iss, Subject: "carol", Scopes: []string{"openid"}}, MsgNoScope, nil},
		{"untrusted issuer", &authv1.OAuthSubject{Issuer: "https://evil.example.com", Subject: "alice", Scopes: []string{"kb:read"}}, MsgUntrustedIssuer, nil},
		{"issuer compared exactly", &authv1.OAuthSubject{Issuer: iss + "/", Subject: "alice", Scopes: []string{"kb:read"}}, MsgUntrustedIssuer, nil},
		{"no subject", &authv1.OAuthSubject{Issuer: iss, Subject: " ", Scopes: []string{"kb:read"}}, MsgNoSubject, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, refusal := p.Key(tc.sub)
			require.Equal(t, tc.refusal, refusal)
			if refusal != "" {
				require.Nil(t, k)
				return
			}
			require.Equal(t, ID(iss, tc.sub.GetSubject()), k.ID)
			require.True(t, IsOAuth(k.ID))
			require.Equal(t, tc.categories, k.Scopes.Categories)
			require.Empty(t, k.Scopes.Tools)
			require.Empty(t, k.Limits)
		})
	}
	_, refusal := New(nil).Key(&authv1.OAuthSubject{Issuer: iss, Subject: "alice", Scopes: []string{"kb:read"}})
	require.Equal(t, MsgUntrustedIssuer, refusal, "no trusted issuer: every token refused")
	require.NotEqual(t, ID(iss, "alice"), ID("https://other", "alice"))
	require.Equal(t, ID(iss, "alice"), ID(iss, "alice"))
}

func TestGroupsAndUser(t *testing.T) {
	sub := &authv1.OAuthSubject{Issuer: "https://idp.example.com/", Subject: "Alice", Scopes: []string{"kb:read"},
		Groups: []string{"HR-Team", "legal", "Not A Name", "legal"}}
	k, refusal := New([]string{"https://idp.example.com/"}).Key(sub)
	require.Empty(t, refusal)
	require.Equal(t, "Alice", k.User, "the subject, case kept")
	require.Equal(t, []string{"hr-team", "legal"}, k.Groups, "without a map: the values that are group names, lowercased, once")

	mapped := New([]string{"https://idp.example.com/"}).WithGroupMap(map[string]string{"HR-Team": "hr"})
	k, _ = mapped.Key(sub)
	require.Equal(t, []string{"hr"}, k.Groups, "with a map: only mapped values count")
}
