package faults_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bmcis/knowledge/platform/stacktest"
)

// EnvRun turns the suite on; without it every test is skipped, so that
// `make test` stays fast and `make test-faults` runs it alone.
const EnvRun = "BMCIS_FAULTS"

// recoveryBound is how soon after a fault clears clients must succeed again.
const recoveryBound = 2 * time.Second

func TestMain(m *testing.M) { stacktest.Main(m) }

func requireSuite(t *testing.T) {
	t.Helper()
	if os.Getenv(EnvRun) != "1" {
		t.Skipf("fault suite: set %s=1 (make test-faults)", EnvRun)
	}
}

// envOptions shape one scenario's system.
type envOptions struct {
	// RedisMode "" keeps auth's limiter in memory; "open" or "closed" puts
	// it on a private Redis with that failure mode.
	RedisMode string
	// AuthReplicas is how many auth processes share the database (and the
	// Redis); the adapter is given the first. 0 means 1.
	AuthReplicas int
	// Data loads a few documents (smallDocs) and the demo vendor graph.
	Data bool
	// SearchEnv is added to search's environment.
	SearchEnv map[string]string
}

// env is one scenario's system: a private PostgreSQL (and Redis), the three
// services, and an API key with limits no load reaches.
type env struct {
	pg    *stacktest.Postgres
	redis *stacktest.Redis
	stack *stacktest.Stack
	auths []*stacktest.Service
	key   string
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	requireSuite(t)
	began := time.Now()
	e := &env{pg: stacktest.StartPostgres(t)}
	t.Logf("private PostgreSQL ready in %s", time.Since(began))
	authEnv := map[string]string{
		// A short key cache, so that the database outage reaches auth within
		// the scenario (stale records then keep serving, with a warning).
		"BMCIS_AUTH_KEY_CACHE_TTL": "1s",
	}
	if o.RedisMode != "" {
		e.redis = stacktest.StartRedis(t)
		authEnv["REDIS_URL"] = e.redis.URL()
		authEnv["RATE_LIMIT_ON_REDIS_FAILURE"] = o.RedisMode
		authEnv["BMCIS_RATE_LIMIT_REDIS_TIMEOUT"] = "200ms"
	}
	e.stack = stacktest.Start(t, stacktest.Options{
		DatabaseURL: e.pg.URL(),
		NoRedis:     true,
		ServiceEnv:  map[string]map[string]string{stacktest.Auth: authEnv, stacktest.Search: o.SearchEnv},
	})
	e.auths = []*stacktest.Service{e.stack.Service(stacktest.Auth)}
	for i := 1; i < max(1, o.AuthReplicas); i++ {
		e.auths = append(e.auths, e.stack.StartService(t, stacktest.Auth, authEnv))
	}
	t.Logf("services up at %s", time.Since(began))
	if o.Data {
		e.stack.IngestDocs(t, smallDocs)
		e.stack.ImportDemoGraph(t)
		t.Logf("data loaded at %s", time.Since(began))
	}
	e.key = e.stack.CreateKey(t, stacktest.Key{Name: "faults", PerMinute: 10_000_000, PerHour: 10_000_000, PerDay: 100_000_000})
	return e
}

// smallDocs is the scenarios' corpus: small, so that loading it costs little
// of the suite's time; the demo graph gives the vendor lookups.
var smallDocs = map[string]string{
	"operations/incidents.md": "# Incident severity levels\n\nSEV1 is a full outage; SEV2 a degraded service; SEV3 a minor fault. Escalate SEV1 to the on-call lead at once.\n",
	"operations/backups.md":   "# Backup retention policy\n\nNightly backups are kept for 35 days, monthly ones for a year. Restores are tested every quarter.\n",
	"security/keys.md":        "# Key rotation\n\nAPI keys expire after 90 days. Rotate a key before it expires; revoke a leaked key at once.\n",
	"security/encryption.md":  "# Encryption at rest\n\nEvery volume is encrypted with AES-256; keys live in the KMS and rotate yearly.\n",
	"vendors/contracts.md":    "# Vendor contracts\n\nContracts with strategic vendors are reviewed every year by procurement and legal.\n",
	"vendors/onboarding.md":   "# Vendor onboarding\n\nA new vendor passes a security review and signs the data processing agreement before access.\n",
}

// adapter is a running mcp-adapter binary over streamable HTTP.
type adapter struct {
	base string
	http *http.Client
}

// startAdapter runs the adapter binary against the stack; authAddr, when
// set, is the auth replica it uses.
func (e *env) startAdapter(t *testing.T, authAddr string) *adapter {
	t.Helper()
	extra := map[string]string{}
	if authAddr != "" {
		extra["BMCIS_AUTH_ADDR"] = authAddr
	}
	a := e.stack.StartAdapterHTTP(t, extra)
	return &adapter{base: a.Base, http: &http.Client{Timeout: 30 * time.Second}}
}

