package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/migrations"
	"github.com/bmcis/knowledge/platform/grpcclient"
	"github.com/bmcis/knowledge/platform/stacktest"
	"github.com/bmcis/knowledge/platform/testdb"
)

// noRetrain keeps the builtin model the one trained first, on both stacks:
// the comparison is of a restore, not of two trainings.
var noRetrain = map[string]string{"BMCIS_BUILTIN_RETRAIN_GROWTH": "0", "BMCIS_BUILTIN_RETRAIN_COVERAGE": "0"}

// TestBackupWhileIngestingRestoresAStackThatAnswersTheSame backs up a stack
// with documents, the demo vendor graph and a key while a writer ingests, restores
// it into a fresh migrated database, starts the services there, and checks
// that the old key works and that, the writer's documents set aside on both
// sides, several queries return the same top 10.
func TestBackupWhileIngestingRestoresAStackThatAnswersTheSame(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	a := stacktest.Start(t, stacktest.Options{Env: noRetrain})
	a.IngestDocs(t, smallCorpus())
	a.ImportDemoGraph(t)
	key := a.CreateKey(t, stacktest.Key{Name: "kept", Owner: "backup-test", PerMinute: 100})
	adminA := connect(t, a.DatabaseURL)
	// Every demo chunk has its vector under the first model before the
	// writer starts.
	require.Eventually(t, func() bool {
		var pending int
		var models int
		_ = adminA.QueryRow(ctx, "SELECT (SELECT count(*) FROM search.chunks WHERE embedding IS NULL), (SELECT count(*) FROM search.embedding_models WHERE active)").Scan(&pending, &models)
		return pending == 0 && models == 1
	}, 2*time.Minute, 50*time.Millisecond, "the demo documents are embedded")

	// The writer ingests one document at a time, in a category of its own.
	var written atomic.Int64
	stop := make(chan struct{})
	writerDone := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				writerDone <- nil
				return
			default:
			}
			dir, err := os.MkdirTemp(t.TempDir(), "stream")
			if err == nil {
				err = os.MkdirAll(filepath.Join(dir, "stream"), 0o755)
			}
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, "stream", fmt.Sprintf("s%d.md", i)),
					fmt.Appendf(nil, "# Stream %d\n\nQuokka zebracorn telemetry sample %d.\n", i, i), 0o644)
			}
			if err == nil {
				_, err = a.TryCtl("ingest", "-quiet", "-addr", a.Addr(stacktest.Search), dir)
			}
			if err != nil {
				writerDone <- err
				return
			}
			written.Add(1)
		}
	}()
	require.Eventually(t, func() bool { return written.Load() > 0 }, time.Minute, 10*time.Millisecond)

	file := filepath.Join(t.TempDir(), "stack.backup")
	t.Setenv("DATABASE_URL", a.DatabaseURL)
	code, out, errOut := ctlRun(t, "backup", file, "-o", "json")
	require.Equal(t, 0, code, errOut)
	atBackup := written.Load()
	var res backupResult
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Equal(t, "backup", res.Action)
	require.Positive(t, res.Rows)
	// The writer went on after the backup, then stops.
	require.Eventually(t, func() bool { return written.Load() > atBackup }, time.Minute, 10*time.Millisecond)
	close(stop)
	require.NoError(t, <-writerDone)

	_, urlB := testdb.New(t)
	t.Setenv("DATABASE_URL", urlB)
	code, out, errOut = ctlRun(t, "restore", file)
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	require.Contains(t, out, "restored ")
	// The restore is refused now that the target holds the data.
	code, _, errOut = ctlRun(t, "restore", file)
	require.Equal(t, exitFailed, code)
	require.Contains(t, errOut, "target stack is not empty")

	b := stacktest.Start(t, stacktest.Options{DatabaseURL: urlB, Env: noRetrain})
	adminB := connect(t, urlB)

	// The old key works on the restored stack.
	authB := dialT(t, b.Addr(stacktest.Auth), stacktest.ServiceToken)
	chk, err := authv1.NewAuthServiceClient(authB).Check(ctx, &authv1.CheckRequest{ApiKey: key, Operation: "backup-test"})
	require.NoError(t, err)
	require.True(t, chk.GetAllowed(), "%v", chk)

	// The writer's documents are set aside on both sides (B holds those of
	// the snapshot, A all of them): then both hold the demo corpus.
	for _, s := range []struct {
		st    *stacktest.Stack
		admin *pgx.Conn
	}{{a, adminA}, {b, adminB}} {
		rows, err := s.admin.Query(ctx, "SELECT external_id FROM search.documents WHERE category = 'stream'")
		require.NoError(t, err)
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		require.NotEmpty(t, ids)
		s.st.Ctl(t, append([]string{"delete", "-addr", s.st.Addr(stacktest.Search)}, ids...)...)
	}
	searchA := searchv1.NewSearchServiceClient(dialT(t, a.Addr(stacktest.Search), stacktest.ServiceToken))
	searchB := searchv1.NewSearchServiceClient(dialT(t, b.Addr(stacktest.Search), stacktest.ServiceToken))
	top10 := func(c searchv1.SearchServiceClient, q string, mode searchv1.RetrievalMode) []int64 {
		resp, err := c.Search(ctx, &searchv1.SearchRequest{Query: q, Limit: 10, Mode: mode, NoCache: true})
		require.NoError(t, err)
		ids := make([]int64, 0, len(resp.GetResults()))
		for _, r := range resp.GetResults() {
			ids = append(ids, r.GetChunk().GetChunkId())
		}
		return ids
	}
	// Each replica applies the deletes from its change feed: the same
	// answers once both have.
	for _, q := range []string{"security incident reporting", "vendor risk assessment", "multi-factor authentication rollout", "data retention policy"} {
		for _, mode := range []searchv1.RetrievalMode{searchv1.RetrievalMode_RETRIEVAL_MODE_HYBRID, searchv1.RetrievalMode_RETRIEVAL_MODE_BM25} {
			var want, got []int64
			require.Eventually(t, func() bool {
				want, got = top10(searchA, q, mode), top10(searchB, q, mode)
				return len(want) > 0 && fmt.Sprint(want) == fmt.Sprint(got)
			}, time.Minute, 50*time.Millisecond, "%q %v: the source answers %v, the restored stack %v", q, mode, want, got)
		}
	}
}

