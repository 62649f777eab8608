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
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("version takes no arguments")
	}
	_, err := fmt.Fprintf(stdout, "bmcisctl %s (commit %s)\n", version.Version, version.Commit)
	return err
}
