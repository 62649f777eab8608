package server_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	"github.com/bmcis/knowledge/services/auth/internal/authtest"
	"github.com/bmcis/knowledge/services/auth/internal/oauthpolicy"
)

// Check on an access token's subject (verified by the adapter): trusted
// issuers only, scopes from the token, one rate-limit identity per subject
// with the service's default tiers, and an API key beside it unchanged.
func TestOAuthSubjects(t *testing.T) {
	const iss = "https://idp.example.com"
	cfg := testConfig(t, "memory", nil)
	cfg.OAuthIssuers = []string{iss}
	cfg.Defaults[0] = 3 // minute
	in := authtest.Start(t, cfg, authtest.NewDB(t))
	check := func(sub *authv1.OAuthSubject, tool string) *authv1.CheckResponse {
		t.Helper()
		resp, err := in.Client.Check(authtest.Adapter(context.Background()), &authv1.CheckRequest{Oauth: sub, Operation: tool, Tool: tool})
		require.NoError(t, err)
		return resp
	}
	alice := &authv1.OAuthSubject{Issuer: iss, Subject: "alice", Scopes: []string{"openid", "kb:read"}, ClientId: "claude"}
	bob := &authv1.OAuthSubject{Issuer: iss, Subject: "bob", Scopes: []string{"kb:read:security", "kb:read:hr"}}

	resp := check(alice, "semantic_search")
	require.True(t, resp.GetAllowed(), resp.GetMessage())
	require.Equal(t, oauthpolicy.ID(iss, "alice"), resp.GetPrincipal().GetKeyId())
	require.Equal(t, "alice", resp.GetPrincipal().GetName())
	require.Empty(t, resp.GetScopes().GetCategories(), "kb:read reads every category")
	require.Equal(t, int64(3), authtest.Tier(resp.GetLimits(), "minute"), "the service's default tiers")
	require.Equal(t, int64(2), authtest.Tier(resp.GetRemaining(), "minute"))

	resp = check(bob, "get_chunks")
	require.True(t, resp.GetAllowed())
	require.True(t, proto.Equal(&authv1.Scopes{Categories: []string{"hr", "security"}}, resp.GetScopes()), "%v", resp.GetScopes())
	require.Equal(t, int64(2), authtest.Tier(resp.GetRemaining(), "minute"), "bob has his own quota")

	// A new token for the same subject (another client, other scopes)
	// spends the same quota.
	again := &authv1.OAuthSubject{Issuer: iss, Subject: "alice", Scopes: []string{"kb:read"}, ClientId: "other"}
	require.Equal(t, int64(1), authtest.Tier(check(again, "find_vendor_info").GetRemaining(), "minute"))
	require.True(t, check(alice, "find_vendor_info").GetAllowed())
	resp = check(alice, "find_vendor_info")
	require.False(t, resp.GetAllowed())
	require.Equal(t, limited, resp.GetDenialReason())

	for _, tc := range []struct {
		name string
		sub  *authv1.OAuthSubject
		msg  string
	}{
		{"untrusted issuer", &authv1.OAuthSubject{Issuer: "https://other.example.com", Subject: "alice", Scopes: []string{"kb:read"}}, oauthpolicy.MsgUntrustedIssuer},
		{"no scope of ours", &authv1.OAuthSubject{Issuer: iss, Subject: "carol", Scopes: []string{"openid"}}, oauthpolicy.MsgNoScope},
		{"no subject", &authv1.OAuthSubject{Issuer: iss, Scopes: []string{"kb:read"}}, oauthpolicy.MsgNoSubject},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := check(tc.sub, "semantic_search")
			require.False(t, resp.GetAllowed())
			require.Equal(t, invalid, resp.GetDenialReason())
			require.Equal(t, tc.msg, resp.GetMessage())
			require.Nil(t, resp.GetPrincipal())
		})
	}

	// An API key in the same request wins: a token cannot borrow a key's
	// limits or a key a token's scopes.
	key, _ := in.CreateKey(t, &authv1.CreateKeyRequest{Name: "beside"})
	resp, err := in.Client.Check(authtest.Adapter(context.Background()), &authv1.CheckRequest{ApiKey: key, Oauth: bob, Operation: "x", Tool: "get_chunks"})
	require.NoError(t, err)
	require.True(t, resp.GetAllowed())
	require.Equal(t, "beside", resp.GetPrincipal().GetName())
	require.Empty(t, resp.GetScopes().GetCategories())
}

// Without trusted issuers (the default) every OAuth subject is refused.
func TestOAuthOffByDefault(t *testing.T) {
	in := authtest.Start(t, testConfig(t, "memory", nil), authtest.NewDB(t))
	resp, err := in.Client.Check(authtest.Adapter(context.Background()), &authv1.CheckRequest{Oauth: &authv1.OAuthSubject{
		Issuer: "https://idp.example.com", Subject: "alice", Scopes: []string{"kb:read"}}})
	require.NoError(t, err)
	require.False(t, resp.GetAllowed())
	require.Equal(t, invalid, resp.GetDenialReason())
}

// Only the adapter's credential may present an OAuth subject: any other
// caller allowed to call Check (the gateway's read credential) would
// otherwise read as any subject of a trusted issuer.
func TestOAuthSubjectOnlyFromTheAdapter(t *testing.T) {
	const iss = "https://idp.example.com"
	cfg := testConfig(t, "memory", nil)
	cfg.OAuthIssuers = []string{iss}
	in := authtest.Start(t, cfg, authtest.NewDB(t))
	key, _ := in.CreateKey(t, &authv1.CreateKeyRequest{Name: "gateway-user"})
	alice := &authv1.OAuthSubject{Issuer: iss, Subject: "alice", Scopes: []string{"kb:read"}}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		req  *authv1.CheckRequest
		code codes.Code
	}{
		{"the adapter presents a subject", authtest.Adapter(context.Background()), &authv1.CheckRequest{Oauth: alice, Tool: "get_chunks"}, codes.OK},
		{"the read credential presents a subject", context.Background(), &authv1.CheckRequest{Oauth: alice, Tool: "get_chunks"}, codes.PermissionDenied},
		{"the read credential, a subject beside a key", context.Background(), &authv1.CheckRequest{ApiKey: key, Oauth: alice, Tool: "get_chunks"}, codes.PermissionDenied},
		{"the read credential checks a key", context.Background(), &authv1.CheckRequest{ApiKey: key, Tool: "get_chunks"}, codes.OK},
		{"the adapter checks a key", authtest.Adapter(context.Background()), &authv1.CheckRequest{ApiKey: key, Tool: "get_chunks"}, codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := in.Client.Check(tc.ctx, tc.req)
			require.Equal(t, tc.code, status.Code(err), "%v", err)
			if tc.code == codes.OK {
				require.True(t, resp.GetAllowed(), resp.GetMessage())
			}
		})
	}
}
