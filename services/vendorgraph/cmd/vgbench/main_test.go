package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBadInput(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"frobnicate"},
		{"generate", "-vendors", "1"},
		{"generate", "-vendors", "10", "-entities", "100"},
		{"getvendor", "-expect", "maybe"},
	} {
		var out, errOut bytes.Buffer
		require.Error(t, run(context.Background(), args, &out, &errOut), "%v", args)
	}
}

func TestGenerateWritesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.jsonl")
	var out, errOut bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"generate", "-vendors", "3", "-entities", "90", "-relationships", "200", "-o", path}, &out, &errOut))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, 290, strings.Count(string(b), "\n"))
}

func TestDescribeHistogram(t *testing.T) {
	before := map[float64]float64{0.0002: 10, 0.0005: 10, 0.001: 10, 0.005: 10, 0.01: 10, 0.1: 10}
	after := map[float64]float64{0.0002: 10, 0.0005: 10, 0.001: 10, 0.005: 35, 0.01: 100, 0.1: 110}
	got := describeHistogram(before, after)
	require.Contains(t, got, "p50 ~ 6.92 ms (bucket <= 10 ms)")
	require.Contains(t, got, "25.0% <= 5 ms")
	require.Contains(t, got, "90.0% <= 10 ms")
}