// result is one tool call as a client sees it.
type result struct {
	// Status is the envelope's _metadata.status ("success", "error", ...).
	Status string
	// Code is the envelope's error code ("" on success).
	Code string
	// Retryable is the error's retryable flag.
	Retryable bool
	// Warnings are the envelope's warning codes.
	Warnings []string
	// Envelope is the whole structured content.
	Envelope map[string]any
	// Transport is a failure below MCP (HTTP, JSON-RPC); the system must
	// never produce one.
	Transport error
}

var rpcID atomic.Int64

// call calls one tool over MCP (JSON-RPC over POST /mcp; the adapter is
// stateless, so no session is needed) with key.
func (a *adapter) call(key, tool string, args map[string]any) result {
	body, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": rpcID.Add(1), "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": args},
	})
	req, err := http.NewRequest(http.MethodPost, a.base+"/mcp", bytes.NewReader(body))
	if err != nil {
		return result{Transport: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := a.http.Do(req)
	if err != nil {
		return result{Transport: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return result{Transport: err}
	}
	if resp.StatusCode != http.StatusOK {
		return result{Transport: fmt.Errorf("HTTP %d: %s", resp.StatusCode, raw)}
	}
	raw = stacktest.MCPReplyJSON(raw)
	var rpc struct {
		Error  *struct{ Message string }
		Result struct {
			StructuredContent map[string]any `json:"structuredContent"`
		}
	}
	if err := json.Unmarshal(raw, &rpc); err != nil {
		return result{Transport: fmt.Errorf("decode %q: %w", raw, err)}
	}
	if rpc.Error != nil {
		return result{Transport: fmt.Errorf("JSON-RPC error: %s", rpc.Error.Message)}
	}
	r := result{Envelope: rpc.Result.StructuredContent}
	if md, ok := r.Envelope["_metadata"].(map[string]any); ok {
		r.Status, _ = md["status"].(string)
	}
	if ws, ok := r.Envelope["warnings"].([]any); ok {
		for _, w := range ws {
			if m, ok := w.(map[string]any); ok {
				c, _ := m["code"].(string)
				r.Warnings = append(r.Warnings, c)
			}
		}
	}
	if e, ok := r.Envelope["error"].(map[string]any); ok {
		r.Code, _ = e["code"].(string)
		r.Retryable, _ = e["retryable"].(bool)
	}
	if r.Status == "" {
		r.Transport = fmt.Errorf("no envelope in %s", raw)
	}
	return r
}

func (r result) ok() bool { return r.Transport == nil && r.Code == "" && r.Status != "error" }

func (r result) String() string {
	if r.Transport != nil {
		return "transport: " + r.Transport.Error()
	}
	if r.Code != "" {
		return fmt.Sprintf("%s %s (retryable %t)", r.Status, r.Code, r.Retryable)
	}
	return fmt.Sprintf("%s %v", r.Status, r.Warnings)
}

// load runs calls from workers until stop closes, at most max calls in all,
// and records each result with its start time.
type load struct {
	mu      sync.Mutex
	results []timed
	stop    chan struct{}
	done    sync.WaitGroup
}

type timed struct {
	start, end time.Time
	r          result
}

func startLoad(workers, maxCalls int, call func(i int) result) *load {
	l := &load{stop: make(chan struct{})}
	var n atomic.Int64
	for range workers {
		l.done.Go(func() {
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				i := int(n.Add(1))
				if i > maxCalls {
					return
				}
				start := time.Now()
				r := call(i)
				l.mu.Lock()
				l.results = append(l.results, timed{start: start, end: time.Now(), r: r})
				l.mu.Unlock()
				time.Sleep(20 * time.Millisecond) // a steady load, not a flood of the 2 CI cores
			}
		})
	}
	return l
}

func (l *load) finish() []timed {
	close(l.stop)
	l.done.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]timed(nil), l.results...)
}

// waitAllOK runs every check at once, each polling every 50 ms until it
// holds or limit passes, and returns how long after since each first held.
// A check that never holds fails the test. Checks run off the test's
// goroutine: they must not fail the test themselves.
func waitAllOK(t *testing.T, since time.Time, limit time.Duration, checks map[string]func() bool) map[string]time.Duration {
	t.Helper()
	var mu sync.Mutex
	back := map[string]time.Duration{}
	var wg sync.WaitGroup
	for name, check := range checks {
		wg.Go(func() {
			for time.Since(since) < limit {
				if check() {
					mu.Lock()
					back[name] = time.Since(since)
					mu.Unlock()
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	for name := range checks {
		if _, ok := back[name]; !ok {
			t.Fatalf("%s: not back within %s", name, limit)
		}
	}
	return back
}

// waitOK calls until one succeeds and returns when it started, failing the
// test after limit.
func waitOK(t *testing.T, limit time.Duration, call func() result) time.Duration {
	t.Helper()
	start := time.Now()
	var last result
	for time.Since(start) < limit {
		last = call()
		if last.ok() {
			return time.Since(start)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no success within %s; last: %s", limit, last)
	return 0
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
