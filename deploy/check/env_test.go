package check_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/deploy/check"
)

// Every variable a binary requires is set. Rather than keep a list of the
// variables (the services are still growing theirs), the test builds each
// binary and starts it with exactly the environment the manifest gives its
// container, in a network namespace of its own when it can (so nothing is
// reachable and no port is taken on this machine). A configuration problem
// makes every BMCIS binary exit 2 at once, naming the variable; anything else
// (database unreachable: exit 1; or still serving, then a clean SIGTERM) means
// the configuration was accepted.
//
// A negative control proves the harness sees configuration errors: the same
// environment with one variable broken must exit 2 naming it.

type runResult struct {
	code    int  // exit code, -1 if killed
	running bool // still running after the grace period (then SIGTERMed)
	stderr  string
}

var (
	netnsOnce sync.Once
	netnsOK   bool
)

// isolated reports whether binaries can run in a fresh network namespace
// (unshare --net works: root, or user namespaces allowed).
func isolated() bool {
	netnsOnce.Do(func() {
		if _, err := exec.LookPath("unshare"); err != nil {
			return
		}
		netnsOK = exec.Command("unshare", "--net", "true").Run() == nil
	})
	return netnsOK
}

// runBinary starts bin with env and args; if it is still running after
// settle, it is sent SIGTERM and given stop to exit.
func runBinary(t *testing.T, bin string, args []string, env map[string]string, settle, stop time.Duration) runResult {
	t.Helper()
	var kv []string
	for k, v := range env {
		kv = append(kv, k+"="+v)
	}
	sort.Strings(kv)
	argv := append([]string{bin}, args...)
	if isolated() {
		argv = append([]string{"unshare", "--net", "--"}, argv...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), settle+stop+5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = kv
	cmd.Dir = t.TempDir()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Stdout = &stderr
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	res := runResult{}
	var err error
	select {
	case err = <-done:
	case <-time.After(settle):
		res.running = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err = <-done:
		case <-time.After(stop):
			_ = cmd.Process.Kill()
			err = <-done
		}
	}
	res.stderr = stderr.String()
	res.code = 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		res.code = ee.ExitCode()
	} else if err != nil {
		res.code = -1
	}
	return res
}

// bmcisContainers lists, per overlay, every BMCIS container with the
// environment the manifest gives it.
type bmcisContainer struct {
	overlay, workload string
	binary            string
	args              []string
	env               map[string]string
}

func bmcisContainers(t *testing.T) []bmcisContainer {
	t.Helper()
	var out []bmcisContainer
	// A container the same as one listed already (prod's again in
	// prod+components) is run once.
	seen := map[string]bool{}
	for _, ov := range overlays {
		objs := rendered(t, ov)
		src := newEnvSource(t, objs)
		for _, w := range check.Workloads(objs) {
			for _, c := range w.Containers() {
				if !isBMCIS(t, c.Image) {
					continue
				}
				env, problems := src.containerEnv(w.Namespace, w.Template.Spec, c)
				require.Empty(t, problems, "%s %s container %s: references that would stop the pod", ov, w.ID(), c.Name)
				require.Empty(t, c.Command, "%s %s: BMCIS images are run through their ENTRYPOINT; set args only", ov, w.ID())
				key := fmt.Sprint(w.ID(), c.Name, c.Image, c.Args, env) // fmt prints maps sorted
				if seen[key] {
					continue
				}
				seen[key] = true
				out = append(out, bmcisContainer{overlay: ov, workload: w.ID() + "/" + c.Name, binary: check.ImageBinary(c.Image), args: c.Args, env: env})
			}
		}
	}
	require.NotEmpty(t, out)
	return out
}

