package check_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"

	"github.com/bmcis/knowledge/deploy/check"
)

// overlays are the environments under deploy/k8s/overlays, and prod with
// every optional component under deploy/k8s/components added: each check
// covers the components as well.
var overlays = []string{"dev", "prod", prodWithComponents}

// prodWithComponents is prod with every optional component, added as an
// operator adds them: a kustomization of their own over the overlay.
const prodWithComponents = "prod+components"

// stampVersion is what the build test stamps into every binary.
const stampVersion = "v0.0.0-deploy-check"

func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := check.RepoRoot()
	require.NoError(t, err)
	return root
}

var (
	renderMu    sync.Mutex
	renderCache = map[string][]check.Object{}
)

// rendered returns an overlay's objects, rendered once per test binary.
func rendered(t testing.TB, overlay string) []check.Object {
	t.Helper()
	renderMu.Lock()
	defer renderMu.Unlock()
	if objs, ok := renderCache[overlay]; ok {
		return objs
	}
	dir := filepath.Join(repoRoot(t), "deploy", "k8s", "overlays", overlay)
	if overlay == prodWithComponents {
		dir = withComponents(t, "prod")
	}
	objs, err := check.Render(dir)
	require.NoError(t, err, "overlay %s", overlay)
	renderCache[overlay] = objs
	return objs
}

// withComponents writes a kustomization over overlay that adds every
// component under deploy/k8s/components the overlay does not include
// already, and returns its directory.
func withComponents(t testing.TB, overlay string) string {
	t.Helper()
	k8s := filepath.Join(repoRoot(t), "deploy", "k8s")
	dir, err := os.MkdirTemp("", "bmcis-deploy-check-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	rel := func(p ...string) string { // kustomize takes relative paths only
		r, err := filepath.Rel(dir, filepath.Join(append([]string{k8s}, p...)...))
		require.NoError(t, err)
		return r
	}
	raw, err := os.ReadFile(filepath.Join(k8s, "overlays", overlay, "kustomization.yaml"))
	require.NoError(t, err)
	var own types.Kustomization
	require.NoError(t, yaml.Unmarshal(raw, &own))
	entries, err := os.ReadDir(filepath.Join(k8s, "components"))
	require.NoError(t, err)
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n")
	// A component added outside the overlay needs the namespace again.
	fmt.Fprintf(&b, "namespace: bmcis\nresources:\n  - %s\ncomponents:\n", rel("overlays", overlay))
	added := 0
	for _, e := range entries {
		if !e.IsDir() || slices.Contains(own.Components, "../../components/"+e.Name()) {
			continue
		}
		fmt.Fprintf(&b, "  - %s\n", rel("components", e.Name()))
		added++
	}
	require.Positive(t, added, "%s includes every component already", overlay)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(b.String()), 0o644))
	return dir
}

func dockerfile(t testing.TB) *check.Dockerfile {
	t.Helper()
	d, err := check.ParseDockerfile(filepath.Join(repoRoot(t), "deploy", "docker", "Dockerfile"))
	require.NoError(t, err)
	return d
}

// targets are the binaries the Dockerfile builds: name -> package path.
func targets(t testing.TB) map[string]string {
	t.Helper()
	d := dockerfile(t)
	st, ok := d.Stage("build")
	require.True(t, ok, "the Dockerfile has a stage named build")
	tg := st.Targets()
	require.NotEmpty(t, tg, "no `NAME) pkg=./path ;;` lines in the build stage")
	return tg
}

// isBMCIS says whether an image is one of ours: .../bmcis/TARGET.
func isBMCIS(t testing.TB, image string) bool {
	repo, _ := check.SplitImage(image)
	_, ok := targets(t)[check.ImageBinary(image)]
	return ok && strings.Contains("/"+repo, "/bmcis/")
}

// grpcServices are the binaries started through platform/grpcserver: gRPC
// health, metrics, and the NOT_SERVING drain on SIGTERM.
var grpcServices = map[string]bool{"search": true, "vendorgraph": true, "auth": true}

