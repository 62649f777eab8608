package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestVersion(t *testing.T) {
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"version"}, &out, &errOut))
	require.Equal(t, "bmcisctl dev (commit unknown)\n", out.String())

	out.Reset()
	require.Equal(t, 2, run(context.Background(), []string{"version", "extra"}, &out, &errOut))
	require.Contains(t, errOut.String(), "version takes no arguments")
}
