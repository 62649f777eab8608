package check

import (
	"path"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// Workload is anything that runs pods: a Deployment, StatefulSet, Job or
// CronJob (its jobs' pod template).
type Workload struct {
	Kind, Name, Namespace string
	// Replicas is the fixed replica count (nil when unset or for a job).
	Replicas *int32
	Template corev1.PodTemplateSpec
}

// ID names the workload in messages.
func (w Workload) ID() string { return w.Kind + "/" + w.Namespace + "/" + w.Name }

// RunsToCompletion reports a Job or CronJob: pods that end, which no
// Service routes to and nothing probes.
func (w Workload) RunsToCompletion() bool { return w.Kind == "Job" || w.Kind == "CronJob" }

// Containers returns the init containers and the containers.
func (w Workload) Containers() []corev1.Container {
	return append(append([]corev1.Container{}, w.Template.Spec.InitContainers...), w.Template.Spec.Containers...)
}

// Workloads lists the objects that run pods.
func Workloads(objs []Object) []Workload {
	var out []Workload
	for _, o := range objs {
		switch v := o.Obj.(type) {
		case *appsv1.Deployment:
			out = append(out, Workload{Kind: "Deployment", Name: v.Name, Namespace: v.Namespace, Replicas: v.Spec.Replicas, Template: v.Spec.Template})
		case *appsv1.StatefulSet:
			out = append(out, Workload{Kind: "StatefulSet", Name: v.Name, Namespace: v.Namespace, Replicas: v.Spec.Replicas, Template: v.Spec.Template})
		case *batchv1.Job:
			out = append(out, Workload{Kind: "Job", Name: v.Name, Namespace: v.Namespace, Template: v.Spec.Template})
		case *batchv1.CronJob:
			out = append(out, Workload{Kind: "CronJob", Name: v.Name, Namespace: v.Namespace, Template: v.Spec.JobTemplate.Spec.Template})
		}
	}
	return out
}

// Of returns the objects of type T.
func Of[T any](objs []Object) []T {
	var out []T
	for _, o := range objs {
		if v, ok := o.Obj.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// SplitImage splits "registry/path/name:tag" into the repository and the tag
// (empty when absent; digests are kept in the repository part).
func SplitImage(image string) (repo, tag string) {
	if at := strings.Index(image, "@"); at >= 0 {
		return image, ""
	}
	slash := strings.LastIndex(image, "/")
	colon := strings.LastIndex(image, ":")
	if colon > slash {
		return image[:colon], image[colon+1:]
	}
	return image, ""
}

// ImageBinary returns the binary a BMCIS image runs: the last element of its
// repository (registry.example.com/bmcis/search -> search).
func ImageBinary(image string) string {
	repo, _ := SplitImage(image)
	return path.Base(repo)
}
