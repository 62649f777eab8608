package main

import (
	"debug/macho"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// thin writes a minimal thin 64-bit Mach-O executable for cpu: a header
// with no load commands, then a body. (Cross-compiling real darwin
// programs costs ~30 s of cold standard-library builds per CI run; `make
// mcpb` joins the real adapter builds.)
func thin(t *testing.T, dir string, cpu macho.Cpu, sub uint32, body string) string {
	t.Helper()
	h := make([]byte, 32)
	le := binary.LittleEndian
	le.PutUint32(h[0:], macho.Magic64)
	le.PutUint32(h[4:], uint32(cpu))
	le.PutUint32(h[8:], sub)
	le.PutUint32(h[12:], uint32(macho.TypeExec))
	path := filepath.Join(dir, cpu.String())
	require.NoError(t, os.WriteFile(path, append(h, body...), 0o755))
	return path
}

// Two thin executables joined, then read back with the standard library's
// fat-file reader: both slices are there, byte for byte, at aligned offsets.
func TestJoinsThinDarwinBinaries(t *testing.T) {
	dir := t.TempDir()
	arm := thin(t, dir, macho.CpuArm64, 0, "arm64 body")
	amd := thin(t, dir, macho.CpuAmd64, 3, "amd64 body, a little longer")
	out := filepath.Join(dir, "universal")
	require.NoError(t, run(out, []string{arm, amd}))

	f, err := macho.OpenFat(out)
	require.NoError(t, err)
	defer f.Close()
	require.Len(t, f.Arches, 2)
	raw, err := os.ReadFile(out)
	require.NoError(t, err)
	want := map[macho.Cpu]string{macho.CpuArm64: arm, macho.CpuAmd64: amd}
	for _, a := range f.Arches {
		require.Zero(t, a.Offset%(1<<sliceAlign))
		b, err := os.ReadFile(want[a.Cpu])
		require.NoError(t, err)
		require.Equal(t, b, raw[a.Offset:a.Offset+a.Size], a.Cpu.String())
		require.Equal(t, macho.TypeExec, a.Type)
	}
	info, err := os.Stat(out)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o755), info.Mode().Perm(), "executable")

	require.Error(t, run(out, []string{arm, arm}), "the same CPU twice")
	notMachO := filepath.Join(dir, "script")
	require.NoError(t, os.WriteFile(notMachO, []byte("#!/bin/sh\n"), 0o755))
	require.Error(t, run(out, []string{notMachO, amd}), "not Mach-O")
	require.Error(t, run("", nil))
}
