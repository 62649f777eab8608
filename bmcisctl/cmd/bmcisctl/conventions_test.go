package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/bmcis/knowledge/platform/stacktest"
)

// parsedAs runs a command line only as far as its flags parse and returns
// the flags set and the positional arguments (nil flags: it did not parse).
func parsedAs(t *testing.T, args ...string) (map[string]string, []string) {
	t.Helper()
	c, ok := commands[args[0]]
	require.True(t, ok, "no command %q", args[0])
	var set map[string]string
	var pos []string
	parsedOnly(context.Background(), c, args[1:], func(fs *pflag.FlagSet, p []string) {
		set = map[string]string{}
		fs.Visit(func(f *pflag.Flag) { set[f.Name] = f.Value.String() })
		pos = p
	})
	return set, pos
}

// Flags go anywhere, GNU style (--watch, -w), and the old single-dash long
// forms keep working, on every command.
func TestFlagsAnywhereInEveryStyle(t *testing.T) {
	for _, line := range [][]string{
		{"sync", "handbook", "/docs", "-watch"},
		{"sync", "handbook", "/docs", "--watch"},
		{"sync", "handbook", "/docs", "-w"},
		{"sync", "-watch", "handbook", "/docs"},
		{"sync", "handbook", "--watch=true", "/docs"},
	} {
		set, pos := parsedAs(t, line...)
		require.NotNil(t, set, "%v does not parse", line)
		require.Equal(t, "true", set["watch"], "%v", line)
		require.Equal(t, []string{"handbook", "/docs"}, pos, "%v", line)
	}
	set, pos := parsedAs(t, "search", "mfa", "rollout", "-mode", "bm25", "--limit=3", "-category", "security", "--category", "cloud")
	require.Equal(t, "bm25", set["mode"])
	require.Equal(t, "3", set["limit"])
	require.Equal(t, "security,cloud", set["category"], "a repeated flag keeps every value")
	require.Equal(t, []string{"mfa", "rollout"}, pos)
	set, pos = parsedAs(t, "search", "-m", "vector", "x", "-n", "5")
	require.Equal(t, map[string]string{"mode": "vector", "limit": "5"}, set)
	require.Equal(t, []string{"x"}, pos)
	set, pos = parsedAs(t, "keys", "list", "--owner", "ops", "-q")
	require.Equal(t, map[string]string{"owner": "ops", "q": "true"}, set)
	require.Empty(t, pos)
	// "--" ends the flags; "-" is an argument (stdin).
	set, pos = parsedAs(t, "graph", "import", "-", "--quiet")
	require.Equal(t, "true", set["quiet"])
	require.Equal(t, []string{"-"}, pos)
	_, pos = parsedAs(t, "delete", "--", "-odd-id")
	require.Equal(t, []string{"-odd-id"}, pos)

	code, _, errOut := ctlRun(t, "sync", "handbook", "/docs", "--no-such-flag")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "unknown flag: --no-such-flag")
}

// help lists the commands; COMMAND --help and help COMMAND show the
// command's flags (GNU forms) and examples; a mistyped command gets a
// suggestion.
func TestHelpAndSuggestions(t *testing.T) {
	code, out, _ := ctlRun(t, "help")
	require.Equal(t, 0, code)
	for n := range commands {
		require.Contains(t, out, "\n  "+n+" ", "help lists %s", n)
	}
	require.Contains(t, out, "completion")
	for _, args := range [][]string{{"sync", "--help"}, {"sync", "-h"}, {"sync", "-help"}, {"help", "sync"}} {
		code, out, errOut := ctlRun(t, args...)
		require.Equal(t, 0, code, "%v", args)
		text := out + errOut
		require.Contains(t, text, "usage: bmcisctl sync", "%v", args)
		require.Contains(t, text, "-w, --watch", "%v", args)
		require.Contains(t, text, "Examples:\n  bmcisctl sync handbook ~/Documents/handbook", "%v", args)
		require.Contains(t, text, "Exit codes: 0 done", "%v", args)
	}
	for n := range commands {
		require.NotEmpty(t, examples[n], "%s has examples", n)
	}
	code, _, errOut := ctlRun(t, "snyc", "handbook", ".")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "unknown command \"snyc\"")
	require.Contains(t, errOut, "Did you mean this?\n\tsync")
	code, _, errOut = ctlRun(t)
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "Available Commands:")
}

// ingest's help names every field a JSON Lines record may carry (access
// included: ACCESS.md's way to give a record its list) and the exit code
// a failed document gives, 5 (partial), not the 1 it once claimed.
func TestIngestHelpSaysRecordFieldsAndExitCode(t *testing.T) {
	code, out, errOut := ctlRun(t, "help", "ingest")
	require.Equal(t, 0, code)
	text := out + errOut
	for _, want := range []string{`"_id"|"id"`, `"title"`, `"text"`, `"category"?`, `"updated_at"?`, `"access"?`, "exit status is 5"} {
		require.Contains(t, text, want)
	}
	require.NotContains(t, text, "exit status is 1")
}

