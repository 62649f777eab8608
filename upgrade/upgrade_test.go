package upgrade_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/stacktest"
)

// The directories of the two releases' binaries (deploy/upgrade/build.sh),
// set by `make test-upgrade`.
const (
	EnvPreviousBin = "BMCIS_UPGRADE_PREVIOUS_BIN"
	EnvCurrentBin  = "BMCIS_UPGRADE_CURRENT_BIN"
)

// The quota check: a key allowed quota calls a day spends spentBefore on
// the previous release's auth; the current one must allow exactly the rest.
// A daily quota gives back one call every 2.4 hours, so none comes back
// during the test however slow the machine.
const (
	quota       = 10
	spentBefore = 4
)

func TestMain(m *testing.M) { stacktest.Main(m) }

func releases(t *testing.T) (previous, current string) {
	t.Helper()
	previous, current = os.Getenv(EnvPreviousBin), os.Getenv(EnvCurrentBin)
	if previous == "" || current == "" {
		t.Skipf("rolling upgrade test: set %s and %s (make test-upgrade builds both)", EnvPreviousBin, EnvCurrentBin)
	}
	for _, dir := range []string{previous, current} {
		for _, b := range []string{"search", "vendorgraph", "auth", "bmcisctl", "mcp-adapter", "gateway"} {
			if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
				t.Fatalf("%s: %v (deploy/upgrade/build.sh builds it)", b, err)
			}
		}
	}
	return previous, current
}

// corpus is loaded by the previous release before the load starts.
var corpus = map[string]string{
	"operations/incidents.md": "# Incident severity levels\n\nSEV1 is a full outage; SEV2 a degraded service; SEV3 a minor fault. Escalate SEV1 to the on-call lead at once.\n",
	"operations/backups.md":   "# Backup retention policy\n\nNightly backups are kept for 35 days, monthly ones for a year. Restores are tested every quarter.\n",
	"security/keys.md":        "# Key rotation\n\nAPI keys expire after 90 days. Rotate a key before it expires; revoke a leaked key at once.\n",
	"security/encryption.md":  "# Encryption at rest\n\nEvery volume is encrypted with AES-256; keys live in the KMS and rotate yearly.\n",
	"vendors/contracts.md":    "# Vendor contracts\n\nContracts with strategic vendors are reviewed every year by procurement and legal.\n",
	"vendors/onboarding.md":   "# Vendor onboarding\n\nA new vendor passes a security review and signs the data processing agreement before access.\n",
}

// frontend is the address the load's clients use for one kind of front
// (an adapter, a gateway): swap holds new calls, waits for those in flight,
// then points the clients at the new process, as a load balancer drains a
// backend before it is stopped.
type frontend struct {
	mu   sync.RWMutex
	base string
}

func (f *frontend) use(call func(base string) outcome) outcome {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return call(f.base)
}

func (f *frontend) swap(base string) {
	f.mu.Lock()
	f.base = base
	f.mu.Unlock()
}

// record is one call of the load, tagged with the upgrade step it ran in.
type record struct {
	kind, step string
	out        outcome
}

// load runs bounded worker loops until stop.
type load struct {
	mu      sync.Mutex
	step    string
	records []record
	acked   []string
	stop    chan struct{}
	done    sync.WaitGroup
}

func (l *load) setStep(s string) {
	l.mu.Lock()
	l.step = s
	l.mu.Unlock()
}

func (l *load) add(kind string, o outcome) {
	l.mu.Lock()
	l.records = append(l.records, record{kind: kind, step: l.step, out: o})
	l.mu.Unlock()
}

// worker calls f until stop, at most maxCalls times, pausing between calls:
// a steady load, not a flood of the 2 CI cores.
func (l *load) worker(maxCalls int, pause time.Duration, f func(i int)) {
	l.done.Go(func() {
		for i := range maxCalls {
			select {
			case <-l.stop:
				return
			default:
			}
			f(i)
			select {
			case <-l.stop:
				return
			case <-time.After(pause):
			}
		}
	})
}

func (l *load) finish() []record {
	close(l.stop)
	l.done.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.records)
}