func TestManifestEnvPassesConfigValidation(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs every binary")
	}
	bins := builtBinaries(t)
	if !isolated() {
		t.Log("unshare --net unavailable: binaries run in this machine's network namespace")
	}
	seen := map[string]bool{}
	for _, c := range bmcisContainers(t) {
		seen[c.binary] = true
		t.Run(c.overlay+"/"+c.workload, func(t *testing.T) {
			bin := filepath.Join(bins, c.binary)

			res := runBinary(t, bin, c.args, c.env, 3*time.Second, 25*time.Second)
			t.Logf("exit %d (running after 3s: %v): %s", res.code, res.running, firstLines(res.stderr, 3))
			require.NotEqual(t, 2, res.code, "%s exits 2 with the manifest's environment:\n%s", c.binary, res.stderr)
			require.NotContains(t, res.stderr, "invalid configuration", "%s rejects the manifest's environment", c.binary)
			require.NotContains(t, res.stderr, "required but not set")
			if res.running {
				require.Equal(t, 0, res.code, "%s stops cleanly on SIGTERM:\n%s", c.binary, res.stderr)
			}

			// Negative control: the same environment, one variable broken.
			broken, name := breakConfig(c.binary, c.env)
			res = runBinary(t, bin, c.args, broken, 3*time.Second, 25*time.Second)
			require.Equal(t, 2, res.code, "%s with %s broken must exit 2 (the harness would not notice a config error otherwise):\n%s", c.binary, name, res.stderr)
			require.Contains(t, res.stderr, name)
		})
	}
	for b := range targets(t) {
		require.True(t, seen[b], "no workload runs %s", b)
	}
}

// breakConfig returns env with one variable made invalid, and its name.
func breakConfig(binary string, env map[string]string) (map[string]string, string) {
	out := make(map[string]string, len(env))
	for k, v := range env {
		out[k] = v
	}
	if binary == "bmcisctl" {
		// A backup falls back to DATABASE_URL without its own login's URL.
		delete(out, "DATABASE_URL")
		delete(out, "BMCIS_BACKUP_DATABASE_URL")
		return out, "DATABASE_URL"
	}
	out["BMCIS_LOG_LEVEL"] = "not-a-level"
	return out, "BMCIS_LOG_LEVEL"
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(strings.TrimSpace(s), "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, " | ")
}

// Each DB-backed service and the Job get DATABASE_URL and each gRPC service
// the service token from the Secret (never a literal value in a manifest).
func TestSecretsComeFromSecrets(t *testing.T) {
	secretVars := map[string]bool{
		"BMCIS_SERVICE_TOKEN": true, "DATABASE_URL": true, "BMCIS_SEARCH_DATABASE_URL": true,
		"BMCIS_VENDORGRAPH_DATABASE_URL": true, "BMCIS_AUTH_DATABASE_URL": true, "BMCIS_CURSOR_SECRET": true, "BMCIS_EMBEDDER_API_KEY": true,
		"BMCIS_READ_TOKEN_SHA256": true, "BMCIS_ADAPTER_TOKEN_SHA256": true, "BMCIS_INGEST_TOKEN_SHA256": true, "BMCIS_ADMIN_TOKEN_SHA256": true,
	}
	for _, ov := range overlays {
		for _, w := range check.Workloads(rendered(t, ov)) {
			for _, c := range w.Containers() {
				for _, e := range c.Env {
					if secretVars[e.Name] {
						require.True(t, e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil,
							"%s %s: %s comes from a Secret", ov, w.ID(), e.Name)
					}
				}
				for _, from := range c.EnvFrom {
					require.Nil(t, from.SecretRef, "%s %s: no envFrom of a whole Secret (each pod gets only its keys)", ov, w.ID())
				}
			}
		}
	}
}

// No overlay lets a service connect as a wider database role than its own
// (BMCIS_ALLOW_PRIVILEGED_DB_LOGIN, platform/pg): each service has its own
// login, the dev overlay's too; the dev overlay's secrets switch
// (BMCIS_ALLOW_INSECURE_SECRETS) does not imply it.
func TestNoOverlayAllowsPrivilegedDBLogin(t *testing.T) {
	for _, c := range bmcisContainers(t) {
		v, set := c.env["BMCIS_ALLOW_PRIVILEGED_DB_LOGIN"]
		require.False(t, set, "%s %s sets BMCIS_ALLOW_PRIVILEGED_DB_LOGIN=%q", c.overlay, c.workload, v)
	}
}