// productEnv builds a Go command environment for the product workspace: the
// repository's go.work (so GOWORK is dropped; `make deploy-check` sets it to
// off for this module) and no -mod flag (workspace mode refuses -mod=mod).
func productEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "GOWORK", "CGO_ENABLED", "GOOS", "GOARCH":
			continue
		case "GOFLAGS":
			var keep []string
			for _, f := range strings.Fields(v) {
				if !strings.HasPrefix(f, "-mod=") {
					keep = append(keep, f)
				}
			}
			kv = "GOFLAGS=" + strings.Join(keep, " ")
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
	buildOut  string
)

// builtBinaries builds every Dockerfile target once, the way the Dockerfile
// does (its -ldflags, -trimpath, CGO_ENABLED=0), into one directory.
func builtBinaries(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		root, err := check.RepoRoot()
		if err != nil {
			buildErr = err
			return
		}
		d, err := check.ParseDockerfile(filepath.Join(root, "deploy", "docker", "Dockerfile"))
		if err != nil {
			buildErr = err
			return
		}
		st, _ := d.Stage("build")
		run, ok := st.BuildCommand()
		if !ok {
			buildErr = fmt.Errorf("no RUN ... go build in the build stage")
			return
		}
		ldflags, ok := run.LDFlags()
		if !ok {
			buildErr = fmt.Errorf("the go build command has no -ldflags \"...\"")
			return
		}
		ldflags = strings.NewReplacer("${VERSION}", stampVersion, "$VERSION", stampVersion,
			"${COMMIT}", "deadbeef", "$COMMIT", "deadbeef").Replace(ldflags)
		dir, err := os.MkdirTemp("", "bmcis-deploy-check-bin-")
		if err != nil {
			buildErr = err
			return
		}
		buildDir = dir
		args := []string{"build", "-buildvcs=false", "-trimpath", "-ldflags", ldflags, "-o", dir + string(os.PathSeparator)}
		for _, pkg := range st.Targets() {
			args = append(args, pkg)
		}
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		cmd.Env = productEnv("CGO_ENABLED=0", "GOOS="+runtime.GOOS, "GOARCH="+runtime.GOARCH)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		buildOut = fmt.Sprintf("go %s (%.1fs)\n%s", strings.Join(args, " "), time.Since(start).Seconds(), out)
		if err != nil {
			buildErr = fmt.Errorf("%w\n%s", err, buildOut)
		}
	})
	require.NoError(t, buildErr)
	return buildDir
}

// envSource resolves ConfigMap and Secret references for one overlay. For
// prod, whose Secret is created out of band, secrets come from the committed
// template deploy/k8s/secret.example.yaml.
type envSource struct {
	configMaps map[string]map[string]string // namespace/name -> data
	secrets    map[string]map[string]string
	template   *corev1.Secret
}

func newEnvSource(t testing.TB, objs []check.Object) *envSource {
	t.Helper()
	s := &envSource{configMaps: map[string]map[string]string{}, secrets: map[string]map[string]string{}}
	for _, cm := range check.Of[*corev1.ConfigMap](objs) {
		s.configMaps[cm.Namespace+"/"+cm.Name] = cm.Data
	}
	for _, sec := range check.Of[*corev1.Secret](objs) {
		m := map[string]string{}
		for k, v := range sec.Data {
			m[k] = string(v)
		}
		for k, v := range sec.StringData {
			m[k] = v
		}
		s.secrets[sec.Namespace+"/"+sec.Name] = m
	}
	s.template = secretTemplate(t)
	return s
}

func secretTemplate(t testing.TB) *corev1.Secret {
	t.Helper()
	y, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "k8s", "secret.example.yaml"))
	require.NoError(t, err)
	obj, _, err := check.DecodeStrict(y)
	require.NoError(t, err)
	sec, ok := obj.(*corev1.Secret)
	require.True(t, ok, "secret.example.yaml is a Secret")
	return sec
}

func (s *envSource) secret(ns, name string) (map[string]string, bool) {
	if m, ok := s.secrets[ns+"/"+name]; ok {
		return m, true
	}
	if name == s.template.Name {
		return filled(s.template.StringData), true
	}
	return nil, false
}

