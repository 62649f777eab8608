// Command render prints the manifests of a kustomization, as
// `kubectl kustomize DIR` would, without kubectl:
//
//	cd deploy/check && GOWORK=off go run ./cmd/render prod
//
// The argument is an overlay name (dev, prod) or a kustomization directory.
// Every object is also decoded strictly with client-go's scheme first, so a
// typo in a field name fails here rather than at `kubectl apply`.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/bmcis/knowledge/deploy/check"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: render OVERLAY|DIR   (OVERLAY: dev or prod)")
		os.Exit(2)
	}
	dir := os.Args[1]
	if _, err := os.Stat(dir); err != nil {
		root, rerr := check.RepoRoot()
		if rerr != nil {
			fmt.Fprintln(os.Stderr, "render:", rerr)
			os.Exit(1)
		}
		dir = filepath.Join(root, "deploy", "k8s", "overlays", os.Args[1])
	}
	if _, err := check.Render(dir); err != nil {
		fmt.Fprintln(os.Stderr, "render:", err)
		os.Exit(1)
	}
	y, err := check.Build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "render:", err)
		os.Exit(1)
	}
	_, _ = os.Stdout.Write(y)
}
