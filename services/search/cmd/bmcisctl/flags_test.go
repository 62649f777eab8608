package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// badFlagCase is a command line that must be refused as a usage error
// (exit 2, the reason on stderr) before anything is dialled, read or
// written: -addr points at a port nothing listens on, so a command that
// went on would fail differently.
type badFlagCase struct {
	args []string
	want string
}

func requireUsageErrors(t *testing.T, cases []badFlagCase) {
	t.Helper()
	for _, tc := range cases {
		code, out, errOut := ctlRun(t, tc.args...)
		require.Equal(t, 2, code, "%q: stdout:\n%s\nstderr:\n%s", tc.args, out, errOut)
		require.Contains(t, errOut, tc.want, "%q", tc.args)
		require.Empty(t, out, "%q", tc.args)
	}
}

func TestBenchRefusesBadFlagsFirst(t *testing.T) {
	t.Setenv("BMCIS_SERVICE_TOKEN", ctlToken) // so only the flags can stop it
	bench := func(args ...string) []string {
		return append([]string{"bench", "search", "-addr", "127.0.0.1:1", "-metrics-url", "http://127.0.0.1:1/metrics"}, args...)
	}
	requireUsageErrors(t, []badFlagCase{
		{bench("-queries", "0"), "-queries must be at least 1"},
		{bench("-queries", "-1"), "-queries must be at least 1"},
		{bench("-vocab", "0"), "-vocab must be at least 2"},
		{bench("-vocab", "-1"), "-vocab must be at least 2"},
		{bench("-chunks", "-5"), "-chunks must be 0"},
		{bench("-add-chunks", "-5"), "-add-chunks must be 0"},
		{bench("-duration", "0s"), "-duration must be positive"},
		{bench("-modes", "hybrid,nope"), `bad -modes "hybrid,nope"`},
		{bench("-modes", "bm25,,vector"), "bad -modes"},
		{bench("-concurrency", "1,0"), `bad -concurrency "1,0"`},
		{bench("-concurrency", "x"), "bad -concurrency"},
		{bench("extra"), `unexpected argument "extra"`},
	})
}
