// Package check renders the Kubernetes manifests in deploy/k8s with the
// kustomize API, decodes them strictly with client-go's scheme, and holds the
// helpers the deploy checks share (repository paths, Dockerfile parsing,
// network-policy evaluation). Its tests are `make deploy-check`.
package check

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// RepoRoot finds the repository root (the directory holding go.work) from the
// working directory upwards.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.work found above the working directory")
		}
		dir = parent
	}
}

// Object is one rendered resource: its YAML and the typed object it decodes to.
type Object struct {
	GVK  schema.GroupVersionKind
	Name string
	// Namespace is the rendered namespace ("" for cluster-scoped objects).
	Namespace string
	YAML      []byte
	Obj       runtime.Object
}

// ID names the object in messages: Kind/namespace/name.
func (o Object) ID() string { return fmt.Sprintf("%s/%s/%s", o.GVK.Kind, o.Namespace, o.Name) }

// kustomize runs the kustomize API the way `kubectl kustomize DIR` and the
// kustomize CLI do: files only from within the kustomization root, objects in
// the legacy order (namespaces first, so `kubectl apply` creates them first).
func kustomize(dir string) (resmap.ResMap, error) {
	opts := krusty.MakeDefaultOptions()
	opts.LoadRestrictions = types.LoadRestrictionsRootOnly
	opts.Reorder = krusty.ReorderOptionLegacy
	m, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	return m, nil
}

// Build renders a kustomization directory and returns the YAML stream, as
// `kubectl kustomize DIR` prints it.
func Build(dir string) ([]byte, error) {
	m, err := kustomize(dir)
	if err != nil {
		return nil, err
	}
	return m.AsYaml()
}

// Render builds dir and strictly decodes every object.
func Render(dir string) ([]Object, error) {
	m, err := kustomize(dir)
	if err != nil {
		return nil, err
	}
	var out []Object
	for _, r := range m.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.CurId(), err)
		}
		obj, gvk, err := DecodeStrict(y)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.CurId(), err)
		}
		out = append(out, Object{GVK: *gvk, Name: r.GetName(), Namespace: r.GetNamespace(), YAML: y, Obj: obj})
	}
	return out, nil
}

var strictYAML = json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
	json.SerializerOptions{Yaml: true, Strict: true})

// DecodeStrict decodes one YAML document into its typed object with
// client-go's scheme. Unknown fields, duplicate fields and kinds the scheme
// does not know are errors.
func DecodeStrict(y []byte) (runtime.Object, *schema.GroupVersionKind, error) {
	obj, gvk, err := strictYAML.Decode(bytes.TrimSpace(y), nil, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("strict decode: %w", err)
	}
	return obj, gvk, nil
}
