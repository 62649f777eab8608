package check_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/bmcis/knowledge/deploy/check"
)

// The optional components (Redis, embedder and sources egress) on top of the prod
// overlay, as an operator would add them in their own kustomization.
func TestOptionalComponentsOnProd(t *testing.T) {
	k8s := filepath.Join(repoRoot(t), "deploy", "k8s")
	dir := t.TempDir()
	rel := func(p ...string) string { // kustomize takes relative paths only
		r, err := filepath.Rel(dir, filepath.Join(append([]string{k8s}, p...)...))
		require.NoError(t, err)
		return r
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: bmcis # a component added outside the overlay needs the namespace again
resources:
  - `+rel("overlays", "prod")+`
components: # prod already includes components/redis
  - `+rel("components", "embedder-egress")+`
  - `+rel("components", "sources-egress")+`
`), 0o644))
	objs, err := check.Render(dir)
	require.NoError(t, err)

	var auth, redis *appsv1.Deployment
	for _, d := range check.Of[*appsv1.Deployment](objs) {
		switch d.Name {
		case "auth":
			auth = d
		case "redis":
			redis = d
		}
	}
	require.NotNil(t, redis, "the redis component adds Redis")
	require.Equal(t, "bmcis", redis.Namespace)
	var redisURL *corev1.EnvVar
	for i, e := range auth.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "REDIS_URL" {
			redisURL = &auth.Spec.Template.Spec.Containers[0].Env[i]
		}
	}
	require.NotNil(t, redisURL)
	require.Equal(t, "redis://redis:6379/0", redisURL.Value)
	require.Nil(t, redisURL.ValueFrom, "the component replaces the optional Secret reference")

	net, pods, ns := network(t, objs)
	for _, f := range []flow{
		tcp("auth", "redis", 6379, true),
		tcp("search", "redis", 6379, false),
		tcp("mcp-adapter", "redis", 6379, false),
		tcp("search", "ext:"+internetHost.String(), 443, true), // embedder egress
		tcp("search", "ext:10.1.2.3", 443, false),              // not to private ranges
		tcp("gateway", "ext:"+internetHost.String(), 443, false),
		tcp("mcp-adapter", "search", 50051, true),
	} {
		require.Equal(t, f.allowed, net.Allowed(endpoint(t, f.from, pods, ns), endpoint(t, f.to, pods, ns), f.port, f.proto),
			"%s -> %s:%d", f.from, f.to, f.port)
	}

	// The component's Redis meets the same container policy.
	c := redis.Spec.Template.Spec.Containers[0]
	require.NotNil(t, c.ReadinessProbe)
	require.NotNil(t, c.LivenessProbe)
	require.True(t, isTrue(c.SecurityContext.ReadOnlyRootFilesystem))
	require.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop)
	require.True(t, isTrue(redis.Spec.Template.Spec.SecurityContext.RunAsNonRoot))
	_, tag := check.SplitImage(c.Image)
	require.NotEmpty(t, tag)
}
