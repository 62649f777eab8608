package check_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/bmcis/knowledge/deploy/check"
)

// The optional components (Redis, embedder and sources egress, backups) on
// top of the prod overlay, as an operator would add them in their own
// kustomization (prodWithComponents).
func TestOptionalComponentsOnProd(t *testing.T) {
	objs := rendered(t, prodWithComponents)

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
		// components/backup: PostgreSQL and DNS, nothing else.
		tcp("bmcis-backup", "ext:"+externalDB.String(), 5432, true),
		tcp("bmcis-backup", "kube-dns", 53, true),
		tcp("bmcis-backup", "ext:"+internetHost.String(), 443, false),
		tcp("bmcis-backup", "search", 50051, false),
		tcp("bmcis-backup", "auth", 50053, false),
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

// components/backup: a nightly `bmcisctl backup --force` of the release's
// bmcisctl, as the read-only backup login, to a file on its claim. The
// container policy, Secret, environment and network checks cover it with
// every other workload (prodWithComponents).
func TestBackupComponent(t *testing.T) {
	objs := rendered(t, prodWithComponents)
	cronJobs := check.Of[*batchv1.CronJob](objs)
	require.Len(t, cronJobs, 1)
	cj := cronJobs[0]
	require.Equal(t, "bmcis", cj.Namespace)
	require.Equal(t, batchv1.ForbidConcurrent, cj.Spec.ConcurrencyPolicy, "one backup at a time: two would race for the file")
	require.NotNil(t, cj.Spec.JobTemplate.Spec.ActiveDeadlineSeconds, "a stuck backup fails instead of hanging")
	require.NotNil(t, cj.Spec.JobTemplate.Spec.BackoffLimit)

	pod := cj.Spec.JobTemplate.Spec.Template
	require.Equal(t, corev1.RestartPolicyNever, pod.Spec.RestartPolicy)
	require.Equal(t, "bmcis-migrate", pod.Labels["app.kubernetes.io/name"], "the name database-egress lets reach PostgreSQL")
	require.Len(t, pod.Spec.Containers, 1)
	c := pod.Spec.Containers[0]
	jobs := check.Of[*batchv1.Job](objs)
	require.Len(t, jobs, 1)
	require.Equal(t, jobs[0].Spec.Template.Spec.Containers[0].Image, c.Image, "the release's bmcisctl, as the migration Job runs")
	require.Empty(t, c.Command, "the image's ENTRYPOINT (no shell)")
	require.Equal(t, []string{"backup", "--force", "/backups/bmcis-latest.backup"}, c.Args)

	// The read-only login only: never the migration role's URL.
	require.Len(t, c.Env, 1)
	require.Empty(t, c.EnvFrom)
	e := c.Env[0]
	require.Equal(t, "BMCIS_BACKUP_DATABASE_URL", e.Name)
	require.NotNil(t, e.ValueFrom)
	require.NotNil(t, e.ValueFrom.SecretKeyRef)
	require.Equal(t, "bmcis-secrets", e.ValueFrom.SecretKeyRef.Name)
	require.Equal(t, "BMCIS_BACKUP_DATABASE_URL", e.ValueFrom.SecretKeyRef.Key)
	require.False(t, isTrue(e.ValueFrom.SecretKeyRef.Optional), "without it, bmcisctl would not run as the backup login")

	// The file's directory is the claim the component creates.
	require.Len(t, c.VolumeMounts, 1)
	require.Equal(t, "/backups", c.VolumeMounts[0].MountPath)
	require.False(t, c.VolumeMounts[0].ReadOnly)
	var claim string
	for _, v := range pod.Spec.Volumes {
		if v.Name == c.VolumeMounts[0].Name && v.PersistentVolumeClaim != nil {
			claim = v.PersistentVolumeClaim.ClaimName
		}
	}
	pvcs := check.Of[*corev1.PersistentVolumeClaim](objs)
	require.Len(t, pvcs, 1)
	require.Equal(t, pvcs[0].Name, claim)
	require.Equal(t, "bmcis", pvcs[0].Namespace)
	require.NotNil(t, pod.Spec.SecurityContext.FSGroup, "the claim is writable by the image's user")
}
