package main

import (
	"bytes"
	"context"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	"github.com/bmcis/knowledge/platform/grpcclient"
	"github.com/bmcis/knowledge/platform/ratelimit"
)

const (
	keysTestAdmin   = "keys-test-admin-token-0123456789"
	keysTestService = "keys-test-service-token-0123456789"
	keysTestKey     = "bmcis_abcdefghijklmnop_qrstuvwxyz234567abcdefghijklmnopqrstuvwxyz234567abcd"
)

// stubAuth records what the CLI sent and answers like the auth service.
type stubAuth struct {
	authv1.UnimplementedAuthServiceServer
	mu      sync.Mutex
	md      metadata.MD
	create  *authv1.CreateKeyRequest
	list    *authv1.ListKeysRequest
	revoke  *authv1.RevokeKeyRequest
	rotate  *authv1.RotateKeyRequest
	created time.Time
}

func (s *stubAuth) note(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.md, _ = metadata.FromIncomingContext(ctx)
}

func (s *stubAuth) key(id string) *authv1.ApiKey {
	return &authv1.ApiKey{KeyId: id, Name: "demo", Owner: "ops", CreatedAt: timestamppb.New(s.created),
		Limits: &authv1.RateLimits{Tiers: []*authv1.TierLimit{{Tier: "minute", Value: 5}}}}
}

func (s *stubAuth) CreateKey(ctx context.Context, req *authv1.CreateKeyRequest) (*authv1.CreateKeyResponse, error) {
	s.note(ctx)
	s.create = req
	switch req.GetName() {
	case "bad":
		return nil, status.Error(codes.InvalidArgument, "name: must not contain control characters")
	case "denied":
		return nil, status.Error(codes.PermissionDenied, "this credential may not create keys")
	}
	return &authv1.CreateKeyResponse{Key: s.key("abcdefghijklmnop"), ApiKey: keysTestKey}, nil
}

func (s *stubAuth) ListKeys(ctx context.Context, req *authv1.ListKeysRequest) (*authv1.ListKeysResponse, error) {
	s.note(ctx)
	s.list = req
	revoked := s.key("revokedrevokedre")
	revoked.RevokedAt = timestamppb.New(s.created)
	revoked.Scopes = &authv1.Scopes{Categories: []string{"security", "hr"}, Tools: []string{"semantic_search"}}
	revoked.Groups = []string{"hr", "legal"}
	return &authv1.ListKeysResponse{Keys: []*authv1.ApiKey{s.key("abcdefghijklmnop"), revoked}}, nil
}

func (s *stubAuth) RevokeKey(ctx context.Context, req *authv1.RevokeKeyRequest) (*authv1.RevokeKeyResponse, error) {
	s.note(ctx)
	s.revoke = req
	k := s.key(req.GetKeyId())
	k.RevokedAt = timestamppb.New(s.created)
	return &authv1.RevokeKeyResponse{Key: k}, nil
}

func (s *stubAuth) RotateKey(ctx context.Context, req *authv1.RotateKeyRequest) (*authv1.RotateKeyResponse, error) {
	s.note(ctx)
	s.rotate = req
	prev := s.key(req.GetKeyId())
	prev.ExpiresAt = timestamppb.New(s.created.Add(time.Hour))
	return &authv1.RotateKeyResponse{Key: s.key("newnewnewnewnewn"), ApiKey: keysTestKey, Previous: prev}, nil
}

