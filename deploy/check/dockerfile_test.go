package check_test

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/deploy/check"
)

// The issue: every Dockerfile binary target exists and builds with
// CGO_ENABLED=0; static binaries, distroless or scratch, non-root, no shell.

func TestDockerfileTargetsArePackageMain(t *testing.T) {
	root := repoRoot(t)
	tg := targets(t)
	for _, want := range []string{"search", "bmcisctl", "vendorgraph", "auth", "gateway", "mcp-adapter"} {
		require.Contains(t, tg, want, "the Dockerfile builds %s", want)
	}
	for name, pkg := range tg {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(root, filepath.FromSlash(pkg))
			files, err := filepath.Glob(filepath.Join(dir, "*.go"))
			require.NoError(t, err)
			var names []string
			for _, f := range files {
				if strings.HasSuffix(f, "_test.go") {
					continue
				}
				af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.PackageClauseOnly)
				require.NoError(t, err)
				names = append(names, af.Name.Name)
			}
			require.NotEmpty(t, names, "%s has Go files", pkg)
			for _, n := range names {
				require.Equal(t, "main", n, "%s is package main", pkg)
			}
			require.Equal(t, name, filepath.Base(pkg), "a target is named after its command directory (go build -o DIR/ names it so)")
		})
	}
}

func TestDockerfileBuildStage(t *testing.T) {
	d := dockerfile(t)
	st, ok := d.Stage("build")
	require.True(t, ok)
	require.Regexp(t, `^golang:1\.26(\.\d+)?-bookworm$`, st.Base, "build stage image")
	run, ok := st.BuildCommand()
	require.True(t, ok, "the build stage runs go build")
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "-o /out/app"} {
		require.Contains(t, run.Args, want)
	}
	require.NotContains(t, run.Args, "GOWORK=off", "the build needs the go.work workspace")
	ldflags, ok := run.LDFlags()
	require.True(t, ok)
	require.Contains(t, ldflags, "-s -w")
	require.Contains(t, ldflags, "-X github.com/bmcis/knowledge/platform/version.Version=$VERSION")
	require.NotEmpty(t, st.Find("ARG"), "BINARY and VERSION are build args")
	var args []string
	for _, a := range st.Find("ARG") {
		name, _, _ := strings.Cut(a.Args, "=")
		args = append(args, name)
	}
	require.Subset(t, args, []string{"BINARY", "VERSION", "COMMIT"})
	copies := st.Find("COPY")
	require.NotEmpty(t, copies)
	wholeTree := false
	for _, c := range copies {
		wholeTree = wholeTree || strings.Fields(c.Args)[0] == "."
	}
	require.True(t, wholeTree, "the build stage copies the whole workspace (COPY . .): go.work and every module it uses")
	require.Equal(t, "/src", lastWorkdir(st), "go build runs at the workspace root")
}

func lastWorkdir(st check.Stage) string {
	w := st.Find("WORKDIR")
	if len(w) == 0 {
		return ""
	}
	return w[len(w)-1].Args
}

// Every module go.work uses is inside the build context.
func TestDockerContextHasWorkspaceModules(t *testing.T) {
	root := repoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, "go.work"))
	require.NoError(t, err)
	block := regexp.MustCompile(`(?s)use\s*\((.*?)\)`).FindStringSubmatch(string(data))
	var uses []string
	if block != nil {
		for _, l := range strings.Split(block[1], "\n") {
			if l, _, _ = strings.Cut(l, "//"); strings.TrimSpace(l) != "" {
				uses = append(uses, strings.TrimSpace(l))
			}
		}
	}
	for _, m := range regexp.MustCompile(`(?m)^use\s+([^\s(]+)`).FindAllStringSubmatch(string(data), -1) {
		uses = append(uses, m[1])
	}
	require.NotEmpty(t, uses)
	ignored := dockerignore(t)
	for _, u := range uses {
		u = strings.TrimPrefix(filepath.Clean(u), "./")
		require.FileExists(t, filepath.Join(root, u, "go.mod"))
		if u == "." {
			continue
		}
		require.False(t, excludedBy(ignored, u), "module %s (in go.work) is excluded from the Docker build context", u)
	}
}

