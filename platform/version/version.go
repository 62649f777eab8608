// Package version holds the build's version, stamped by the linker
// (-X github.com/bmcis/knowledge/platform/version.Version=...).
package version

// Version is the release or commit this binary was built from.
var Version = "dev"

// Commit is the source revision this binary was built from.
var Commit = "unknown"
