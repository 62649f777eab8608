package stacktest_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/platform/rpcauth"
	"github.com/bmcis/knowledge/platform/stacktest"
	"github.com/bmcis/knowledge/platform/testdb"
)

func TestMain(m *testing.M) { stacktest.Main(m) }

// The shared stack comes up once, with the demo data, and serves every test
// that asks for it.
func demo(t testing.TB) *stacktest.Stack {
	return stacktest.Shared(t, "demo", stacktest.Options{}, func(t testing.TB, s *stacktest.Stack) {
		sum := s.IngestDemoDocs(t)
		if sum.Chunks == 0 && sum.Unchanged == 0 {
			t.Fatalf("no chunks written: %+v", sum)
		}
		s.ImportDemoGraph(t)
	})
}

func TestSharedStackServesTheDemoData(t *testing.T) {
	s := demo(t)
	if s2 := demo(t); s2 != s {
		t.Fatal("Shared must return the same stack")
	}
	for _, name := range stacktest.AllServices {
		svc := s.Service(name)
		if svc == nil || !svc.Running() || svc.Addr() == "" || svc.MetricsAddr() == "" {
			t.Fatalf("%s: not running with both addresses", name)
		}
		resp, err := http.Get(svc.MetricsURL())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s metrics: %s", name, resp.Status)
		}
	}
	if out := s.Ctl(t, "graph", "status", "-addr", s.Addr(stacktest.VendorGraph)); !strings.HasPrefix(out, "vendors 12,") {
		t.Fatalf("graph status: %q", out)
	}
	// Re-ingesting unchanged documents writes nothing.
	if sum := s.IngestDemoDocs(t); sum.Unchanged != stacktest.DemoDocuments || sum.Written != 0 {
		t.Fatalf("second ingest: %+v", sum)
	}
	out := s.Ctl(t, "search", "-addr", s.Addr(stacktest.Search), "incident response runbook")
	if !strings.Contains(out, "incident-response-runbook.md") {
		t.Fatalf("search output does not name the runbook:\n%s", out)
	}
}

func TestOwnStackKeysRestartAndDatabaseCut(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{Services: []string{stacktest.Auth}, NoRedis: true})
	key := s.CreateKey(t, stacktest.Key{Name: "t", PerMinute: 5})
	if !strings.HasPrefix(key, "bmcis_") || len(stacktest.KeyID(key)) == 0 {
		t.Fatalf("key %q", key)
	}
	if out := s.Ctl(t, "keys", "list", "-q"); !strings.Contains(out, stacktest.KeyID(key)) {
		t.Fatalf("keys list does not show the new key: %q", out)
	}
	auth := s.Service(stacktest.Auth)
	addr := auth.Addr()
	auth.Restart(t)
	if auth.Addr() != addr || !auth.Running() {
		t.Fatalf("restart moved auth from %s to %s", addr, auth.Addr())
	}
	s.RevokeKey(t, key)
	if out := s.Ctl(t, "keys", "list", "-q"); strings.Contains(out, stacktest.KeyID(key)) {
		t.Fatalf("a revoked key is listed as active: %q", out)
	}

	restore := s.CutDatabase(t)
	start := time.Now()
	if _, err := s.TryCtl("keys", "list", "-q"); err == nil {
		t.Fatal("listing keys must fail while the database is cut")
	}
	t.Logf("keys list failed after %s with the database cut", time.Since(start))
	restore()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := s.TryCtl("keys", "list", "-q"); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("auth did not recover after the database came back: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	auth.Stop(t)
	if auth.Running() {
		t.Fatal("auth still running after Stop")
	}
}

// The stack's credentials are published in this repository: every binary
// refuses them, and their digests, unless the development flag is set, which
// the stack's environments carry.
func TestStackCredentialsAreRefusedOutsideDevelopment(t *testing.T) {
	for _, tok := range []string{stacktest.ServiceToken, stacktest.AdapterToken, stacktest.IngestToken, stacktest.AdminToken} {
		for _, dev := range []string{"", "true"} {
			env := config.FromMap(map[string]string{"T": tok, "D": rpcauth.DigestOf(tok).String(), config.EnvAllowInsecureSecrets: dev})
			env.Secret("T", true, 16)
			env.SecretDigest("D")
			if dev != "" {
				require.NoError(t, env.Err())
				continue
			}
			require.ErrorContains(t, env.Err(), "T: is a published placeholder")
			require.ErrorContains(t, env.Err(), "D: is the digest of a published credential")
		}
	}
	require.Equal(t, "true", (&stacktest.Stack{}).ClientEnv()[config.EnvAllowInsecureSecrets])
}

// Auth shares no table with another service (docs/DATA-OWNERSHIP.md), so
// it runs on a database of its own: its keys land there, none in the
// database the other services use.
func TestAuthRunsOnADatabaseOfItsOwn(t *testing.T) {
	authPool, authDB := testdb.New(t)
	s := stacktest.Start(t, stacktest.Options{Services: []string{stacktest.Auth}, NoRedis: true,
		ServiceEnv: map[string]map[string]string{stacktest.Auth: {"DATABASE_URL": testdb.ServiceURL(t, authDB, stacktest.Auth)}}})
	key := s.CreateKey(t, stacktest.Key{Name: "own-database"})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var own int
	require.NoError(t, authPool.QueryRow(ctx, "SELECT count(*) FROM auth.api_keys WHERE key_id = $1", stacktest.KeyID(key)).Scan(&own))
	require.Equal(t, 1, own, "the key is in auth's own database")
	shared, err := pgx.Connect(ctx, s.DatabaseURL)
	require.NoError(t, err)
	defer shared.Close(context.Background())
	var elsewhere int
	require.NoError(t, shared.QueryRow(ctx, "SELECT count(*) FROM auth.api_keys").Scan(&elsewhere))
	require.Zero(t, elsewhere, "nothing of auth's in the other services' database")
}

func TestMCPReplyJSON(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"jsonrpc":"2.0","id":1}`, `{"jsonrpc":"2.0","id":1}`},
		{"event: message\ndata: {\"id\":2}\n\n", `{"id":2}`},
		{"data: {\"id\":3}", `{"id":3}`},
		{"HTTP error", "HTTP error"},
	} {
		if got := string(stacktest.MCPReplyJSON([]byte(tc.body))); got != tc.want {
			t.Errorf("MCPReplyJSON(%q) = %q, want %q", tc.body, got, tc.want)
		}
	}
}