func TestDockerfileFinalStageIsNonRootWithoutShell(t *testing.T) {
	d := dockerfile(t)
	final := d.Final()
	distroless := regexp.MustCompile(`^gcr\.io/distroless/static(-debian\d+)?:(nonroot|latest-nonroot|[\w.-]*nonroot[\w.-]*)(@sha256:[0-9a-f]{64})?$`)
	require.True(t, final.Base == "scratch" || distroless.MatchString(final.Base),
		"final stage is scratch or distroless static nonroot, got %q", final.Base)
	require.Empty(t, final.Find("RUN"), "no RUN in the final stage: it has no shell")
	require.Empty(t, final.Find("SHELL"))

	users := final.Find("USER")
	require.NotEmpty(t, users, "the final stage sets USER")
	user := users[len(users)-1].Args
	uid, _, _ := strings.Cut(user, ":")
	require.Regexp(t, `^[1-9][0-9]*$`, uid, "USER is a numeric non-root uid (Kubernetes runAsNonRoot can verify it), got %q", user)

	entry := final.Find("ENTRYPOINT")
	require.Len(t, entry, 1)
	var argv []string
	require.NoError(t, json.Unmarshal([]byte(entry[0].Args), &argv), "ENTRYPOINT in exec (JSON) form: the shell form needs /bin/sh")
	require.NotEmpty(t, argv)
	require.NotContains(t, []string{"/bin/sh", "sh", "/bin/bash", "bash"}, argv[0])

	for _, c := range final.Find("COPY") {
		require.Contains(t, c.Args, "--from=build", "the final stage copies only from the build stage: %s", c.Args)
		for _, sh := range []string{"/bin/sh", "busybox", "/bin/bash"} {
			require.NotContains(t, c.Args, sh)
		}
	}
}

func TestDockerignoreKeepsBuildInputs(t *testing.T) {
	patterns := dockerignore(t)
	needed := []string{"go.work", "go.work.sum", "go.mod", "go.sum", "platform", "migrations", "gen", "proto"}
	for _, pkg := range targets(t) {
		needed = append(needed, strings.TrimPrefix(pkg, "./"))
	}
	for _, n := range needed {
		require.False(t, excludedBy(patterns, n), "Dockerfile.dockerignore excludes build input %s", n)
	}
	require.True(t, excludedBy(patterns, ".git"), "the context leaves out .git")
	require.True(t, excludedBy(patterns, ".data"), "the context leaves out the local stack's data")
}

func dockerignore(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "docker", "Dockerfile.dockerignore"))
	require.NoError(t, err)
	var patterns []string
	for _, l := range strings.Split(string(data), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			patterns = append(patterns, l)
		}
	}
	return patterns
}

// excludedBy approximates .dockerignore matching: a pattern excludes a path
// equal to it, below it, or matching it as a glob.
func excludedBy(patterns []string, path string) bool {
	for _, p := range patterns {
		p = strings.TrimSuffix(strings.TrimPrefix(p, "/"), "/")
		if p == path || strings.HasPrefix(path, p+"/") {
			return true
		}
		if m, _ := filepath.Match(p, path); m {
			return true
		}
	}
	return false
}

// Every binary in the Makefile's BINARIES has a Dockerfile target and back.
func TestDockerfileTargetsMatchMakefile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "Makefile"))
	if err != nil {
		t.Skip("no Makefile")
	}
	re := regexp.MustCompile(`(?m)^\s*([a-z][a-z0-9-]*)=(\./\S+?)\s*\\?$`)
	make := map[string]string{}
	for _, m := range re.FindAllStringSubmatch(string(data), -1) {
		make[m[1]] = m[2]
	}
	if len(make) == 0 {
		t.Skip("no BINARIES list in the Makefile")
	}
	require.Equal(t, make, targets(t), "Makefile BINARIES and the Dockerfile's targets")
}

// Builds every target with the Dockerfile's flags and CGO_ENABLED=0 from the
// repository root (the go.work workspace), then checks each binary is static
// (no ELF interpreter, no shared libraries: it runs on distroless static or
// scratch) and carries the stamped version when it links platform/version.
func TestDockerfileTargetsBuildStatic(t *testing.T) {
	dir := builtBinaries(t)
	t.Log(buildOut)
	root := repoRoot(t)
	tg := targets(t)
	names := make([]string, 0, len(tg))
	for n := range tg {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			f, err := elf.Open(path)
			require.NoError(t, err, "%s was built", name)
			defer f.Close()
			for _, p := range f.Progs {
				require.NotEqual(t, elf.PT_INTERP, p.Type, "%s needs a dynamic loader: not a CGO_ENABLED=0 static binary", name)
			}
			libs, _ := f.ImportedLibraries()
			require.Empty(t, libs, "%s links shared libraries", name)

			cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", tg[name])
			cmd.Dir = root
			cmd.Env = productEnv("CGO_ENABLED=0")
			out, err := cmd.Output()
			require.NoError(t, err)
			if bytes.Contains(out, []byte("github.com/bmcis/knowledge/platform/version\n")) {
				bin, err := os.ReadFile(path)
				require.NoError(t, err)
				require.True(t, bytes.Contains(bin, []byte(stampVersion)), "%s carries the -X stamped version", name)
			}
		})
	}
}
