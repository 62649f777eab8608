// Command bmcisctl is the operators' tool: database migrations, backup and
// restore, health checks, ingestion, deletion, reindexing, search,
// evaluation, keys and graph import.
// It is a module of its own that reaches every service only through its gRPC
// contract (gen/) and the shared platform/ packages, never through a
// service's packages or tables; only `migrate`, `backup` and `restore` open
// the database (platform/backup reads and writes the schemas whole).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/bmcis/knowledge/platform/config"
)

// command is one subcommand.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
	// complete, when set, offers values for the positional argument being
	// typed after args (source names, key ids) from the running services.
	complete func(ctx context.Context, args []string) []string
}

// commands lists the subcommands; each file of this package adds its own.
var commands = map[string]command{}

// errUsage marks a usage mistake: the message is printed and the exit code is 2.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first interrupt cancels ctx (a command stops cleanly); then the
	// default handling comes back, so a second one ends a command stuck
	// where it cannot see ctx (a blocking read).
	go func() { <-ctx.Done(); stop() }()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns its exit code (exitcodes.go).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(ctx, stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	return exitCode(cmd, err, stderr)
}

// newFlags returns a flag set that reports errors instead of exiting. The
// command defines its flags on it with the standard flag package; parse
// reads them GNU style (flagstyle.go).
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("bmcisctl "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// flagGiven reports whether the command line set the flag (even to its
// default or to nothing).
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// usageErrorf builds a usage error.
func usageErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

// cliLookup finds a setting in the environment first, then in the
// credentials file (`make run` writes DATABASE_URL and the tokens there).
func cliLookup(name string) (string, bool) {
	if v := strings.TrimSpace(os.Getenv(name)); v != "" {
		return v, true
	}
	return fromFile(name)
}

// cliEnv reads typed settings through cliLookup.
func cliEnv() *config.Reader { return config.FromLookup(cliLookup) }

// envOr returns the variable's value, else the credentials file's value for
// it (see credentials.go), else def.
func envOr(name, def string) string {
	if v, ok := cliLookup(name); ok {
		return v
	}
	return def
}