func startStubAuth(t *testing.T) *stubAuth {
	t.Helper()
	s := &stubAuth{created: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	gs := grpc.NewServer()
	authv1.RegisterAuthServiceServer(gs, s)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	t.Setenv("BMCIS_AUTH_ADDR", lis.Addr().String())
	t.Setenv("BMCIS_ADMIN_TOKEN", keysTestAdmin)
	t.Setenv("BMCIS_SERVICE_TOKEN", keysTestService)
	return s
}

func keysRun(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), append([]string{"keys"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestKeysCreate(t *testing.T) {
	s := startStubAuth(t)
	code, out, errOut := keysRun("create", "--name", "demo", "--owner", "ops", "--limit-minute", "5",
		"--limit-hour", "50", "--limit-day", "500", "--expires-in", "90d")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, keysTestKey+"\n", out, "the key alone on stdout")
	require.NotContains(t, errOut, keysTestKey)
	require.Contains(t, errOut, "abcdefghijklmnop")
	require.Equal(t, "demo", s.create.GetName())
	require.Equal(t, "ops", s.create.GetOwner())
	require.Equal(t, []*authv1.TierLimit{{Tier: "minute", Value: 5}, {Tier: "hour", Value: 50}, {Tier: "day", Value: 500}},
		s.create.GetLimits().GetTiers())
	require.Equal(t, 90*24*time.Hour, s.create.GetExpiresIn().AsDuration())
	require.Equal(t, []string{keysTestAdmin}, s.md.Get(grpcclient.ServiceTokenHeader), "key commands present the admin credential, and only it")

	code, _, _ = keysRun("create", "--name", "demo")
	require.Equal(t, 0, code)
	require.Nil(t, s.create.GetExpiresIn(), "the service default unless asked")
	require.Nil(t, s.create.GetScopes(), "no scope unless asked")

	code, _, errOut = keysRun("create", "--name", "demo", "--categories", "security, hr,", "--tools", "semantic_search,get_chunks")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, []string{"security", "hr"}, s.create.GetScopes().GetCategories())
	require.Equal(t, []string{"semantic_search", "get_chunks"}, s.create.GetScopes().GetTools())
	require.Nil(t, s.create.GetGroups(), "no group unless asked")

	code, _, errOut = keysRun("create", "--name", "demo", "--groups", "Legal, hr,")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, []string{"hr", "legal"}, s.create.GetGroups(), "normalised by platform/access")
	code, _, errOut = keysRun("create", "--name", "demo", "--groups", "hr,no spaces")
	require.Equal(t, 2, code, "a bad group is a usage error, nothing is sent")
	require.Contains(t, errOut, "--groups")
}

func TestKeysList(t *testing.T) {
	s := startStubAuth(t)
	code, out, errOut := keysRun("list", "--owner", "ops", "--all")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "ops", s.list.GetOwner())
	require.True(t, s.list.GetIncludeInactive())
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3)
	require.Contains(t, lines[0], "KEY ID")
	require.Contains(t, lines[0], "SCOPES")
	require.Contains(t, lines[1], "5/default/default")
	require.Contains(t, lines[1], "active")
	require.True(t, strings.HasSuffix(lines[1], "all"), lines[1])
	require.Contains(t, lines[2], "revoked")
	require.Contains(t, lines[2], "categories=security,hr tools=semantic_search")
	require.Contains(t, lines[0], "GROUPS")
	require.Contains(t, lines[2], "hr,legal", "a key's groups are listed")

	code, out, _ = keysRun("list", "-q")
	require.Equal(t, 0, code)
	require.Equal(t, "abcdefghijklmnop\nrevokedrevokedre\n", out)
	require.False(t, s.list.GetIncludeInactive())
}

func TestKeysRevokeAndRotate(t *testing.T) {
	s := startStubAuth(t)
	code, out, errOut := keysRun("revoke", "abcdefghijklmnop")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "abcdefghijklmnop", s.revoke.GetKeyId())
	require.Contains(t, out, "revoked abcdefghijklmnop")

	code, out, errOut = keysRun("rotate", "abcdefghijklmnop", "--overlap", "1h", "--expires-in", "1d12h")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, keysTestKey+"\n", out)
	require.Equal(t, "abcdefghijklmnop", s.rotate.GetKeyId())
	require.Equal(t, time.Hour, s.rotate.GetOverlap().AsDuration())
	require.Equal(t, 36*time.Hour, s.rotate.GetExpiresIn().AsDuration())
	require.Contains(t, errOut, "works until 2026-03-01 13:00Z")

	code, _, _ = keysRun("rotate", "--overlap", "0", "abcdefghijklmnop")
	require.Equal(t, 0, code)
	require.NotNil(t, s.rotate.GetOverlap(), "an explicit zero overlap is sent")
	require.Zero(t, s.rotate.GetOverlap().AsDuration())
	code, _, _ = keysRun("rotate", "abcdefghijklmnop")
	require.Equal(t, 0, code)
	require.Nil(t, s.rotate.GetOverlap(), "unset: the service's default overlap")
}