// successesSince counts the load's successful calls of kind after the n-th
// record.
func (l *load) successesSince(n int, kind string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	ok := 0
	for _, r := range l.records[min(n, len(l.records)):] {
		if r.kind == kind && r.out.OK {
			ok++
		}
	}
	return ok
}

func (l *load) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.records)
}

// TestRollingUpgrade runs the previous release, upgrades the schema and then
// each service in docs/UPGRADE.md's order under a read and write load, and
// checks the upgrade promise.
func TestRollingUpgrade(t *testing.T) {
	previous, current := releases(t)
	began := time.Now()
	ctx := t.Context()

	// The previous release's schema on a private PostgreSQL, and a Redis.
	pg := stacktest.StartPostgresEmpty(t)
	_, err := run(ctx, filepath.Join(previous, "bmcisctl"), map[string]string{"DATABASE_URL": pg.URL()}, "migrate", "up")
	require.NoError(t, err, "the previous release's migrations")
	redis := stacktest.StartRedis(t)
	t.Logf("PostgreSQL (previous schema) and Redis ready at %s", time.Since(began))

	// Snapshots checked every second and written at once when due, so the
	// snapshot step below happens within the test; only the writer replica
	// writes them, so the snapshot that step waits for is the current
	// release's.
	searchEnv := map[string]string{
		"BMCIS_SEARCH_SNAPSHOT_CHECK_INTERVAL": "1s",
		"BMCIS_SEARCH_SNAPSHOT_QUIET":          "0s",
		"BMCIS_SEARCH_SNAPSHOT":                "read",
	}
	writerEnv := maps.Clone(searchEnv)
	writerEnv["BMCIS_SEARCH_SNAPSHOT"] = "read-write"
	stack := stacktest.Start(t, stacktest.Options{
		DatabaseURL: pg.URL(),
		BinDir:      previous,
		NoRedis:     true,
		ServiceEnv: map[string]map[string]string{
			stacktest.Auth:   {"REDIS_URL": redis.URL()},
			stacktest.Search: searchEnv,
		},
	})
	// Two search replicas: the stack's (reads: the adapter, the gateway and
	// vendorgraph use it) and a writer that bmcisctl ingests through.
	reader := stack.Service(stacktest.Search)
	writer := stack.StartService(t, stacktest.Search, writerEnv)
	stack.IngestDocs(t, corpus)
	stack.ImportDemoGraph(t)
	loadKey := stack.CreateKey(t, stacktest.Key{Name: "upgrade-load", PerMinute: 1_000_000, PerHour: 10_000_000, PerDay: 100_000_000})
	quotaKey := stack.CreateKey(t, stacktest.Key{Name: "upgrade-quota", PerMinute: 1000, PerHour: 1000, PerDay: quota})

	adapterOld := stack.StartAdapterBinaryOn(t, filepath.Join(previous, "mcp-adapter"), stacktest.Listen(t), nil)
	gatewayOld := startGateway(t, stack, filepath.Join(previous, "gateway"))
	client := &http.Client{Timeout: 30 * time.Second}
	t.Logf("previous release serving at %s", time.Since(began))

	// The limiter, before: part of the quota spent on the previous auth.
	searchArgs := func(i int) map[string]any {
		return map[string]any{"query": fmt.Sprintf("vendor contracts review %d", i)}
	}
	for i := range spentBefore {
		o := callMCP(client, adapterOld.Base, quotaKey, "semantic_search", searchArgs(i))
		require.True(t, o.OK, "quota call %d on the previous release: %s", i, o)
	}
	quotaID := stacktest.KeyID(quotaKey)
	limiterKeys := redisKeys(t, redis.URL(), quotaID)
	require.NotEmpty(t, limiterKeys, "the previous auth counts the key in Redis")

	// The load: MCP searches and vendor lookups, gateway searches, and
	// documents ingested one at a time through the writer replica with the
	// previous bmcisctl (an operator's client is upgraded last).
	mcpFront := &frontend{base: adapterOld.Base}
	gwFront := &frontend{base: gatewayOld.base}
	l := &load{step: "previous release", stop: make(chan struct{})}
	l.worker(20_000, 50*time.Millisecond, func(i int) {
		l.add("mcp", mcpFront.use(func(base string) outcome {
			return callMCP(client, base, loadKey, "semantic_search", searchArgs(i))
		}))
	})
	l.worker(20_000, 100*time.Millisecond, func(i int) {
		l.add("mcp", mcpFront.use(func(base string) outcome {
			return callMCP(client, base, loadKey, "find_vendor_info", map[string]any{"vendor_name": "Initech"})
		}))
	})
	l.worker(20_000, 50*time.Millisecond, func(i int) {
		l.add("gateway", gwFront.use(func(base string) outcome {
			return callGateway(client, base, loadKey, fmt.Sprintf("backup retention policy %d", i))
		}))
	})
	docsDir := t.TempDir()
	ctlEnv := stack.ClientEnv()
	l.worker(2_000, 100*time.Millisecond, func(i int) {
		dir := filepath.Join(docsDir, fmt.Sprintf("w%05d", i))
		source := fmt.Sprintf("upgrade/doc-%05d.md", i)
		if err := os.MkdirAll(filepath.Join(dir, "upgrade"), 0o755); err != nil {
			l.add("write", outcome{Detail: err.Error()})
			return
		}
		text := fmt.Sprintf("# Rolling upgrade note %d\n\nWritten while the services were replaced one by one; number %d.\n", i, i)
		if err := os.WriteFile(filepath.Join(dir, source), []byte(text), 0o644); err != nil {
			l.add("write", outcome{Detail: err.Error()})
			return
		}
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := run(cctx, filepath.Join(previous, "bmcisctl"), ctlEnv, "ingest", "-quiet", "-addr", writer.Addr(), dir)
		switch {
		case err == nil:
			l.mu.Lock()
			l.acked = append(l.acked, source)
			l.mu.Unlock()
			l.add("write", outcome{OK: true})
		case strings.Contains(out, "Unavailable"):
			// Not acknowledged: the replica was restarting; the document
			// may or may not be stored, and a re-run converges.
			l.add("write", outcome{Documented: "bmcisctl Unavailable", Detail: lastLine(out)})
		default:
			l.add("write", outcome{Detail: out})
		}
	})

	// step runs one upgrade step, then waits until every kind of call
	// succeeds again after it: the load goes on through each step.
	step := func(name string, do func()) {
		t.Helper()
		l.setStep(name)
		t0 := time.Now()
		do()
		took := time.Since(t0)
		t1 := time.Now()
		mark := l.len()
		deadline := time.Now().Add(90 * time.Second)
		// A few successes of each kind, so the load runs on each release
		// pair for a while, not just past the restart.
		for _, kind := range []string{"mcp", "gateway", "write"} {
			for l.successesSince(mark, kind) < 3 {
				if time.Now().After(deadline) {
					t.Fatalf("%s: no successful %s call within 90 s of the step", name, kind)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		t.Logf("step %q took %s; every kind of call succeeded 3 times in the %s after it", name, took.Round(time.Millisecond), time.Since(t1).Round(time.Millisecond))
	}
	step("warm-up", func() {})

	// 1. The current release's migrations, beside the previous binaries.
	step("current migrations", func() {
		out, err := run(ctx, filepath.Join(current, "bmcisctl"), map[string]string{"DATABASE_URL": pg.URL()}, "migrate", "up")
		require.NoError(t, err)
		t.Logf("migrate up: %s", strings.TrimSpace(out))
	})

	// A previous-release process that restarts now (a crash, a rescheduled
	// pod) starts on the current schema: the services refuse only a schema
	// that lacks migrations they know, never one ahead of them.
	step("previous vendorgraph restarts on the current schema", func() { stack.Service(stacktest.VendorGraph).Restart(t) })

	// 2. Auth, then the limiter's state: the current auth continues the
	// previous one's counts under the same Redis keys.
	step("auth", func() { stack.Service(stacktest.Auth).RestartFrom(t, current) })

	// 3. The writer replica; the current release trains a model and writes
	// a snapshot while the previous reader keeps serving.
	step("search writer", func() { writer.RestartFrom(t, current) })
	checkModelAcrossReleases(t, stack, current, writer, client, gwFront, loadKey, pg.URL())
	checkSnapshotAcrossReleases(t, stack, writer, previous)

	// 4. The reader replica, vendorgraph.
	step("search reader", func() { reader.RestartFrom(t, current) })
	step("vendorgraph", func() { stack.Service(stacktest.VendorGraph).RestartFrom(t, current) })

	// 5. The fronts: a new process beside the old, clients moved over, the
	// old one drained and stopped.
	var adapterNew *stacktest.Adapter
	step("mcp-adapter", func() {
		adapterNew = stack.StartAdapterBinaryOn(t, filepath.Join(current, "mcp-adapter"), stacktest.Listen(t), nil)
		mcpFront.swap(adapterNew.Base)
		adapterOld.Stop()
	})
	step("gateway", func() {
		gatewayNew := startGateway(t, stack, filepath.Join(current, "gateway"))
		gwFront.swap(gatewayNew.base)
		gatewayOld.Stop()
	})
	step("current release", func() {})

	records := l.finish()
	t.Logf("load finished at %s", time.Since(began))

	// No errors beyond the documented ones, step by step.
	type tally struct{ ok, documented, undocumented int }
	byStep := map[string]map[string]*tally{}
	var steps []string
	var undocumented []string
	for _, r := range records {
		if byStep[r.step] == nil {
			byStep[r.step] = map[string]*tally{}
			steps = append(steps, r.step)
		}
		tl := byStep[r.step][r.kind]
		if tl == nil {
			tl = &tally{}
			byStep[r.step][r.kind] = tl
		}
		switch {
		case r.out.OK:
			tl.ok++
		case r.out.Documented != "":
			tl.documented++
			t.Logf("%s, %s: %s", r.step, r.kind, r.out)
		default:
			tl.undocumented++
			undocumented = append(undocumented, fmt.Sprintf("%s, %s: %s", r.step, r.kind, r.out))
		}
	}
	for _, s := range steps {
		var parts []string
		kinds := make([]string, 0, len(byStep[s]))
		for k := range byStep[s] {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		for _, k := range kinds {
			tl := byStep[s][k]
			parts = append(parts, fmt.Sprintf("%s %d ok/%d documented/%d other", k, tl.ok, tl.documented, tl.undocumented))
		}
		t.Logf("during %q: %s", s, strings.Join(parts, ", "))
	}
	require.Empty(t, undocumented, "calls failed with errors the upgrade promise does not allow")

	// Every acknowledged write is there.
	l.mu.Lock()
	acked := slices.Clone(l.acked)
	l.mu.Unlock()
	require.NotEmpty(t, acked)
	conn, err := pgx.Connect(ctx, pg.URL())
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var stored int
	require.NoError(t, conn.QueryRow(ctx,
		`SELECT count(*) FROM documents WHERE source_file = ANY($1) AND chunk_count > 0`, acked).Scan(&stored))
	require.Equal(t, len(acked), stored, "acknowledged documents missing after the upgrade")
	t.Logf("%d acknowledged writes, all stored", len(acked))

	// The limiter, after: the current auth allows exactly the rest of the
	// quota the previous one started, counting under the same keys.
	allowed := 0
	for i := range quota {
		o := callMCP(client, adapterNew.Base, quotaKey, "semantic_search", searchArgs(100+i))
		if o.OK {
			allowed++
			continue
		}
		require.Contains(t, o.Detail, "RATE_LIMIT", "quota call %d after the upgrade: %s", i, o)
	}
	require.Equal(t, quota-spentBefore, allowed, "the quota was not carried across the deploy (a reset or a double count)")
	require.Equal(t, limiterKeys, redisKeys(t, redis.URL(), quotaID), "the current auth counts the key under other Redis keys than the previous one")
	t.Logf("limiter: %d of %d a day spent before the deploy, %d allowed after it, keys %v", spentBefore, quota, allowed, limiterKeys)
}

// checkModelAcrossReleases trains a model with the current release (bmcisctl
// reindex through the upgraded writer) while the previous reader serves: the
// reader either loads the new model or refuses it as written by a newer
// release, keeping keyword search; either way the load's searches go on.
func checkModelAcrossReleases(t *testing.T, stack *stacktest.Stack, current string, writer *stacktest.Service,
	client *http.Client, gw *frontend, key, dbURL string) {
	t.Helper()
	out, err := run(t.Context(), filepath.Join(current, "bmcisctl"), stack.ClientEnv(), "reindex", "--addr", writer.Addr())
	require.NoError(t, err, "reindex with the current release")
	t.Logf("current release reindexed: %s", strings.Join(strings.Fields(out), " "))
	reader := stack.Service(stacktest.Search)
	deadline := time.Now().Add(60 * time.Second)
	for {
		// Read each time: the writers may retrain by themselves meanwhile
		// (the corpus keeps growing).
		active := activeModel(t, dbURL)
		require.NotEmpty(t, active, "no active model after the reindex")
		var st struct {
			EmbedderModel string `json:"embedderModel"`
		}
		got := gw.use(func(base string) outcome {
			if err := gatewayGet(client, base, key, "/v1/index/status", &st); err != nil {
				return outcome{Detail: err.Error()}
			}
			return outcome{OK: true}
		})
		switch {
		case got.OK && st.EmbedderModel == active:
			t.Logf("the previous reader loaded the current release's model %s", active)
			return
		case reader.LogContains("written by a newer release"):
			t.Logf("the previous reader refused the current release's model %s as newer and keeps keyword search", active)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the previous reader neither loaded the active model %s nor refused it within 60 s (index status model %q)", active, st.EmbedderModel)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkSnapshotAcrossReleases waits for the upgraded writer to write an
// index snapshot, then starts one more replica of the previous release: it
// starts from that snapshot, or says why not and builds from the chunks,
// and serves searches either way.
func checkSnapshotAcrossReleases(t *testing.T, stack *stacktest.Stack, writer *stacktest.Service, previous string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !wroteSnapshotSinceStart(writer.Logs()) {
		if time.Now().After(deadline) {
			t.Fatalf("the current writer wrote no index snapshot within 90 s:\n%s", writer.Logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
	old := stack.StartService(t, stacktest.Search, nil)
	defer old.Stop(t)
	built := indexBuilt(old.Logs())
	require.NotNil(t, built, "no index built line:\n%s", old.Logs())
	if built["source"] == "snapshot" {
		t.Logf("a previous-release replica started from the current release's snapshot (generation %v)", built["snapshot_generation"])
	} else {
		require.True(t, old.LogContains("index snapshot not used"), "a replica that did not use the snapshot says why:\n%s", old.Logs())
		t.Logf("a previous-release replica refused the current release's snapshot and built from the chunks")
	}
	out, err := run(t.Context(), filepath.Join(previous, "bmcisctl"), stack.ClientEnv(), "search", "--addr", old.Addr(), "-n", "3", "backup retention policy")
	require.NoError(t, err, "the previous-release replica serves searches")
	require.Contains(t, out, "Backup retention policy")
}

// wroteSnapshotSinceStart says whether the running process of a replica
// logged a snapshot write: after the last "index built" line (each start
// logs one before serving), or anywhere when the kept tail no longer holds
// it (then every kept line is the running process's).
func wroteSnapshotSinceStart(logs string) bool {
	lines := strings.Split(logs, "\n")
	from := 0
	for i, line := range lines {
		if msgOf(line) == "index built" {
			from = i
		}
	}
	for _, line := range lines[from:] {
		if msgOf(line) == "index snapshot written" {
			return true
		}
	}
	return false
}

func msgOf(line string) string {
	var l struct{ Msg string }
	_ = json.Unmarshal([]byte(line), &l)
	return l.Msg
}

func indexBuilt(logs string) map[string]any {
	for line := range strings.SplitSeq(logs, "\n") {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) == nil && l["msg"] == "index built" {
			return l
		}
	}
	return nil
}

func activeModel(t *testing.T, dbURL string) string {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var id string
	err = conn.QueryRow(t.Context(), `SELECT model_id FROM embedding_models WHERE active`).Scan(&id)
	if err == pgx.ErrNoRows {
		return ""
	}
	require.NoError(t, err)
	return id
}

// redisKeys lists the limiter's keys (the default prefix) that name the
// API key id (redis-cli comes with redis-server, as
// deploy/local/install-deps.sh installs it).
func redisKeys(t *testing.T, url, keyID string) []string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "redis-cli", "-u", url, "--scan", "--pattern", "bmcis:rl:*"+keyID+"*").CombinedOutput()
	require.NoError(t, err, "redis-cli: %s", out)
	keys := strings.Fields(string(out))
	sort.Strings(keys)
	return keys
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
