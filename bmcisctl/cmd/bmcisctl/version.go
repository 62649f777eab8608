package main

import (
	"context"
	"fmt"
	"io"

	"github.com/bmcis/knowledge/platform/version"
)

func init() {
	commands["version"] = command{summary: "print the build's version and commit", run: runVersion}
}

// runVersion prints what the linker stamped, so an operator can match the
// tool to the services' bmcis_build_info.
func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("version", stderr)
	output := outputFlag(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("version takes no arguments")
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	res := struct {
		Version string `json:"version"`
		Commit  string `json:"commit"`
	}{version.Version, version.Commit}
	return writeResult(stdout, *output, res, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "bmcisctl %s (commit %s)\n", res.Version, res.Commit)
		return err
	})
}