func TestKeysErrors(t *testing.T) {
	startStubAuth(t)
	tests := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no subcommand", nil, 2, "give a subcommand"},
		{"unknown subcommand", []string{"burn"}, 2, `unknown keys subcommand "burn"`},
		{"create without name", []string{"create"}, 2, "--name is required"},
		{"bad expiry", []string{"create", "--name", "x", "--expires-in", "ninety days"}, 2, "--expires-in"},
		{"negative expiry", []string{"create", "--name", "x", "--expires-in", "-5h"}, 2, "--expires-in"},
		{"bad flag", []string{"create", "--nme", "x"}, 2, "unknown flag: --nme"},
		{"revoke without id", []string{"revoke"}, 2, "exactly one KEY_ID"},
		{"rotate two ids", []string{"rotate", "a", "b"}, 2, "exactly one KEY_ID"},
		// An empty scope list reads as "all" on the wire, so a flag given
		// with nothing in it (an unset shell variable) must not widen the key.
		{"empty categories", []string{"create", "--name", "x", "--categories", ""}, 2, "--categories: name at least one category"},
		{"blank categories", []string{"create", "--name", "x", "--categories", " , "}, 2, "--categories: name at least one category"},
		{"empty tools", []string{"create", "--name", "x", "--tools="}, 2, "--tools: name at least one tool"},
		{"server refuses", []string{"create", "--name", "bad"}, 1, "name: must not contain control characters (InvalidArgument)"},
		{"credential refused", []string{"create", "--name", "denied"}, exitRefused, "create key: this credential may not create keys (PermissionDenied)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := keysRun(tc.args...)
			require.Equal(t, tc.code, code)
			require.Empty(t, out)
			require.Contains(t, errOut, tc.msg)
		})
	}
	t.Run("no admin token", func(t *testing.T) {
		t.Setenv("BMCIS_ADMIN_TOKEN", "")
		code, _, errOut := keysRun("list")
		require.Equal(t, 2, code)
		require.Contains(t, errOut, "BMCIS_ADMIN_TOKEN is not set")
	})
}

func TestParseDays(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"90d", 90 * 24 * time.Hour, true},
		{"1d12h", 36 * time.Hour, true},
		{"0d", 0, true},
		{"36h", 36 * time.Hour, true},
		{"30m", 30 * time.Minute, true},
		{"0", 0, true},
		{"d", 0, false},
		{"1.5d", 0, false},
		{"90days", 0, false},
		{"-1d", 0, false},
		{"-1h", 0, false},
		{"", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseDays(tc.in)
			if !tc.ok {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// TestKeysFlagsFollowTheTierList adds a throwaway tier to the one tier list:
// create grows a --limit-week flag that sends it, and list a column part.
func TestKeysFlagsFollowTheTierList(t *testing.T) {
	saved := ratelimit.Tiers
	ratelimit.Tiers = append(append([]ratelimit.Tier(nil), saved...), ratelimit.Tier{Name: "week", Window: 7 * 24 * time.Hour, Default: 50_000})
	t.Cleanup(func() { ratelimit.Tiers = saved })
	s := startStubAuth(t)

	code, _, errOut := keysRun("create", "--name", "demo", "--limit-week", "700", "--limit-minute", "5")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, []*authv1.TierLimit{{Tier: "minute", Value: 5}, {Tier: "week", Value: 700}}, s.create.GetLimits().GetTiers())

	code, out, errOut := keysRun("list")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "LIMITS (MINUTE/HOUR/DAY/WEEK)")
	require.Contains(t, out, "5/default/default/default")

	_, _, errOut = keysRun("create", "--help")
	require.Contains(t, errOut, "-limit-week")
}

// `bmcisctl help keys` names every flag each keys subcommand takes (but the
// shared -o), read from the subcommand's own --help.
func TestKeysUsageNamesEveryFlag(t *testing.T) {
	code, out, errOut := ctlRun(t, "help", "keys")
	require.Equal(t, exitOK, code, errOut)
	usage := out + errOut
	flagName := regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z-]+) `)
	for _, sub := range []string{"create", "list", "revoke", "rotate"} {
		_, helpOut, helpErr := ctlRun(t, "keys", sub, "--help")
		help := helpOut + helpErr
		line := ""
		for l := range strings.Lines(usage) {
			if strings.Contains(l, "bmcisctl keys "+sub+" ") || (sub == "create" && line != "" && strings.HasPrefix(l, "       ")) {
				line += l
			}
		}
		require.NotEmpty(t, line, "help keys has no %s line:\n%s", sub, usage)
		for _, m := range flagName.FindAllStringSubmatch(help, -1) {
			if m[1] == "output" {
				continue
			}
			require.Regexp(t, `\[?-{1,2}`+m[1]+`\b`, line, "help keys leaves out %s --%s", sub, m[1])
		}
	}
}
