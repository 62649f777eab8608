package main

import (
	"debug/macho"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Two real thin darwin executables (a tiny program cross-compiled for
// arm64 and amd64) joined, then read back with the standard library's
// fat-file reader: both slices are there, byte for byte, at aligned offsets.
func TestJoinsThinDarwinBinaries(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	require.NoError(t, os.WriteFile(src, []byte("package main\nfunc main() {}\n"), 0o644))
	thin := map[string]string{}
	for _, arch := range []string{"arm64", "amd64"} {
		out := filepath.Join(dir, "hello-"+arch)
		cmd := exec.Command("go", "build", "-o", out, src)
		cmd.Env = append(os.Environ(), "GOOS=darwin", "GOARCH="+arch, "CGO_ENABLED=0", "GOWORK=off", "GO111MODULE=off")
		b, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", b)
		thin[arch] = out
	}
	out := filepath.Join(dir, "hello")
	require.NoError(t, run(out, []string{thin["arm64"], thin["amd64"]}))

	f, err := macho.OpenFat(out)
	require.NoError(t, err)
	defer f.Close()
	require.Len(t, f.Arches, 2)
	raw, err := os.ReadFile(out)
	require.NoError(t, err)
	for _, a := range f.Arches {
		require.Zero(t, a.Offset%(1<<sliceAlign))
		want := map[macho.Cpu]string{macho.CpuArm64: thin["arm64"], macho.CpuAmd64: thin["amd64"]}[a.Cpu]
		require.NotEmpty(t, want, "unexpected cpu %v", a.Cpu)
		b, err := os.ReadFile(want)
		require.NoError(t, err)
		require.Equal(t, b, raw[a.Offset:a.Offset+a.Size])
		require.Equal(t, macho.TypeExec, a.Type)
	}

	require.Error(t, run(out, []string{thin["arm64"], thin["arm64"]}), "the same CPU twice")
	require.Error(t, run(out, []string{src, thin["amd64"]}), "not Mach-O")
	require.Error(t, run("", nil))
}
