package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/bmcis/knowledge/platform/grpcclient"
)

// The credential each kind of command presents (platform/rpcauth's roles).
const (
	// envReadToken: searching, evaluating, status (the read role).
	envReadToken = "BMCIS_SERVICE_TOKEN"
	// envIngestToken: ingest, delete, graph import (the ingest role).
	envIngestToken = "BMCIS_INGEST_TOKEN"
	// envAdminToken: key management (the admin role).
	envAdminToken = "BMCIS_ADMIN_TOKEN"
	// envCredentialsFile names the credentials file explicitly.
	envCredentialsFile = "BMCIS_CREDENTIALS_FILE"
	// envDataDir is where `make run` keeps its state (deploy/local/lib.sh),
	// the credentials file included, instead of the checkout's .data.
	envDataDir = "BMCIS_DATA_DIR"
)

// credentialsFileName is what `make run` writes under the checkout's .data,
// the way kubectl finds its kubeconfig: the local stack's addresses and
// credentials, keyed by the environment variables they stand in for. The
// environment always wins over it.
const credentialsFileName = "bmcisctl.json"

// fromFile returns a value of the credentials file, if there is one.
func fromFile(name string) (string, bool) {
	values, _ := loadCredentialsFile()
	v, ok := values[name]
	return v, ok && v != ""
}

// credentialsFilePath is the credentials file a command reads, or "":
// BMCIS_CREDENTIALS_FILE; else, when BMCIS_DATA_DIR is set, the file in it
// and no other (a default .data left by an earlier run holds another
// stack's credentials); else the first .data/bmcisctl.json found walking up
// from the working directory.
func credentialsFilePath() string {
	if path := strings.TrimSpace(os.Getenv(envCredentialsFile)); path != "" {
		return path
	}
	if dir := strings.TrimSpace(os.Getenv(envDataDir)); dir != "" {
		path := filepath.Join(dir, credentialsFileName)
		if _, err := os.Stat(path); err != nil {
			return ""
		}
		return path
	}
	return findUp(filepath.Join(".data", credentialsFileName))
}

// loadCredentialsFile reads the credentials file (credentialsFilePath). A
// command reads it a few times; it is small.
func loadCredentialsFile() (map[string]string, error) {
	path := credentialsFilePath()
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("credentials file %s: %w", path, err)
	}
	var values map[string]string
	if err := json.Unmarshal(b, &values); err != nil {
		return nil, fmt.Errorf("credentials file %s: not a JSON object of strings", path)
	}
	return values, nil
}

// findUp returns rel under the working directory or its nearest ancestor
// that has it, or "".
func findUp(rel string) string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// credential returns the credential named by env var name, from the
// environment or the credentials file, or a usage error saying where to put it.
func credential(name string) (string, error) {
	if v := envOr(name, ""); v != "" {
		return v, nil
	}
	if _, err := loadCredentialsFile(); err != nil {
		return "", usageErrorf("%s is not set, and %v", name, err)
	}
	return "", usageErrorf("%s is not set (%s)", name, credentialsFileHint())
}

// credentialsFileHint says where bmcisctl looks for the credentials file,
// for a message about a setting found neither there nor in the environment.
func credentialsFileHint() string {
	return fmt.Sprintf("after `make run`, run bmcisctl inside the checkout: it reads .data/%s, or %s/%s when %s is set; or set %s",
		credentialsFileName, envDataDir, credentialsFileName, envDataDir, envCredentialsFile)
}

// withCredential makes the calls made with ctx present the named credential.
func withCredential(ctx context.Context, name string) (context.Context, error) {
	tok, err := credential(name)
	if err != nil {
		return ctx, err
	}
	return grpcclient.WithCredential(ctx, tok), nil
}
