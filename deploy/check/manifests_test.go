package check_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/bmcis/knowledge/deploy/check"
)

// The five long-running BMCIS workloads.
var apps = []string{"search", "vendorgraph", "auth", "gateway", "mcp-adapter"}

// Autoscaled with an HPA (autoscaling/v2), per the issue.
var autoscaled = []string{"search", "mcp-adapter", "gateway"}

func TestOverlaysRenderStrictly(t *testing.T) {
	for _, ov := range overlays {
		t.Run(ov, func(t *testing.T) {
			objs := rendered(t, ov) // kustomize build + strict decode of every object
			require.NotEmpty(t, objs)
			kinds := map[string]int{}
			for _, o := range objs {
				kinds[o.GVK.Kind]++
				require.NotEmpty(t, o.Name)
				if o.GVK.Kind != "Namespace" {
					require.NotEmpty(t, o.Namespace, "%s has a namespace (set by the overlay)", o.ID())
				}
			}
			t.Logf("%s: %d objects %v", ov, len(objs), kinds)
		})
	}
}

// The strict decoder is what catches a misspelt field: prove it does.
func TestStrictDecodingRejectsMistakes(t *testing.T) {
	const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: x
spec:
  selector:
    matchLabels: {app: x}
  template:
    metadata:
      labels: {app: x}
    spec:
      containers:
        - name: x
          image: x:1
%s`
	tests := []struct {
		name    string
		yaml    string
		wantErr string
	}{
		{"valid", fmt.Sprintf(deployment, ""), ""},
		{"unknown field", fmt.Sprintf(deployment, "          livenessprobe: {}\n"), "unknown field"},
		{"misplaced field", fmt.Sprintf(deployment, "          replicas: 2\n"), "unknown field"},
		{"duplicate field", fmt.Sprintf(deployment, "          image: x:2\n"), "already set"},
		{"wrong type", fmt.Sprintf(deployment, "          ports: 8080\n"), "cannot unmarshal"},
		{"unknown kind", "apiVersion: v1\nkind: Servce\nmetadata: {name: x}\n", "no kind"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := check.DecodeStrict([]byte(tc.yaml))
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}

func TestExpectedObjects(t *testing.T) {
	for _, ov := range overlays {
		t.Run(ov, func(t *testing.T) {
			objs := rendered(t, ov)
			deps := map[string]*appsv1.Deployment{}
			for _, d := range check.Of[*appsv1.Deployment](objs) {
				deps[d.Name] = d
			}
			svcs := map[string]bool{}
			for _, s := range check.Of[*corev1.Service](objs) {
				svcs[s.Name] = true
			}
			for _, a := range apps {
				require.Contains(t, deps, a, "Deployment %s", a)
				require.True(t, svcs[a], "Service %s", a)
			}
			require.Len(t, check.Of[*batchv1.Job](objs), 1, "one migration Job")
			require.NotEmpty(t, check.Of[*corev1.ConfigMap](objs), "a ConfigMap")
			require.Len(t, check.Of[*corev1.Namespace](objs), 1, "the overlay creates its namespace")

			secrets := check.Of[*corev1.Secret](objs)
			sts := check.Of[*appsv1.StatefulSet](objs)
			switch ov {
			case "dev":
				require.Len(t, secrets, 1, "dev generates its (dev-only) Secret")
				require.Len(t, sts, 1, "dev runs PostgreSQL as a StatefulSet")
				require.Contains(t, sts[0].Spec.Template.Spec.Containers[0].Image, "pgvector/pgvector:")
				require.Contains(t, deps, "redis", "dev includes the redis component")
				for k, v := range secrets[0].Data {
					if strings.HasSuffix(k, "_SHA256") {
						continue // the digest of a dev-only value
					}
					require.Contains(t, string(v), "dev-only", "dev Secret value %s is marked dev-only", k)
				}
				for _, k := range []string{"BMCIS_INGEST_TOKEN_SHA256", "BMCIS_ADMIN_TOKEN_SHA256", "BMCIS_ADMIN_TOKEN"} {
					require.NotContains(t, secrets[0].Data, k, "dev ships no ingest or admin credential: a published one would be anyone's")
				}
			case "prod", prodWithComponents:
				require.Empty(t, secrets, "prod commits no Secret: it is created out of band from secret.example.yaml")
				require.Empty(t, sts, "prod uses an external PostgreSQL")
			}
			cronJobs := check.Of[*batchv1.CronJob](objs)
			if ov == prodWithComponents {
				require.Len(t, cronJobs, 1, "components/backup's CronJob")
				require.Len(t, check.Of[*corev1.PersistentVolumeClaim](objs), 1, "components/backup's claim")
			} else {
				require.Empty(t, cronJobs, "backups are an optional component")
			}
		})
	}
}

// Every container: probes (long-running ones), requests and limits, and a
// locked-down security context; every pod: no service-account token, no host
// namespaces or paths.
func TestContainerPolicy(t *testing.T) {
	type ctx struct {
		w   check.Workload
		c   corev1.Container
		pod corev1.PodSpec
	}
	checks := []struct {
		name string
		fn   func(t *testing.T, x ctx)
	}{
		{"resources", func(t *testing.T, x ctx) {
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				req, ok := x.c.Resources.Requests[r]
				require.True(t, ok && !req.IsZero(), "requests.%s", r)
				lim, ok := x.c.Resources.Limits[r]
				require.True(t, ok && !lim.IsZero(), "limits.%s", r)
				require.LessOrEqual(t, req.Cmp(lim), 0, "%s request <= limit", r)
			}
		}},
		{"probes", func(t *testing.T, x ctx) {
			if x.w.RunsToCompletion() {
				return // nothing to probe
			}
			require.NotNil(t, x.c.ReadinessProbe, "readinessProbe")
			require.NotNil(t, x.c.LivenessProbe, "livenessProbe")
			probes := map[string]*corev1.Probe{"readiness": x.c.ReadinessProbe, "liveness": x.c.LivenessProbe}
			if x.c.StartupProbe != nil {
				probes["startup"] = x.c.StartupProbe
			}
			for kind, p := range probes {
				switch {
				case p.GRPC != nil:
					require.True(t, hasPort(x.c, intstr.FromInt32(p.GRPC.Port)), "%s gRPC probe port %d is declared", kind, p.GRPC.Port)
				case p.HTTPGet != nil:
					require.True(t, hasPort(x.c, p.HTTPGet.Port), "%s HTTP probe port %s is declared", kind, p.HTTPGet.Port.String())
				case p.TCPSocket != nil:
					require.True(t, hasPort(x.c, p.TCPSocket.Port), "%s TCP probe port is declared", kind)
				case p.Exec != nil:
					require.False(t, isBMCIS(t, x.c.Image), "BMCIS images have no shell or tools for exec probes")
				default:
					require.Fail(t, kind+" probe has no handler")
				}
			}
			if isBMCIS(t, x.c.Image) && grpcServices[check.ImageBinary(x.c.Image)] {
				for kind, p := range probes {
					require.NotNil(t, p.GRPC, "%s: %s probe is a native gRPC probe (grpc.health.v1)", x.c.Name, kind)
					// The services' database health (platform/grpcserver's
					// DatabaseHealthService) must not drive a probe: a
					// database outage would restart, or unroute, every pod
					// (docs/DEPLOY.md, probes).
					if p.GRPC.Service != nil {
						require.NotEqual(t, "bmcis.database", *p.GRPC.Service, "%s: %s probe", x.c.Name, kind)
					}
				}
			}
		}},
		{"security", func(t *testing.T, x ctx) {
			psc := x.pod.SecurityContext
			if psc == nil {
				psc = &corev1.PodSecurityContext{}
			}
			sc := x.c.SecurityContext
			require.NotNil(t, sc, "container securityContext")
			nonRoot := sc.RunAsNonRoot
			if nonRoot == nil {
				nonRoot = psc.RunAsNonRoot
			}
			require.True(t, isTrue(nonRoot), "runAsNonRoot")
			uid := sc.RunAsUser
			if uid == nil {
				uid = psc.RunAsUser
			}
			if uid != nil {
				require.NotZero(t, *uid, "runAsUser is not root")
			}
			require.True(t, isTrue(sc.ReadOnlyRootFilesystem), "readOnlyRootFilesystem")
			require.NotNil(t, sc.AllowPrivilegeEscalation)
			require.False(t, *sc.AllowPrivilegeEscalation, "allowPrivilegeEscalation false")
			require.False(t, isTrue(sc.Privileged), "not privileged")
			require.NotNil(t, sc.Capabilities)
			require.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop, "capabilities drop ALL")
			require.Empty(t, sc.Capabilities.Add, "no capability added")
			seccomp := sc.SeccompProfile
			if seccomp == nil {
				seccomp = psc.SeccompProfile
			}
			require.NotNil(t, seccomp, "seccompProfile")
			require.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, seccomp.Type)
		}},
		{"pod", func(t *testing.T, x ctx) {
			require.False(t, x.pod.HostNetwork || x.pod.HostPID || x.pod.HostIPC, "no host namespaces")
			require.NotNil(t, x.pod.AutomountServiceAccountToken)
			require.False(t, *x.pod.AutomountServiceAccountToken, "no service-account token mounted")
			for _, v := range x.pod.Volumes {
				require.Nil(t, v.HostPath, "no hostPath volume")
			}
		}},
		{"image", func(t *testing.T, x ctx) {
			_, tag := check.SplitImage(x.c.Image)
			require.NotEmpty(t, tag, "image %s has a tag", x.c.Image)
			require.NotEqual(t, "latest", tag, "image %s is pinned", x.c.Image)
			require.Equal(t, corev1.PullPolicy(""), x.c.ImagePullPolicy, "pull policy left to the default (IfNotPresent for a tag)")
		}},
	}
	for _, ov := range overlays {
		for _, w := range check.Workloads(rendered(t, ov)) {
			for _, c := range w.Containers() {
				for _, ck := range checks {
					t.Run(fmt.Sprintf("%s/%s/%s/%s", ov, w.ID(), c.Name, ck.name), func(t *testing.T) {
						ck.fn(t, ctx{w: w, c: c, pod: w.Template.Spec})
					})
				}
			}
		}
	}
}

func hasPort(c corev1.Container, p intstr.IntOrString) bool {
	for _, cp := range c.Ports {
		if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
			return true
		}
	}
	return false
}

// Every Service selects the pods of some workload, and each of its ports
// targets a port those pods' containers declare (same protocol).
func TestServicesSelectPodsAndPorts(t *testing.T) {
	for _, ov := range overlays {
		objs := rendered(t, ov)
		ws := check.Workloads(objs)
		for _, s := range check.Of[*corev1.Service](objs) {
			t.Run(ov+"/"+s.Name, func(t *testing.T) {
				require.NotEmpty(t, s.Spec.Selector, "a selector")
				var matched []check.Workload
				for _, w := range ws {
					if w.Namespace == s.Namespace && !w.RunsToCompletion() && labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(w.Template.Labels)) {
						matched = append(matched, w)
					}
				}
				require.NotEmpty(t, matched, "Service %s selects the pods of a Deployment or StatefulSet", s.Name)
				for _, sp := range s.Spec.Ports {
					target := sp.TargetPort
					if target.Type == intstr.Int && target.IntVal == 0 {
						target = intstr.FromInt32(sp.Port)
					}
					proto := sp.Protocol
					if proto == "" {
						proto = corev1.ProtocolTCP
					}
					for _, w := range matched {
						found := false
						for _, c := range w.Template.Spec.Containers {
							for _, cp := range c.Ports {
								cpp := cp.Protocol
								if cpp == "" {
									cpp = corev1.ProtocolTCP
								}
								if cpp == proto && ((target.Type == intstr.String && cp.Name == target.StrVal) || (target.Type == intstr.Int && cp.ContainerPort == target.IntVal)) {
									found = true
								}
							}
						}
						require.True(t, found, "port %s targets %s, which %s declares", sp.Name, target.String(), w.ID())
					}
				}
			})
		}
	}
}

// All BMCIS images carry one version tag; every one is a Dockerfile target.
func TestImagesShareOneVersion(t *testing.T) {
	for _, ov := range overlays {
		t.Run(ov, func(t *testing.T) {
			tags := map[string][]string{}
			bins := map[string]bool{}
			for _, w := range check.Workloads(rendered(t, ov)) {
				for _, c := range w.Containers() {
					repo, tag := check.SplitImage(c.Image)
					if !strings.Contains("/"+repo, "/bmcis/") {
						continue
					}
					require.True(t, isBMCIS(t, c.Image), "%s: image %s is a Dockerfile target", w.ID(), c.Image)
					tags[tag] = append(tags[tag], c.Image)
					bins[check.ImageBinary(c.Image)] = true
				}
			}
			require.Len(t, tags, 1, "one tag for every BMCIS image: %v", tags)
			for tag := range tags {
				require.NotEmpty(t, tag)
				require.NotEqual(t, "latest", tag)
			}
			for b := range targets(t) {
				require.True(t, bins[b], "image bmcis/%s is used", b)
			}
		})
	}
}

func TestMigrationJob(t *testing.T) {
	for _, ov := range overlays {
		t.Run(ov, func(t *testing.T) {
			jobs := check.Of[*batchv1.Job](rendered(t, ov))
			require.Len(t, jobs, 1)
			j := jobs[0]
			spec := j.Spec.Template.Spec
			require.Len(t, spec.Containers, 1)
			c := spec.Containers[0]
			require.Equal(t, "bmcisctl", check.ImageBinary(c.Image))
			require.Equal(t, []string{"migrate", "up"}, c.Args)
			_, tag := check.SplitImage(c.Image)
			require.Equal(t, "bmcis-migrate-"+tag, j.Name, "the Job is named after the version it migrates to")
			require.Empty(t, validation.IsDNS1123Subdomain(j.Name), "a valid object name")
			require.Empty(t, validation.IsValidLabelValue(j.Name), "usable as the job-name label (63 characters at most)")
			require.Contains(t, []corev1.RestartPolicy{corev1.RestartPolicyNever, corev1.RestartPolicyOnFailure}, spec.RestartPolicy)
			require.NotNil(t, j.Spec.BackoffLimit)
			require.NotNil(t, j.Spec.ActiveDeadlineSeconds, "a stuck migration fails instead of hanging")
			// migrate up sets up the backup's read-only login from this
			// URL (docs/BACKUP.md); optional, since not every deployment
			// backs up with bmcisctl.
			var backup *corev1.SecretKeySelector
			for _, e := range c.Env {
				if e.Name == "BMCIS_BACKUP_DATABASE_URL" && e.ValueFrom != nil {
					backup = e.ValueFrom.SecretKeyRef
				}
			}
			require.NotNil(t, backup, "the Job passes BMCIS_BACKUP_DATABASE_URL from the Secret")
			require.Equal(t, "BMCIS_BACKUP_DATABASE_URL", backup.Key)
			require.True(t, isTrue(backup.Optional), "a Secret without the backup's URL still migrates")
		})
	}
}

func TestAutoscalersAndDisruptionBudgets(t *testing.T) {
	for _, ov := range overlays {
		t.Run(ov, func(t *testing.T) {
			objs := rendered(t, ov)
			deps := map[string]*appsv1.Deployment{}
			for _, d := range check.Of[*appsv1.Deployment](objs) {
				deps[d.Name] = d
			}
			hpas := map[string]*autoscalingv2.HorizontalPodAutoscaler{}
			for _, h := range check.Of[*autoscalingv2.HorizontalPodAutoscaler](objs) {
				ref := h.Spec.ScaleTargetRef
				require.Equal(t, "Deployment", ref.Kind, "HPA %s", h.Name)
				require.Equal(t, "apps/v1", ref.APIVersion, "HPA %s", h.Name)
				d, ok := deps[ref.Name]
				require.True(t, ok, "HPA %s targets Deployment %s, which exists", h.Name, ref.Name)
				require.Equal(t, h.Namespace, d.Namespace)
				require.NotNil(t, h.Spec.MinReplicas)
				require.GreaterOrEqual(t, *h.Spec.MinReplicas, int32(1))
				require.GreaterOrEqual(t, h.Spec.MaxReplicas, *h.Spec.MinReplicas)
				require.Nil(t, d.Spec.Replicas, "Deployment %s leaves replicas to its HPA (a fixed count would be reset on every apply)", d.Name)
				for _, m := range h.Spec.Metrics {
					if m.Resource == nil {
						continue
					}
					for _, c := range d.Spec.Template.Spec.Containers {
						_, ok := c.Resources.Requests[m.Resource.Name]
						require.True(t, ok, "HPA %s scales on %s: container %s requests it", h.Name, m.Resource.Name, c.Name)
					}
				}
				hpas[ref.Name] = h
			}
			for _, a := range autoscaled {
				require.Contains(t, hpas, a, "HPA for %s", a)
			}

			pdbs := check.Of[*policyv1.PodDisruptionBudget](objs)
			for _, p := range pdbs {
				sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
				require.NoError(t, err)
				n := 0
				for _, w := range check.Workloads(objs) {
					if w.Namespace == p.Namespace && sel.Matches(labels.Set(w.Template.Labels)) {
						n++
					}
				}
				require.Equal(t, 1, n, "PDB %s selects the pods of exactly one workload", p.Name)
			}
			for _, a := range apps {
				d := deps[a]
				var pdb *policyv1.PodDisruptionBudget
				for _, p := range pdbs {
					sel, _ := metav1.LabelSelectorAsSelector(p.Spec.Selector)
					if p.Namespace == d.Namespace && sel.Matches(labels.Set(d.Spec.Template.Labels)) {
						pdb = p
					}
				}
				require.NotNil(t, pdb, "PodDisruptionBudget for %s", a)
				if ov == "prod" {
					replicas := int32(1)
					if d.Spec.Replicas != nil {
						replicas = *d.Spec.Replicas
					}
					if h, ok := hpas[a]; ok {
						replicas = *h.Spec.MinReplicas
					}
					require.GreaterOrEqual(t, replicas, int32(2), "prod runs at least two %s pods, so its PDB keeps one up", a)
				}
			}
		})
	}
}

// Termination matches the services' drain: the grace period covers the
// preStop sleep, the NOT_SERVING drain and the wait for calls in flight.
func TestGracefulTermination(t *testing.T) {
	for _, ov := range overlays {
		objs := rendered(t, ov)
		src := newEnvSource(t, objs)
		for _, w := range check.Workloads(objs) {
			if w.Kind != "Deployment" {
				continue
			}
			for _, c := range w.Template.Spec.Containers {
				if !isBMCIS(t, c.Image) {
					continue
				}
				bin := check.ImageBinary(c.Image)
				t.Run(ov+"/"+w.Name, func(t *testing.T) {
					env, _ := src.containerEnv(w.Namespace, w.Template.Spec, c)
					dur := func(name string, def time.Duration) time.Duration {
						v, ok := env[name]
						if !ok {
							return def
						}
						d, err := time.ParseDuration(v)
						require.NoError(t, err, name)
						return d
					}
					var preStop time.Duration
					if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
						require.NotNil(t, c.Lifecycle.PreStop.Sleep, "preStop uses the native sleep action (the image has no shell)")
						preStop = time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
					}
					var need time.Duration
					switch {
					case grpcServices[bin]:
						// NOT_SERVING for the drain, then GracefulStop up to the timeout.
						need = preStop + dur("BMCIS_SHUTDOWN_DRAIN", 2*time.Second) + dur("BMCIS_SHUTDOWN_TIMEOUT", 20*time.Second)
						require.GreaterOrEqual(t, dur("BMCIS_SHUTDOWN_DRAIN", 2*time.Second), 2*time.Second,
							"a drain long enough for endpoints to drop the pod")
					case bin == "gateway":
						require.GreaterOrEqual(t, preStop, 2*time.Second, "the gateway does not drain by itself: preStop sleep")
						need = preStop + dur("BMCIS_SHUTDOWN_TIMEOUT", 20*time.Second)
					case bin == "mcp-adapter":
						require.GreaterOrEqual(t, preStop, 2*time.Second, "the adapter does not drain by itself: preStop sleep")
						need = preStop + 20*time.Second // fixed in mcp-adapter/internal/transport
					default:
						t.Skip("no known shutdown sequence")
					}
					grace := time.Duration(30) * time.Second
					if g := w.Template.Spec.TerminationGracePeriodSeconds; g != nil {
						grace = time.Duration(*g) * time.Second
					}
					require.GreaterOrEqual(t, grace, need+time.Second,
						"terminationGracePeriodSeconds %s covers preStop + drain + shutdown timeout (%s) with a margin", grace, need)
				})
			}
		}
	}
}

// Listen addresses are set explicitly, bind every interface (not loopback,
// the local-stack default) and use declared container ports.
func TestListenAddresses(t *testing.T) {
	listen := map[string][]string{
		"search":      {"BMCIS_GRPC_ADDR", "BMCIS_METRICS_ADDR"},
		"vendorgraph": {"BMCIS_GRPC_ADDR", "BMCIS_METRICS_ADDR"},
		"auth":        {"BMCIS_GRPC_ADDR", "BMCIS_METRICS_ADDR"},
		"gateway":     {"BMCIS_GATEWAY_ADDR", "BMCIS_GATEWAY_METRICS_ADDR"},
		"mcp-adapter": {"BMCIS_MCP_HTTP_ADDR"},
	}
	for _, ov := range overlays {
		objs := rendered(t, ov)
		src := newEnvSource(t, objs)
		for _, w := range check.Workloads(objs) {
			for _, c := range w.Template.Spec.Containers {
				vars, ok := listen[check.ImageBinary(c.Image)]
				if !ok || !isBMCIS(t, c.Image) {
					continue
				}
				t.Run(ov+"/"+w.Name, func(t *testing.T) {
					env, _ := src.containerEnv(w.Namespace, w.Template.Spec, c)
					for _, v := range vars {
						addr, ok := env[v]
						require.True(t, ok, "%s is set", v)
						host, port, err := net.SplitHostPort(addr)
						require.NoError(t, err, v)
						require.Contains(t, []string{"", "0.0.0.0", "::"}, host, "%s binds every interface, got %q", v, addr)
						require.True(t, hasPort(c, intstr.Parse(port)), "%s port %s is a declared container port", v, port)
					}
					if check.ImageBinary(c.Image) == "mcp-adapter" {
						require.Equal(t, "http", env["BMCIS_MCP_TRANSPORT"], "the adapter serves streamable HTTP in the cluster")
					}
				})
			}
		}
	}
}

// Every variable set on a BMCIS container is read somewhere in the product
// code (a typo like BMCIS_GRPC_ADR would otherwise be silently ignored).
func TestEnvNamesAreKnownToTheCode(t *testing.T) {
	// Read by the Go runtime, not the product.
	runtimeVars := map[string]bool{"GOMEMLIMIT": true, "GOMAXPROCS": true, "GODEBUG": true}
	// Set ahead of the code that reads them, with the reason (none today).
	pending := map[string]string{}
	root := repoRoot(t)
	literals := map[string]bool{}
	lit := regexp.MustCompile(`"([A-Z][A-Z0-9_]+)"`)
	for _, dir := range []string{"platform", "services", "gateway", "mcp-adapter", "migrations"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, m := range lit.FindAllStringSubmatch(string(b), -1) {
				literals[m[1]] = true
			}
			return nil
		})
		require.NoError(t, err)
	}
	for _, ov := range overlays {
		objs := rendered(t, ov)
		src := newEnvSource(t, objs)
		for _, w := range check.Workloads(objs) {
			for _, c := range w.Containers() {
				if !isBMCIS(t, c.Image) {
					continue
				}
				env, _ := src.containerEnv(w.Namespace, w.Template.Spec, c)
				names := make([]string, 0, len(env))
				for n := range env {
					names = append(names, n)
				}
				for _, e := range c.Env { // optional secrets absent from the template count too
					names = append(names, e.Name)
				}
				sort.Strings(names)
				for _, n := range names {
					if runtimeVars[n] {
						continue
					}
					if why, ok := pending[n]; ok {
						if literals[n] {
							t.Logf("%s is now read by the code: drop it from the pending list", n)
						} else {
							t.Logf("pending: %s (%s)", n, why)
						}
						continue
					}
					require.True(t, literals[n], "%s %s sets %s, which no product code reads (typo?)", ov, w.ID(), n)
				}
			}
		}
	}
}

// replacedInProd lists Secret keys the prod overlay fills another way by
// default; the template keeps them for operators who swap that default out.
var replacedInProd = map[string]string{
	"REDIS_URL": "prod runs components/redis; drop it and set this key to use a managed Redis",
}

// The committed Secret template holds placeholders only, and every key a
// workload needs.
func TestSecretTemplate(t *testing.T) {
	tmpl := secretTemplate(t)
	require.Empty(t, tmpl.Data, "placeholders go in stringData, readable")
	require.NotEmpty(t, tmpl.StringData)
	for k, v := range tmpl.StringData {
		require.Contains(t, v, "CHANGE_ME", "template value %s is a placeholder", k)
	}
	objs := rendered(t, "prod")
	used := map[string]bool{}
	for _, w := range check.Workloads(objs) {
		for _, c := range w.Containers() {
			for _, e := range c.Env {
				if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
					continue
				}
				ref := e.ValueFrom.SecretKeyRef
				require.Equal(t, tmpl.Name, ref.Name, "%s %s refers to the Secret the template describes", w.ID(), e.Name)
				used[ref.Key] = true
				if !isTrue(ref.Optional) {
					require.Contains(t, tmpl.StringData, ref.Key, "%s needs key %s: the template lists it", w.ID(), ref.Key)
				}
			}
		}
	}
	for k := range tmpl.StringData {
		if why, ok := replacedInProd[k]; ok {
			t.Logf("template key %s: %s", k, why)
			continue
		}
		require.True(t, used[k], "template key %s is used by some workload", k)
	}
}

func TestNetworkPoliciesDefaultDeny(t *testing.T) {
	for _, ov := range overlays {
		t.Run(ov, func(t *testing.T) {
			pols := check.Of[*networkingv1.NetworkPolicy](rendered(t, ov))
			found := false
			for _, p := range pols {
				if len(p.Spec.PodSelector.MatchLabels) == 0 && len(p.Spec.PodSelector.MatchExpressions) == 0 &&
					len(p.Spec.Ingress) == 0 && len(p.Spec.Egress) == 0 &&
					hasBoth(p.Spec.PolicyTypes) {
					found = true
				}
			}
			require.True(t, found, "a default-deny policy: every pod, Ingress and Egress, no rules")
		})
	}
}

func hasBoth(types []networkingv1.PolicyType) bool {
	var in, eg bool
	for _, t := range types {
		in = in || t == networkingv1.PolicyTypeIngress
		eg = eg || t == networkingv1.PolicyTypeEgress
	}
	return in && eg
}

// GOMEMLIMIT sits below the container's memory limit, so the garbage
// collector works before the kernel's OOM killer does.
func TestGoMemLimitBelowContainerLimit(t *testing.T) {
	checked := 0
	for _, ov := range overlays {
		for _, w := range check.Workloads(rendered(t, ov)) {
			for _, c := range w.Containers() {
				for _, e := range c.Env {
					if e.Name != "GOMEMLIMIT" {
						continue
					}
					require.True(t, strings.HasSuffix(e.Value, "MiB"), "%s %s: GOMEMLIMIT %q in MiB", ov, w.ID(), e.Value)
					mib, err := strconv.ParseInt(strings.TrimSuffix(e.Value, "MiB"), 10, 64)
					require.NoError(t, err)
					limit := c.Resources.Limits.Memory()
					require.False(t, limit.IsZero(), "%s %s has a memory limit", ov, w.ID())
					require.LessOrEqual(t, float64(mib<<20), 0.9*float64(limit.Value()),
						"%s %s: GOMEMLIMIT %s is over 90 %% of the %s limit", ov, w.ID(), e.Value, limit.String())
					checked++
				}
			}
		}
	}
	require.GreaterOrEqual(t, checked, 10, "every Go workload of both overlays sets GOMEMLIMIT")
}
