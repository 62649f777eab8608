package main

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/testdb"
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

// migrate refuses extra words, a down without VERSION (it would drop all
// data) and a down "to" a version above the current one, and reports the
// version the schema really has.
func TestMigrateRefusesWhatItWouldNotDo(t *testing.T) {
	_, url := testdb.New(t)
	t.Setenv("DATABASE_URL", url)
	code, out, errOut := ctlRun(t, "migrate", "status")
	require.Equal(t, 0, code, errOut)
	m := regexp.MustCompile(`schema version (\d+); pending migrations: false`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	current := m[1]

	requireUsageErrors(t, []badFlagCase{
		{[]string{"migrate", "up", "bogus"}, `migrate up takes no arguments, got "bogus"`},
		{[]string{"migrate", "status", "now", "please"}, `migrate status takes no arguments, got "now please"`},
		{[]string{"migrate", "down"}, "migrate down needs exactly one VERSION"},
		{[]string{"migrate", "down", "1", "2"}, "migrate down needs exactly one VERSION"},
		{[]string{"migrate", "down", "-1"}, "VERSION must be a non-negative integer"},
		{[]string{"migrate", "down", "99999"}, "the schema is at version " + current + ": down rolls back to a VERSION at most that, got 99999"},
		{[]string{"migrate", "sideways"}, `unknown migrate action "sideways"`},
	})
	code, out, errOut = ctlRun(t, "migrate", "down", current)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "rolled back 0 migration(s); schema version "+current+"\n", out)
	code, out, _ = ctlRun(t, "migrate", "status")
	require.Equal(t, 0, code)
	require.Contains(t, out, "schema version "+current+"; pending migrations: false", "nothing was rolled back")
}
