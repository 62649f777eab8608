package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// newRoot builds the command tree: cobra gives the dispatcher, `help`,
// "did you mean" for a mistyped command and shell completion; each command
// parses its own flags (parse, GNU style), so cobra hands it every argument.
func newRoot(ctx context.Context, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "bmcisctl",
		Short: "the operators' tool of BMCIS Knowledge",
		Long: "bmcisctl is the operators' tool of BMCIS Knowledge: migrations, ingestion, search, keys, the vendor graph.\n" +
			"Flags go anywhere on the line, GNU style (--watch, -w); the old single-dash forms (-watch) work too.\n" +
			"Exit codes: " + exitCodeSummary,
		SilenceErrors:              true,
		SilenceUsage:               true,
		SuggestionsMinimumDistance: 2,
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.SetOut(stderr)
			_ = cmd.Help()
			return usageErrorf("give a command")
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetContext(ctx)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return fmt.Errorf("%w: %v", errUsage, err) })
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		c := commands[name]
		sub := &cobra.Command{
			Use:                name,
			Short:              c.summary,
			Example:            "  " + strings.Join(examples[name], "\n  "),
			DisableFlagParsing: true,
			SilenceErrors:      true,
			SilenceUsage:       true,
			RunE: func(cmd *cobra.Command, args []string) error {
				return c.run(cmd.Context(), args, stdout, stderr)
			},
			ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
				return completeCommand(cmd.Context(), c, args, toComplete)
			},
		}
		// `bmcisctl help NAME` is NAME --help: the command's own text,
		// flags and examples.
		sub.SetHelpFunc(func(cmd *cobra.Command, _ []string) {
			_ = c.run(ctx, []string{"--help"}, stdout, stdout)
		})
		root.AddCommand(sub)
	}
	return root
}

// commandExamples returns the examples of a command ("keys create" gets
// those of keys that name it).
func commandExamples(name string) []string {
	top, rest, _ := strings.Cut(name, " ")
	ex := examples[top]
	if rest == "" {
		return ex
	}
	var out []string
	for _, e := range ex {
		if strings.Contains(e, "bmcisctl "+name) {
			out = append(out, e)
		}
	}
	return out
}

// completeCommand offers a command's flag names when a flag is being typed,
// else the values its complete function finds on the running services.
func completeCommand(ctx context.Context, c command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if strings.HasPrefix(toComplete, "-") {
		var out []cobra.Completion
		for _, f := range commandFlags(ctx, c, args) {
			if strings.HasPrefix("--"+f.Name, toComplete) {
				out = append(out, cobra.CompletionWithDesc("--"+f.Name, f.Usage))
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
	if c.complete == nil {
		return nil, cobra.ShellCompDirectiveDefault
	}
	// The services may be away: completion waits a moment, never long.
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var out []cobra.Completion
	for _, v := range c.complete(cctx, withoutFlags(args)) {
		if strings.HasPrefix(v, toComplete) {
			out = append(out, v)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// commandFlags returns the flags a command defines for these arguments
// (a command with subcommands defines them per subcommand), by running it
// only as far as its flags parse.
func commandFlags(ctx context.Context, c command, args []string) []*pflag.Flag {
	var flags []*pflag.Flag
	parsedOnly(ctx, c, args, func(fs *pflag.FlagSet, _ []string) {
		fs.VisitAll(func(f *pflag.Flag) { flags = append(flags, f) })
	})
	return flags
}

// withoutFlags drops the words that are flags (a flag's separate value
// stays; completion only needs the subcommand and the count).
func withoutFlags(args []string) []string {
	var out []string
	for _, a := range args {
		if !strings.HasPrefix(a, "-") || a == "-" {
			out = append(out, a)
		}
	}
	return out
}

// subcommands completes the first argument of a command with subcommands.
func subcommands(names ...string) func(context.Context, []string) []string {
	return func(_ context.Context, args []string) []string {
		if len(args) == 0 {
			return names
		}
		return nil
	}
}

// parsedOnly runs c on args until its flags parse, handing them to fn.
func parsedOnly(ctx context.Context, c command, args []string, fn func(*pflag.FlagSet, []string)) {
	captureFlags = fn
	defer func() { captureFlags = nil }()
	err := c.run(ctx, args, io.Discard, io.Discard)
	if err != nil && !errors.Is(err, errParsedOnly) && !errors.Is(err, flag.ErrHelp) {
		return
	}
}
