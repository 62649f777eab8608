package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/stacktest"
)

// bundlePlatforms maps GOOS/GOARCH to the MCPB platform whose server the
// manifest names for it (darwin is one universal binary).
var bundlePlatforms = map[string]string{
	"linux/amd64":   "linux",
	"darwin/arm64":  "darwin",
	"darwin/amd64":  "darwin",
	"windows/amd64": "win32",
}

// The Claude Desktop extension bundle end to end: deploy/mcpb/build.sh
// (what `make mcpb` runs) builds it for this platform, validates and packs
// it with the official MCPB CLI; the CLI unpacks it; the official MCPB
// library (getMcpConfigForManifest, what Desktop uses) turns its
// mcp_config into the command and environment to start, with the user
// configuration a user would type; the Node MCP SDK client starts exactly
// that and calls every tool (node/e2e.mjs) against an adapter serving
// streamable HTTP over the real services.
func TestDesktopBundle(t *testing.T) {
	node, npm := nodeTools(t)
	platform, ok := bundlePlatforms[runtime.GOOS+"/"+runtime.GOARCH]
	if !ok {
		t.Skipf("the bundle has no server for %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	s := demo(t)
	k := key(t)
	base := adapterHTTP(t, s, nil)
	root := stacktest.RepoRoot(t)
	mcpbDir := filepath.Join(root, "deploy", "mcpb")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	work := t.TempDir()
	bundle := filepath.Join(work, "bmcis-knowledge.mcpb")
	start := time.Now()
	build := exec.CommandContext(ctx, filepath.Join(mcpbDir, "build.sh"))
	build.Env = signingEnv("MCPB_OUT="+bundle, "MCPB_PLATFORMS="+platform)
	// Signed as a company would sign it, when OpenSSL is at hand to check
	// (deploy/local/install-deps.sh installs it).
	var sig signer
	_, noOpenSSL := exec.LookPath("openssl")
	if noOpenSSL == nil {
		sig = newSigner(t, t.TempDir())
		build.Env = append(build.Env, "MCPB_SIGN_CERT="+sig.cert, "MCPB_SIGN_KEY="+sig.key, "MCPB_SIGN_CHAIN="+sig.chain)
	} else {
		t.Log("openssl not installed: the bundle is built unsigned and its signature not checked")
	}
	out, err := build.CombinedOutput()
	require.NoError(t, err, "build.sh:\n%s", out)
	t.Logf("bundle for %s built, validated and packed in %s", platform, time.Since(start).Round(time.Millisecond))
	if noOpenSSL == nil {
		publisher, err := verifyBundleSignature(t, bundle, sig.root)
		require.NoError(t, err, "the signature verifies up to the company's root, both intermediates embedded")
		require.Equal(t, "BMCIS test publisher", publisher)
		_, err = verifyBundleSignature(t, bundle, newSigner(t, t.TempDir()).root)
		require.Error(t, err, "and up to no other root")
		tampered := filepath.Join(work, "tampered.mcpb")
		b, err := os.ReadFile(bundle)
		require.NoError(t, err)
		b[len(b)/3] ^= 0xff
		require.NoError(t, os.WriteFile(tampered, b, 0o600))
		_, err = verifyBundleSignature(t, tampered, sig.root)
		require.Error(t, err, "a changed byte breaks it")
	}

	unpacked := filepath.Join(work, "unpacked")
	unpack := exec.CommandContext(ctx, filepath.Join(mcpbDir, "node_modules", ".bin", "mcpb"), "unpack", bundle, unpacked)
	out, err = unpack.CombinedOutput()
	require.NoError(t, err, "mcpb unpack:\n%s", out)

	// The manifest asks for the URL and the key, the key as a secret, and
	// lists the tools the server has.
	var manifest struct {
		ManifestVersion string `json:"manifest_version"`
		Tools           []struct {
			Name string `json:"name"`
		} `json:"tools"`
		UserConfig map[string]struct {
			Sensitive bool `json:"sensitive"`
			Required  bool `json:"required"`
		} `json:"user_config"`
	}
	raw, err := os.ReadFile(filepath.Join(unpacked, "manifest.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &manifest))
	require.Equal(t, "0.3", manifest.ManifestVersion)
	require.True(t, manifest.UserConfig["api_key"].Sensitive)
	require.True(t, manifest.UserConfig["api_key"].Required)
	require.True(t, manifest.UserConfig["server_url"].Required)
	listed, err := httpClient(t, base, map[string]string{"X-API-Key": k}).ListTools(ctx, mcp.ListToolsRequest{})
	require.NoError(t, err)
	var want, got []string
	for _, tool := range listed.Tools {
		want = append(want, tool.Name)
	}
	for _, tool := range manifest.Tools {
		got = append(got, tool.Name)
	}
	sort.Strings(want)
	sort.Strings(got)
	require.Equal(t, want, got, "the manifest lists exactly the server's tools")

	// No internal secret travels in the bundle.
	require.NoError(t, filepath.WalkDir(unpacked, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for name, secret := range map[string]string{"service": stacktest.ServiceToken, "adapter": stacktest.AdapterToken, "ingest": stacktest.IngestToken, "admin": stacktest.AdminToken} {
			require.False(t, bytes.Contains(b, []byte(secret)), "%s holds the %s credential", path, name)
		}
		return nil
	}))

	// The configuration Desktop would start, resolved by the MCPB library.
	resolve := exec.CommandContext(ctx, node, "resolve-config.mjs", unpacked)
	resolve.Dir = mcpbDir
	userConfig, err := json.Marshal(map[string]string{"server_url": base + "/mcp", "api_key": k})
	require.NoError(t, err)
	resolve.Env = append(os.Environ(), "MCPB_USER_CONFIG="+string(userConfig))
	var stderr bytes.Buffer
	resolve.Stderr = &stderr
	config, err := resolve.Output()
	require.NoError(t, err, "resolve-config.mjs: %s", stderr.String())
	srv := desktopServer(t, config)
	require.True(t, strings.HasPrefix(srv.Command, unpacked+string(os.PathSeparator)+filepath.Join("server", platform)), srv.Command)
	require.Equal(t, map[string]string{"BMCIS_MCP_URL": base + "/mcp", "BMCIS_API_KEY": k}, srv.Env,
		"bridge mode: the endpoint and the user's own key, nothing else")

	out = runNodeE2E(ctx, t, node, nodeClientDir(t, npm), config)
	require.NotContains(t, string(out), k, "the key never reaches the output")
}