// filled is the template as an operator fills it in: every CHANGE_ME
// replaced, digests computed. The services refuse the placeholders
// themselves (they fail closed), so running them on the raw template would
// test nothing.
func filled(tmpl map[string]string) map[string]string {
	out := make(map[string]string, len(tmpl))
	for k, v := range tmpl {
		switch {
		case strings.HasSuffix(k, "_SHA256"):
			sum := sha256.Sum256([]byte("operator credential for " + k))
			out[k] = hex.EncodeToString(sum[:])
		default:
			out[k] = strings.ReplaceAll(v, "CHANGE_ME", "F1lled0perat0rSecret4f9c2b7e1d3a")
		}
	}
	return out
}

// containerEnv computes the environment a container starts with, as the
// kubelet would: envFrom first, then env; a missing non-optional reference
// is a problem (the pod would not start).
func (s *envSource) containerEnv(ns string, pod corev1.PodSpec, c corev1.Container) (map[string]string, []string) {
	env := map[string]string{}
	var problems []string
	for _, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			m, ok := s.configMaps[ns+"/"+from.ConfigMapRef.Name]
			if !ok && !isTrue(from.ConfigMapRef.Optional) {
				problems = append(problems, "envFrom: no ConfigMap "+from.ConfigMapRef.Name)
			}
			for k, v := range m {
				env[from.Prefix+k] = v
			}
		case from.SecretRef != nil:
			m, ok := s.secret(ns, from.SecretRef.Name)
			if !ok && !isTrue(from.SecretRef.Optional) {
				problems = append(problems, "envFrom: no Secret "+from.SecretRef.Name)
			}
			for k, v := range m {
				env[from.Prefix+k] = v
			}
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env[e.Name] = e.Value
			continue
		}
		vf := e.ValueFrom
		switch {
		case vf.ConfigMapKeyRef != nil:
			m := s.configMaps[ns+"/"+vf.ConfigMapKeyRef.Name]
			if v, ok := m[vf.ConfigMapKeyRef.Key]; ok {
				env[e.Name] = v
			} else if !isTrue(vf.ConfigMapKeyRef.Optional) {
				problems = append(problems, fmt.Sprintf("%s: no key %s in ConfigMap %s", e.Name, vf.ConfigMapKeyRef.Key, vf.ConfigMapKeyRef.Name))
			}
		case vf.SecretKeyRef != nil:
			m, _ := s.secret(ns, vf.SecretKeyRef.Name)
			if v, ok := m[vf.SecretKeyRef.Key]; ok {
				env[e.Name] = v
			} else if !isTrue(vf.SecretKeyRef.Optional) {
				problems = append(problems, fmt.Sprintf("%s: no key %s in Secret %s", e.Name, vf.SecretKeyRef.Key, vf.SecretKeyRef.Name))
			}
		case vf.FieldRef != nil:
			switch vf.FieldRef.FieldPath {
			case "metadata.name":
				env[e.Name] = "pod-0123456789-abcde"
			case "metadata.namespace":
				env[e.Name] = ns
			default:
				env[e.Name] = "10.1.2.3"
			}
		case vf.ResourceFieldRef != nil:
			v, err := resourceValue(c, vf.ResourceFieldRef)
			if err != nil {
				problems = append(problems, e.Name+": "+err.Error())
			}
			env[e.Name] = v
		}
	}
	return env, problems
}

// resourceValue is what the downward API gives for a resourceFieldRef.
func resourceValue(c corev1.Container, ref *corev1.ResourceFieldSelector) (string, error) {
	kind, name, _ := strings.Cut(ref.Resource, ".")
	list := c.Resources.Limits
	if kind == "requests" {
		list = c.Resources.Requests
	}
	q, ok := list[corev1.ResourceName(name)]
	if !ok {
		return "", fmt.Errorf("%s is not set on the container", ref.Resource)
	}
	divisor := resource.MustParse("1")
	if !ref.Divisor.IsZero() {
		divisor = ref.Divisor
	}
	if name == "cpu" {
		return strconv.FormatInt((q.MilliValue()+divisor.MilliValue()-1)/divisor.MilliValue(), 10), nil
	}
	return strconv.FormatInt((q.Value()+divisor.Value()-1)/divisor.Value(), 10), nil
}

func isTrue(b *bool) bool { return b != nil && *b }

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}
