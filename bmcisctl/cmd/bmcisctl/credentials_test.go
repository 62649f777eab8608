package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// writeCredentials writes a credentials file the way `make run` does.
func writeCredentials(t *testing.T, path string, values map[string]string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	b, err := json.Marshal(values)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o600))
}

func TestCredentialsFileStandsInForTheEnvironment(t *testing.T) {
	ctlServer(t)
	docs := t.TempDir()
	ctlWrite(t, docs, "security/a.md", "# Incident\n\nReport a suspected incident to the security desk at once.\n")

	// Only the file knows the address and the credentials.
	values := map[string]string{
		"BMCIS_SEARCH_ADDR":   os.Getenv("BMCIS_SEARCH_ADDR"),
		"BMCIS_SERVICE_TOKEN": ctlToken,
		"BMCIS_INGEST_TOKEN":  ctlIngestToken,
	}
	for _, k := range []string{"BMCIS_SEARCH_ADDR", "BMCIS_SERVICE_TOKEN", "BMCIS_INGEST_TOKEN"} {
		t.Setenv(k, "")
	}
	// Found the way kubectl finds its config: .data/bmcisctl.json in the
	// working directory or above it.
	checkout := t.TempDir()
	writeCredentials(t, filepath.Join(checkout, ".data", credentialsFileName), values)
	nested := filepath.Join(checkout, "services", "search")
	require.NoError(t, os.MkdirAll(nested, 0o755))
	t.Chdir(nested)
	t.Setenv(envCredentialsFile, "")

	code, out, errOut := ctlRun(t, "ingest", docs)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "1 ")
	code, out, errOut = ctlRun(t, "search", "-mode", "bm25", "suspected incident")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "security/a.md")

	// The environment overrides the file.
	t.Setenv("BMCIS_SERVICE_TOKEN", "not-the-read-credential-0123456789")
	code, _, errOut = ctlRun(t, "search", "-mode", "bm25", "suspected incident")
	require.NotEqual(t, 0, code)
	require.Contains(t, errOut, "invalid service credential")
}

func TestCredentialsFileProblemsAreNamed(t *testing.T) {
	t.Setenv("BMCIS_ADMIN_TOKEN", "")
	bad := filepath.Join(t.TempDir(), "bmcisctl.json")
	require.NoError(t, os.WriteFile(bad, []byte("not json"), 0o600))
	t.Setenv(envCredentialsFile, bad)
	_, err := credential(envAdminToken)
	require.ErrorContains(t, err, "BMCIS_ADMIN_TOKEN is not set")
	require.ErrorContains(t, err, "not a JSON object")

	t.Setenv(envCredentialsFile, filepath.Join(t.TempDir(), "missing.json"))
	_, err = credential(envAdminToken)
	require.ErrorContains(t, err, "missing.json")
}

// reindex is a call to the search service: the file's address and ingest
// credential are all it needs, no database URL.
func TestReindexReadsTheCredentialsFile(t *testing.T) {
	ctlServer(t)
	docs := t.TempDir()
	ctlWrite(t, docs, "security/a.md", "# Incident\n\nReport a suspected incident to the security desk at once.\n")
	ctlWrite(t, docs, "security/b.md", "# Phishing\n\nForward a phishing mail to the security desk, then delete it.\n")
	code, _, errOut := ctlRun(t, "ingest", docs)
	require.Equal(t, 0, code, errOut)

	addr := os.Getenv("BMCIS_SEARCH_ADDR")
	file := filepath.Join(t.TempDir(), credentialsFileName)
	writeCredentials(t, file, map[string]string{
		"BMCIS_SEARCH_ADDR":  addr,
		"BMCIS_INGEST_TOKEN": ctlIngestToken,
	})
	t.Setenv(envCredentialsFile, file)
	for _, k := range []string{"DATABASE_URL", "BMCIS_SEARCH_ADDR", "BMCIS_INGEST_TOKEN"} {
		t.Setenv(k, "")
	}
	code, out, errOut := ctlRun(t, "reindex")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "(active;")
	require.Contains(t, out, "embedded   2 of 2 chunks")

	// The read credential may not reindex: the service refuses it.
	writeCredentials(t, file, map[string]string{
		"BMCIS_SEARCH_ADDR":  addr,
		"BMCIS_INGEST_TOKEN": ctlToken,
	})
	code, _, errOut = ctlRun(t, "reindex")
	require.Equal(t, exitRefused, code)
	require.Contains(t, errOut, "PermissionDenied")
}

// With BMCIS_DATA_DIR set, `make run` writes the credentials there; a
// default .data left in the checkout by an earlier run holds another
// stack's credentials and must not be read.
func TestDataDirCredentialsWinOverAStaleCheckoutFile(t *testing.T) {
	t.Setenv(envCredentialsFile, "")
	t.Setenv(envIngestToken, "")
	checkout := t.TempDir()
	writeCredentials(t, filepath.Join(checkout, ".data", credentialsFileName),
		map[string]string{envIngestToken: "stale-credential-of-an-earlier-run"})
	t.Chdir(checkout)

	dataDir := t.TempDir()
	writeCredentials(t, filepath.Join(dataDir, credentialsFileName),
		map[string]string{envIngestToken: "credential-of-the-running-stack"})
	t.Setenv(envDataDir, dataDir)
	tok, err := credential(envIngestToken)
	require.NoError(t, err)
	require.Equal(t, "credential-of-the-running-stack", tok)

	// A data directory without the file yet does not fall back to the
	// stale one: the credential is reported missing, naming the variable.
	t.Setenv(envDataDir, t.TempDir())
	_, err = credential(envIngestToken)
	require.ErrorContains(t, err, "BMCIS_INGEST_TOKEN is not set")
	require.ErrorContains(t, err, envDataDir)

	// Without BMCIS_DATA_DIR the checkout's file is the one.
	t.Setenv(envDataDir, "")
	tok, err = credential(envIngestToken)
	require.NoError(t, err)
	require.Equal(t, "stale-credential-of-an-earlier-run", tok)
}
