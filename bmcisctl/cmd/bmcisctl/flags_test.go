package main

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/bmcisctl/internal/source"
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
	maxFile := source.MaxFileBytes // -max-file-bytes writes it
	defer func() { source.MaxFileBytes = maxFile }()
	for _, tc := range cases {
		source.MaxFileBytes = maxFile
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
		{bench("-profile", "/dev/null/profiles"), "-profile: mkdir /dev/null"},
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

// Every numeric flag out of its range is a usage error, checked before the
// command reads or sends anything.
func TestNumericFlagsAreChecked(t *testing.T) {
	t.Setenv("BMCIS_SERVICE_TOKEN", ctlToken)
	t.Setenv("BMCIS_INGEST_TOKEN", ctlIngestToken)
	t.Setenv("BMCIS_SEARCH_ADDR", "127.0.0.1:1")
	dir := t.TempDir()
	queries := ctlWrite(t, dir, "queries.jsonl", `{"_id": "q1", "text": "walrus"}`+"\n")
	search := func(args ...string) []string {
		return append([]string{"search", "-queries", queries, "-json"}, args...)
	}
	requireUsageErrors(t, []badFlagCase{
		{search("-top-k", "-3"), "-top-k must be at least 1, got -3"},
		{search("-top-k", "0"), "-top-k must be at least 1, got 0"},
		{search("-parallel", "0"), "-parallel must be at least 1"},
		{[]string{"search", "-limit", "0", "walrus"}, "-limit must be between 1 and 50, got 0"},
		{[]string{"search", "-limit", "51", "walrus"}, "-limit must be between 1 and 50, got 51"},
		{[]string{"search", "-offset", "-1", "walrus"}, "-offset must be 0 or more"},
		{[]string{"eval", "-beir", dir, "-parallel", "0"}, "-parallel must be at least 1"},
		{[]string{"eval", "-beir", dir, "-modes", "bm25,"}, "bad -modes"},
		{[]string{"health", "-wait", "-1s", "127.0.0.1:1"}, "-wait must be 0 (one try) or more"},
		{[]string{"ingest", "-max-file-bytes", "0", dir}, "-max-file-bytes must be at least 1"},
		{[]string{"sync", "-max-file-bytes", "-1", "docs", dir}, "-max-file-bytes must be at least 1"},
		{[]string{"sync", "-watch", "-interval", "0s", "docs", dir}, "-interval must be positive"},
		{[]string{"keys", "create", "--name", "app", "--limit-minute", "-5"}, "--limit-minute must be 0 (service default) or more, got -5"},
	})
}