// Completion scripts for bash, zsh and fish; command and flag names
// complete offline.
func TestCompletionScriptsAndNames(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish"} {
		code, out, errOut := ctlRun(t, "completion", sh)
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, "bmcisctl", sh)
	}
	code, out, _ := ctlRun(t, "__complete", "sy")
	require.Equal(t, 0, code)
	require.Contains(t, out, "sync\t")
	code, out, _ = ctlRun(t, "__complete", "sync", "handbook", "--w")
	require.Equal(t, 0, code)
	require.Contains(t, out, "--watch\t")
	_, out, _ = ctlRun(t, "__complete", "keys", "")
	require.Contains(t, out, "rotate\n")
	_, out, _ = ctlRun(t, "__complete", "keys", "create", "--exp")
	require.Contains(t, out, "--expires-in\t")
}

// The exit codes mean the same on every command: usage, refused,
// unavailable, partial.
func TestExitCodes(t *testing.T) {
	ctlServer(t)
	docs := t.TempDir()
	ctlWrite(t, docs, "a.md", "# A\n\nAbout walruses.\n")
	ctlWrite(t, docs, "broken.md", "binary\x00junk")

	code, _, _ := ctlRun(t, "delete")
	require.Equal(t, exitUsage, code)
	code, _, errOut := ctlRun(t, "ingest", "-q", docs)
	require.Equal(t, exitPartial, code, errOut)
	code, _, errOut = ctlRun(t, "delete", "a.md", "no-such.md")
	require.Equal(t, exitPartial, code, errOut)
	code, _, errOut = ctlRun(t, "delete", "no-such.md")
	require.Equal(t, exitPartial, code, errOut)

	t.Setenv("BMCIS_INGEST_TOKEN", ctlToken) // the read credential: refused
	code, _, errOut = ctlRun(t, "reindex")
	require.Equal(t, exitRefused, code, errOut)
	code, _, errOut = ctlRun(t, "delete", "a.md")
	require.Equal(t, exitRefused, code, errOut)

	// Port 1 on loopback answers nothing (connection refused at once).
	code, _, errOut = ctlRun(t, "sources", "--addr", "127.0.0.1:1")
	require.Equal(t, exitUnavailable, code, errOut)

	// A URL where HOST:PORT belongs is a usage error at once, not a
	// service "unavailable" after three dial attempts.
	for _, line := range [][]string{
		{"search", "x", "--addr", "http://127.0.0.1:50051"},
		{"sources", "-a", "https://kb.example.com"},
		{"health", "http://127.0.0.1:50051"},
		{"graph", "status", "--addr", "http://127.0.0.1:50052"},
	} {
		code, _, errOut = ctlRun(t, line...)
		require.Equal(t, exitUsage, code, "%v: %s", line, errOut)
		require.Contains(t, errOut, "HOST:PORT", "%v", line)
	}
	// An HTTP/1.x port (the gateway's, a metrics one) where a gRPC service
	// belongs is a usage error too, named as such, not "unavailable".
	web := httptest.NewServer(http.NotFoundHandler())
	defer web.Close()
	code, _, errOut = ctlRun(t, "health", web.Listener.Addr().String())
	require.Equal(t, exitUsage, code, errOut)
	require.Contains(t, errOut, "not a gRPC address")
	require.NotContains(t, errOut, "frame too large")
	t.Setenv("BMCIS_AUTH_ADDR", "https://127.0.0.1:50053/")
	code, _, errOut = ctlRun(t, "keys", "list")
	require.Equal(t, exitUsage, code, errOut)
	require.Contains(t, errOut, "HOST:PORT")
}

