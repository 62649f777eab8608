// Command bmcisctl is the operators' tool: database migrations, health checks,
// ingestion, deletion, reindexing, search, evaluation, keys and graph import.
// It is a module of its own that reaches every service only through its gRPC
// contract (gen/) and the shared platform/ packages, never through a
// service's packages or tables; only `migrate` opens the database.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/bmcis/knowledge/platform/config"
)

// command is one subcommand.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
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

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "bmcisctl: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	if err := cmd.run(ctx, args[1:], stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "bmcisctl %s: %v\n", args[0], err)
		if errors.Is(err, errUsage) {
			return 2
		}
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: bmcisctl COMMAND [flags]")
	fmt.Fprintln(w)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun `bmcisctl COMMAND -h` for a command's flags.")
}

// newFlags returns a flag set that reports errors instead of exiting.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("bmcisctl "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parse parses flags, turning a bad flag into errUsage.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return nil
}

// usageErrorf builds a usage error.
func usageErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

// envOr returns the environment variable or def.
// envOr returns the variable's value, else the credentials file's value for
// it (see credentials.go), else def.
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

func envOr(name, def string) string {
	if v, ok := cliLookup(name); ok {
		return v
	}
	return def
}
