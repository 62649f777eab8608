package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/stacktest"
)

// oidcProvider is e2e/oidc/provider.mjs running: a certified OpenID
// provider with two issuers, stopped when the test ends.
type oidcProvider struct {
	issuers struct{ Issuer, Other string }
	secret  string
	stdin   io.Writer
	// next returns the provider's next line for the test ("e2e: ...").
	next func() string
}

// startOIDC starts the provider with the Node.js it needs (pinned in its
// lock) and a fresh client secret.
func startOIDC(t *testing.T, ctx context.Context, npm string) *oidcProvider {
	t.Helper()
	dir := oidcProviderDir(t, npm)
	secretBytes := make([]byte, 24)
	_, _ = rand.Read(secretBytes)
	p := &oidcProvider{secret: hex.EncodeToString(secretBytes)}
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "node_modules", "node", "bin", "node"), "provider.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CLIENT_SECRET="+p.secret)
	var log stacktest.SyncBuffer
	cmd.Stderr = &log
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("--- oidc-provider log\n%s", log.String())
		}
	})
	p.stdin = stdin
	lines := bufio.NewScanner(stdout)
	p.next = func() string {
		t.Helper()
		for lines.Scan() {
			if rest, ok := strings.CutPrefix(lines.Text(), "e2e: "); ok {
				return rest
			}
		}
		t.Fatalf("provider.mjs stopped: %s", log.String())
		return ""
	}
	require.NoError(t, json.Unmarshal([]byte(p.next()), &p.issuers))
	return p
}

// token obtains an access token by the client-credentials grant with a
// resource indicator.
func (p *oidcProvider) token(t *testing.T, ctx context.Context, issuer, client, scope, resource string) string {
	t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}, "scope": {scope}, "resource": {resource}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, issuer+"/token", strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.SetBasicAuth(client, p.secret)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var body struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
	}
	raw, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	require.NoError(t, json.Unmarshal(raw, &body))
	require.Equal(t, "Bearer", body.TokenType)
	return body.AccessToken
}