// -o table|json|yaml means the same on every listing and result command;
// JSON is one object per line.
func TestOutputFormats(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{})
	for k, v := range s.ClientEnv() {
		t.Setenv(k, v)
	}
	docs := t.TempDir()
	ctlWrite(t, docs, "security/a.md", "# Incident\n\nReport a suspected incident to the security desk at once.\n")
	code, _, errOut := ctlRun(t, "sync", "handbook", docs)
	require.Equal(t, 0, code, errOut)
	code, _, errOut = ctlRun(t, "sync", "wiki", docs)
	require.Equal(t, 0, code, errOut)

	code, out, errOut := ctlRun(t, "sources", "-o", "json")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, "one object per source, one per line")
	var src map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &src))
	require.Equal(t, "handbook", src["name"])
	code, out, errOut = ctlRun(t, "sources", "--output=yaml")
	require.Equal(t, 0, code, errOut)
	var list []map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(out), &list))
	require.Len(t, list, 2)
	require.Equal(t, "wiki", list[1]["name"])
	code, out, _ = ctlRun(t, "sources")
	require.Equal(t, 0, code)
	require.Contains(t, out, "NAME")

	code, out, errOut = ctlRun(t, "search", "suspected incident", "-o", "json", "--mode", "bm25")
	require.Equal(t, 0, code, errOut)
	var resp map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &resp))
	require.NotEmpty(t, resp["results"])

	code, out, errOut = ctlRun(t, "keys", "list", "-o", "json")
	require.Equal(t, 0, code, errOut)
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l != "" {
			require.True(t, json.Valid([]byte(l)), l)
		}
	}
	code, out, errOut = ctlRun(t, "graph", "status", "-o", "yaml")
	require.Equal(t, 0, code, errOut)
	var st map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(out), &st))
	require.Contains(t, st, "entities")

	code, _, _ = ctlRun(t, "sources", "-o", "xml")
	require.Equal(t, exitUsage, code)

	// Completion reaches the running services for names.
	_, out, _ = ctlRun(t, "__complete", "sync", "")
	require.Contains(t, out, "handbook\n")
	require.Contains(t, out, "wiki\n")
	code, _, errOut = ctlRun(t, "keys", "create", "--name", "completion-test")
	require.Equal(t, 0, code, errOut)
	code, ids, errOut := ctlRun(t, "keys", "list", "-q", "--owner", "completion-test")
	require.Equal(t, 0, code, errOut)
	id := strings.TrimSpace(ids)
	require.NotEmpty(t, id)
	_, out, _ = ctlRun(t, "__complete", "keys", "revoke", "")
	require.Contains(t, out, id+"\n")
}

// Every example of every command parses, and so does every bmcisctl
// command line the README and docs/ show, so a documented line cannot
// drift from what works.
func TestDocumentedCommandLinesParse(t *testing.T) {
	var lines []string
	for _, ex := range examples {
		lines = append(lines, ex...)
	}
	root := stacktest.RepoRoot(t)
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	files = append(files, filepath.Join(root, "README.md"))
	fromDocs := 0
	for _, f := range files {
		for _, l := range documentedLines(t, f) {
			lines = append(lines, l)
			fromDocs++
		}
	}
	require.Greater(t, fromDocs, 10, "the docs' command lines were found")
	for _, l := range lines {
		args := shellWords(l)
		require.NotEmpty(t, args, l)
		if args[0] == "help" || args[0] == "completion" {
			continue
		}
		_, ok := commands[args[0]]
		require.True(t, ok, "%q: no command %q", l, args[0])
		set, _ := parsedAs(t, args...)
		require.NotNil(t, set, "%q does not parse", l)
	}
}

// bmcisctlLine finds an invocation in a documented line: `bin/bmcisctl ...`
// or `bmcisctl ...` after an optional VAR=value prefix.
var bmcisctlLine = regexp.MustCompile(`^(?:[A-Z_]+=\S+ )*(?:\S*/)?bmcisctl ((?:[a-z]+)(?: .*)?)$`)

// documentedLines returns the bmcisctl command lines of a markdown file's
// code blocks, without comments and redirections.
func documentedLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []string
	inCode := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
			continue
		}
		if !inCode {
			continue
		}
		if i := strings.Index(line, " #"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		for _, cut := range []string{" >", " <", " |", " &&", " 2>"} {
			if i := strings.Index(line, cut); i >= 0 {
				line = strings.TrimSpace(line[:i])
			}
		}
		if strings.HasPrefix(line, "$ ") {
			line = line[2:]
		}
		if m := bmcisctlLine.FindStringSubmatch(line); m != nil && !strings.Contains(line, "$(") && !strings.HasSuffix(line, "\\") {
			out = append(out, "bmcisctl "+m[1])
		}
	}
	require.NoError(t, sc.Err())
	return out
}

// shellWords splits a command line as a shell would for these simple
// lines (double and single quotes), without the leading "bmcisctl".
func shellWords(line string) []string {
	var words []string
	var cur strings.Builder
	quote := rune(0)
	inWord := false
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	if len(words) > 0 && strings.HasSuffix(words[0], "bmcisctl") {
		words = words[1:]
	}
	return words
}

// pflag reads text in backquotes in a flag's usage as the name of its value
// ("--every sources sync"), so no usage may hold any: help shows each
// flag's type instead.
func TestFlagUsagesNameTheirValueType(t *testing.T) {
	subcommands := []string{"", "add", "sync", "remove", "create", "list", "revoke", "rotate", "import", "status", "up", "down", "search"}
	seen := 0
	for name, c := range commands {
		for _, sub := range subcommands {
			args := []string{}
			if sub != "" {
				args = append(args, sub)
			}
			parsedOnly(context.Background(), c, args, func(fs *pflag.FlagSet, _ []string) {
				fs.VisitAll(func(f *pflag.Flag) {
					seen++
					require.NotContains(t, f.Usage, "`", "bmcisctl %s %s --%s", name, sub, f.Name)
				})
			})
		}
	}
	require.Positive(t, seen, "no command's flags were seen")
}