// smallCorpus is a few documents over the queries' topics, naming vendors
// of the demo graph (so mentions are linked): enough for rankings to
// differ, small enough to ingest in seconds.
func smallCorpus() map[string]string {
	topics := []string{
		"security incident reporting: report a suspected incident to the on-call team within one hour",
		"vendor risk assessment: every vendor gets a yearly risk review before renewal",
		"multi-factor authentication rollout: each employee enrols a hardware key",
		"data retention policy: customer records are kept seven years, then deleted",
		"cloud landing zone: accounts, guardrails and budgets for every team",
		"on-call rota and escalation for outages, with runbooks per service",
	}
	vendors := []string{"Acme Corp", "Globex Corporation", "Initech", "Umbrella Corporation", "Stark Industries", "Wayne Enterprises"}
	docs := map[string]string{}
	for i := range 18 {
		a, b := topics[i%len(topics)], topics[(i*5+1)%len(topics)]
		heading, _, _ := strings.Cut(a, ":")
		docs[fmt.Sprintf("policies/p%02d.md", i)] = fmt.Sprintf("# Policy %d\n\n## %s\n\n%s. %s handles part of it.\n\n## See also\n\n%s.\n",
			i, heading, a, vendors[i%len(vendors)], b)
	}
	return docs
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func dialT(t *testing.T, addr, token string) *grpc.ClientConn {
	t.Helper()
	c, err := grpcclient.Dial(addr, token)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// The command lines backup and restore refuse before touching a database
// (exit 2).
func TestBackupRestoreUsage(t *testing.T) {
	for _, args := range [][]string{
		{"backup"},
		{"backup", "a", "b"},
		{"backup", "f", "-o", "xml"},
		{"restore"},
		{"restore", "-"},
		{"restore", "a", "b"},
	} {
		code, _, errOut := ctlRun(t, args...)
		require.Equal(t, exitUsage, code, "%q: %s", args, errOut)
	}
}

// restore given a directory says so, not that the backup is damaged, and
// writes nothing.
func TestRestoreADirectory(t *testing.T) {
	_, url := testdb.New(t)
	t.Setenv("DATABASE_URL", url)
	dir := t.TempDir()
	code, _, errOut := ctlRun(t, "restore", dir)
	require.Equal(t, exitFailed, code, errOut)
	require.Contains(t, errOut, dir+" is a directory, not a backup file")
	require.NotContains(t, errOut, "damaged")
}

// A backup to a directory is refused before any database is read.
func TestBackupToADirectory(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none")
	dir := t.TempDir()
	code, _, errOut := ctlRun(t, "backup", dir)
	require.Equal(t, exitUsage, code, errOut)
	require.Contains(t, errOut, dir+" is a directory: give the backup file's path")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "nothing written")
}

// TestBackupRestoreSplitDatabases runs the commands on services split over
// two databases (DATABASE_URL_AUTH names auth's): one snapshot each, and a
// restore onto two others.
func TestBackupRestoreSplitDatabases(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	poolA, urlA := testdb.New(t)
	poolB, urlB := testdb.New(t)
	_, err := poolA.Exec(ctx, `INSERT INTO vendorgraph.entities (id, name, normalized_name, entity_type, confidence, record_hash)
		VALUES ('00000000-0000-0000-0000-000000000001', 'Acme', 'acme', 'vendor', 0.9, '\x01')`)
	require.NoError(t, err)
	_, err = poolB.Exec(ctx, `INSERT INTO auth.api_keys (key_id, secret_hash, name, owner) VALUES ('k1', sha256('s'), 'kept', 'ops')`)
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "split.backup")
	t.Setenv("DATABASE_URL", urlA)
	t.Setenv("DATABASE_URL_AUTH", urlB)
	code, out, errOut := ctlRun(t, "backup", file, "-o", "json")
	require.Equal(t, 0, code, errOut)
	var res backupResult
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Equal(t, 2, res.Databases)

	poolC, urlC := testdb.New(t)
	poolD, urlD := testdb.New(t)
	t.Setenv("DATABASE_URL", urlC)
	t.Setenv("DATABASE_URL_AUTH", urlD)
	code, _, errOut = ctlRun(t, "restore", file)
	require.Equal(t, 0, code, errOut)
	var entities, keysC, keysD int
	require.NoError(t, poolC.QueryRow(ctx, "SELECT count(*) FROM vendorgraph.entities").Scan(&entities))
	require.NoError(t, poolC.QueryRow(ctx, "SELECT count(*) FROM auth.api_keys").Scan(&keysC))
	require.NoError(t, poolD.QueryRow(ctx, "SELECT count(*) FROM auth.api_keys").Scan(&keysD))
	require.Equal(t, []int{1, 0, 1}, []int{entities, keysC, keysD}, "each schema went to its own database")
}

