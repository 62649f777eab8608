package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/spf13/pflag"
)

// shorthands are the one-letter forms of the flags operators type most,
// the same letter for the same meaning on every command.
var shorthands = map[string]string{
	"addr":   "a",
	"output": "o",
	"quiet":  "q",
	"watch":  "w",
	"limit":  "n",
	"mode":   "m",
}

// errParsedOnly stops a command right after its flags parsed (captureFlags).
var errParsedOnly = errors.New("flags parsed; not run")

// captureFlags, when set, receives a command's flags and positional
// arguments once they parse, and the command stops there (errParsedOnly):
// completion lists the flags this way, and the docs test checks that a
// documented command line parses, without running either.
var captureFlags func(fs *pflag.FlagSet, args []string)

// gnuFlags is fs seen GNU style: the same flags (and values), with
// --name, -x shorthands and flags anywhere among the arguments.
func gnuFlags(fs *flag.FlagSet) *pflag.FlagSet {
	pfs := pflag.NewFlagSet(fs.Name(), pflag.ContinueOnError)
	pfs.SetOutput(io.Discard)
	taken := map[string]bool{}
	fs.VisitAll(func(gf *flag.Flag) {
		if len(gf.Name) == 1 {
			taken[gf.Name] = true
		}
	})
	fs.VisitAll(func(gf *flag.Flag) {
		f := pflag.PFlagFromGoFlag(gf)
		f.Value = setThrough{Value: f.Value, fs: fs, name: gf.Name}
		if short, ok := shorthands[gf.Name]; ok && !taken[short] {
			f.Shorthand = short
			taken[short] = true
		}
		pfs.AddFlag(f)
	})
	pfs.SetInterspersed(true)
	return pfs
}

// setThrough sets a flag through its standard flag set, so that set
// records it and flag.Visit (flagGiven) sees every flag the line gave.
type setThrough struct {
	pflag.Value
	fs   *flag.FlagSet
	name string
}

func (v setThrough) Set(s string) error { return v.fs.Set(v.name, s) }

// negativeArg marks a positional argument that looks like a shorthand
// flag (migrate down -1), so pflag passes it on; parse removes the mark.
const negativeArg = "\x00"

var negativeNumber = regexp.MustCompile(`^-[0-9][0-9.]*$`)

// normalizeArgs rewrites the single-dash long forms older scripts use
// (-watch, -max-file-bytes=5) to --watch, so they keep working; a single
// letter after one dash stays a shorthand, "-" stays stdin, and a negative
// number that is not a flag's value stays an argument.
func normalizeArgs(pfs *pflag.FlagSet, args []string) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		switch {
		case negativeNumber.MatchString(a) && (i == 0 || !takesValue(pfs, args[i-1])):
			a = negativeArg + a
		case len(a) > 2 && a[0] == '-' && a[1] != '-':
			name, _, _ := strings.Cut(a[1:], "=")
			if len(name) > 1 && (pfs.Lookup(name) != nil || name == "help") {
				a = "-" + a
			}
		}
		out = append(out, a)
	}
	return out
}

// takesValue reports whether word is a flag whose value is the next word.
func takesValue(pfs *pflag.FlagSet, word string) bool {
	if !strings.HasPrefix(word, "-") || strings.Contains(word, "=") {
		return false
	}
	name := strings.TrimLeft(word, "-")
	f := pfs.Lookup(name)
	if f == nil && len(name) == 1 {
		f = pfs.ShorthandLookup(name)
	}
	return f != nil && f.NoOptDefVal == ""
}

// parse reads a command's flags GNU style and leaves the positional
// arguments in fs (fs.Args, fs.NArg, fs.Arg), so commands written against
// the standard flag package read them as before. A bad flag is errUsage;
// -h or --help prints the command's help and is flag.ErrHelp.
func parse(fs *flag.FlagSet, args []string) error {
	pfs := gnuFlags(fs)
	if err := pfs.Parse(normalizeArgs(pfs, args)); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			if captureFlags != nil {
				captureFlags(pfs, pfs.Args())
				return errParsedOnly
			}
			printCommandHelp(fs, pfs)
			return flag.ErrHelp
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	pos := make([]string, 0, pfs.NArg())
	for _, a := range pfs.Args() {
		pos = append(pos, strings.TrimPrefix(a, negativeArg))
	}
	if captureFlags != nil {
		captureFlags(pfs, pos)
		return errParsedOnly
	}
	return fs.Parse(append([]string{"--"}, pos...))
}

// printCommandHelp prints the command's own usage text (fs.Usage, whose
// flag list it replaces with the GNU forms), then its examples.
func printCommandHelp(fs *flag.FlagSet, pfs *pflag.FlagSet) {
	w := fs.Output()
	name := strings.TrimPrefix(fs.Name(), "bmcisctl ")
	if fs.Usage != nil && !isDefaultUsage(fs) {
		// The command's text, without its own flag list (PrintDefaults).
		var b strings.Builder
		fs.SetOutput(&b)
		saved := fs.Usage
		fs.Usage()
		fs.Usage = saved
		fs.SetOutput(w)
		text := b.String()
		var defaults strings.Builder
		fs.SetOutput(&defaults)
		fs.PrintDefaults()
		fs.SetOutput(w)
		if d := defaults.String(); d != "" {
			text = strings.Replace(text, d, "", 1)
		}
		fmt.Fprint(w, text)
	} else {
		fmt.Fprintf(w, "usage: bmcisctl %s [flags]\n", name)
	}
	if u := pfs.FlagUsages(); u != "" {
		fmt.Fprintf(w, "\nFlags (anywhere on the line; the old single-dash forms like -%s work too):\n%s", firstLong(pfs), u)
	}
	if ex := commandExamples(name); len(ex) > 0 {
		fmt.Fprintln(w, "\nExamples:")
		for _, e := range ex {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
	fmt.Fprintf(w, "\nExit codes: %s\n", exitCodeSummary)
}

// isDefaultUsage reports whether the command kept the flag package's
// default usage (no text of its own).
func isDefaultUsage(fs *flag.FlagSet) bool { return fs.Usage == nil }

func firstLong(pfs *pflag.FlagSet) string {
	name := "quiet"
	pfs.VisitAll(func(f *pflag.Flag) {
		if name == "quiet" && len(f.Name) > 1 {
			name = f.Name
		}
	})
	return name
}