// backup and restore without a database name every place the command reads
// one from: its variables, the per-schema ones and the credentials file.
func TestBackupRestoreNameEveryDatabaseSource(t *testing.T) {
	for _, name := range []string{"DATABASE_URL", migrations.BackupLoginURLEnv, "DATABASE_URL_SEARCH",
		"DATABASE_URL_VENDORGRAPH", "DATABASE_URL_AUTH", envCredentialsFile} {
		t.Setenv(name, "")
	}
	t.Setenv(envDataDir, t.TempDir()) // no credentials file
	file := filepath.Join(t.TempDir(), "b.backup")
	cases := []struct {
		cmd  string
		want []string
	}{
		{"backup", []string{migrations.BackupLoginURLEnv, "DATABASE_URL", "DATABASE_URL_SEARCH", credentialsFileName, envDataDir, envCredentialsFile}},
		{"restore", []string{"DATABASE_URL", "the migration role", "DATABASE_URL_SEARCH", credentialsFileName, envDataDir, envCredentialsFile}},
	}
	require.NoError(t, os.WriteFile(file+".in", []byte("x"), 0o600))
	for _, c := range cases {
		t.Run(c.cmd, func(t *testing.T) {
			arg := file
			if c.cmd == "restore" {
				arg = file + ".in"
			}
			code, _, errOut := ctlRun(t, c.cmd, arg)
			require.Equal(t, exitUsage, code, errOut)
			for _, w := range c.want {
				require.Contains(t, errOut, w)
			}
		})
	}
}

// backup refuses a FILE that exists, before reading the database, unless
// --force; with it the old file is replaced only once the new one is whole.
func TestBackupRefusesAnExistingFileUnlessForced(t *testing.T) {
	_, url := testdb.New(t)
	t.Setenv("DATABASE_URL", url)
	t.Setenv(migrations.BackupLoginURLEnv, "")
	dir := t.TempDir()
	file := filepath.Join(dir, "bmcis.backup")
	require.NoError(t, os.WriteFile(file, []byte("last night's backup"), 0o600))

	code, _, errOut := ctlRun(t, "backup", file)
	require.Equal(t, exitUsage, code, errOut)
	require.Contains(t, errOut, file+" exists")
	require.Contains(t, errOut, "--force")
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, "last night's backup", string(b), "left as it was")

	code, _, errOut = ctlRun(t, "backup", "--force", file)
	require.Equal(t, exitOK, code, errOut)
	code, _, errOut = ctlRun(t, "restore", file) // a whole backup now, checked by restore's reader
	require.NotContains(t, errOut, "damaged", "%d", code)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file left beside it")
}

// restore run as the backup's read-only login (or any role that cannot
// write every schema) says to run it as the migration role, naming the
// variable, not only PostgreSQL's "permission denied for table ...".
func TestRestoreAsTheBackupLoginNamesTheMigrationRole(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, url := testdb.New(t)
	t.Setenv("DATABASE_URL", url)
	t.Setenv(migrations.BackupLoginURLEnv, "")
	file := filepath.Join(t.TempDir(), "bmcis.backup")
	code, _, errOut := ctlRun(t, "backup", file)
	require.Equal(t, exitOK, code, errOut)

	cfg, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	loginURL := strings.Replace(url, "://"+cfg.User+":", "://bmcis_test_restore_backup_login:", 1)
	loginURL = strings.Replace(loginURL, ":"+cfg.Password+"@", ":restore-backup-pw@", 1)
	_, err = migrations.EnsureBackupLoginFrom(ctx, pool, cfg.User, func(k string) string {
		if k == migrations.BackupLoginURLEnv {
			return loginURL
		}
		return ""
	})
	require.NoError(t, err)

	t.Setenv("DATABASE_URL", loginURL)
	code, _, errOut = ctlRun(t, "restore", file)
	require.Equal(t, exitFailed, code, errOut)
	require.Contains(t, errOut, "permission denied")
	require.Contains(t, errOut, "run restore as the migration role")
	require.Contains(t, errOut, "DATABASE_URL")
	require.Contains(t, errOut, migrations.BackupLoginURLEnv)
}
