package monitoring_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/bmcis/knowledge/platform/stacktest"
)

func TestMain(m *testing.M) { stacktest.Main(m) }

// promtool is Debian's (deploy/local/install-deps.sh installs it): the
// files are checked by the tool Prometheus itself loads them with, so a
// missing promtool is a failure, not a skip.
func promtool(t *testing.T, args ...string) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	require.NoError(t, err, "promtool not found: run deploy/local/install-deps.sh")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, args...).CombinedOutput()
	require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

func TestAlertRulesLoadAndFire(t *testing.T) {
	out := promtool(t, "check", "rules", "alerts.yaml")
	require.Contains(t, out, "SUCCESS")
	out = promtool(t, "test", "rules", "alerts_test.yaml", "alerts_age_test.yaml")
	require.NotContains(t, out, "FAILED")
	// Every alert has a unit test that expects it to fire.
	tested := map[string]bool{}
	for _, f := range []string{"alerts_test.yaml", "alerts_age_test.yaml"} {
		var tf struct {
			Tests []struct {
				AlertRuleTest []struct {
					Alertname string `yaml:"alertname"`
					ExpAlerts []any  `yaml:"exp_alerts"`
				} `yaml:"alert_rule_test"`
			} `yaml:"tests"`
		}
		readYAML(t, f, &tf)
		for _, tc := range tf.Tests {
			for _, a := range tc.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					tested[a.Alertname] = true
				}
			}
		}
	}
	for _, r := range alertRules(t) {
		if r.Alert != "" {
			require.True(t, tested[r.Alert], "alert %s has no unit test that fires it", r.Alert)
		}
	}
}

// Each panel's queries parse as PromQL: promtool checks them as the
// expressions of a generated recording-rules file, with Grafana's
// variables replaced by what Grafana would put there.
func TestDashboardQueriesParse(t *testing.T) {
	exprs := dashboardExprs(t)
	require.NotEmpty(t, exprs)
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rule
	for i, e := range exprs {
		rules = append(rules, rule{Record: fmt.Sprintf("bmcis_dashboard_query_%d", i), Expr: grafanaVars.Replace(e)})
	}
	doc := map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}}
	b, err := yaml.Marshal(doc)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "dashboard-queries.yaml")
	require.NoError(t, os.WriteFile(path, b, 0o600))
	out := promtool(t, "check", "rules", path)
	require.Contains(t, out, fmt.Sprintf("SUCCESS: %d rules found", len(rules)))
}

// Every metric the rules and the dashboard name is one a service exposes:
// the three services and the gateway run as the real binaries, serve some
// traffic, and their /metrics are read.
func TestEveryMetricNamedIsExposed(t *testing.T) {
	named := map[string][]string{} // metric: where it is named
	for _, r := range alertRules(t) {
		name := r.Alert
		if name == "" {
			name = r.Record
		}
		for _, m := range metricNames(r.Expr) {
			named[m] = append(named[m], "alerts.yaml "+name)
		}
	}
	for _, e := range dashboardExprs(t) {
		for _, m := range metricNames(e) {
			named[m] = append(named[m], "dashboard.json")
		}
	}
	require.Contains(t, named, "bmcis_database_up", "the name extraction found the metrics")

	exposed := exposedMetrics(t)
	var missing []string
	for m, where := range named {
		if !exposed[m] {
			missing = append(missing, fmt.Sprintf("%s (in %s)", m, strings.Join(slices.Compact(where), ", ")))
		}
	}
	sort.Strings(missing)
	require.Empty(t, missing, "metrics no service exposes")
}

// grafanaVars are the dashboard's Grafana variables, as Grafana expands
// them for a query.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

type alertRule struct {
	Alert  string `yaml:"alert"`
	Record string `yaml:"record"`
	Expr   string `yaml:"expr"`
}

func alertRules(t *testing.T) []alertRule {
	t.Helper()
	var f struct {
		Groups []struct {
			Rules []alertRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	readYAML(t, "alerts.yaml", &f)
	var out []alertRule
	for _, g := range f.Groups {
		out = append(out, g.Rules...)
	}
	require.NotEmpty(t, out)
	return out
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, v), path)
}

type panel struct {
	ID      int     `json:"id"`
	Type    string  `json:"type"`
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

// dashboardExprs parses dashboard.json and returns every panel's queries;
// each panel but a row has at least one, and panel ids are unique.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("dashboard.json")
	require.NoError(t, err)
	var d struct {
		UID    string  `json:"uid"`
		Title  string  `json:"title"`
		Panels []panel `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(b, &d), "dashboard.json")
	require.NotEmpty(t, d.UID)
	require.NotEmpty(t, d.Title)
	ids := map[int]bool{}
	var exprs []string
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			require.False(t, ids[p.ID], "panel id %d used twice", p.ID)
			ids[p.ID] = true
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			require.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
			for _, tg := range p.Targets {
				require.NotEmpty(t, strings.TrimSpace(tg.Expr), "panel %q has an empty query", p.Title)
				exprs = append(exprs, tg.Expr)
			}
		}
	}
	walk(d.Panels)
	return exprs
}

var (
	promqlStrings  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promqlMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promqlRanges   = regexp.MustCompile(`\[[^\]]*\]`)
	promqlGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promqlIdent    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promqlKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true,
		"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
		"inf": true, "nan": true}
)

// metricNames returns the metric names a PromQL expression selects: its
// identifiers that are not in strings, label matchers, ranges or grouping
// lists, not functions (followed by "(") and not keywords.
func metricNames(expr string) []string {
	e := grafanaVars.Replace(expr)
	e = promqlStrings.ReplaceAllString(e, `""`)
	e = promqlMatchers.ReplaceAllString(e, " ")
	e = promqlRanges.ReplaceAllString(e, " ")
	e = promqlGrouping.ReplaceAllString(e, " ")
	var out []string
	for _, loc := range promqlIdent.FindAllStringIndex(e, -1) {
		id := e[loc[0]:loc[1]]
		if loc[0] > 0 && (e[loc[0]-1] >= '0' && e[loc[0]-1] <= '9' || e[loc[0]-1] == '.') {
			continue // the exponent or unit of a number
		}
		if rest := strings.TrimLeft(e[loc[1]:], " \t\n"); strings.HasPrefix(rest, "(") {
			continue // a function or aggregation
		}
		if promqlKeywords[strings.ToLower(id)] {
			continue
		}
		out = append(out, id)
	}
	return out
}

func TestMetricNames(t *testing.T) {
	require.Equal(t, []string{"bmcis_a_bucket", "bmcis_b"},
		metricNames(`histogram_quantile(0.99, sum by (service, le) (rate(bmcis_a_bucket{method!~".*/(X|Y)"}[$__rate_interval])))
			/ on (job) group_left max without (instance) (bmcis_b) > 2 * 86400 and 1e3 > bool 0`))
	require.Equal(t, []string{"bmcis_c"}, metricNames(`time() - max(bmcis_c{provider="builtin"}) > 14 * 86400`))
}

// exposedMetrics runs search, vendorgraph, auth, the gateway and the MCP
// adapter, makes them serve what fills their labelled series (an ingestion,
// a sync, a graph import, keys, REST searches, a tool call), and returns the
// sample names their /metrics carry: a histogram's _bucket, _sum and
// _count, a counter's _total.
func exposedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	s := stacktest.Start(t, stacktest.Options{})
	s.IngestDemoDocs(t)
	s.ImportDemoGraph(t)
	key := s.CreateKey(t, stacktest.Key{Name: "monitoring"})
	syncDir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(syncDir, "a.md"), []byte("# A\n\nThe walrus page.\n"), 0o600))
	s.Ctl(t, "sync", "handbook", syncDir)

	gw := startGateway(t, s)
	adapterMetrics := startAdapter(t, s, key)
	for _, k := range []string{key, "bmcis_notakey_000000000000000000000000"} {
		req, err := http.NewRequest(http.MethodPost, gw.base+"/v1/search", strings.NewReader(`{"query":"walrus"}`))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+k)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}

	exposed := map[string]bool{"up": true} // Prometheus's own, per target
	urls := []string{gw.metricsURL, adapterMetrics}
	for _, name := range stacktest.AllServices {
		urls = append(urls, s.Service(name).MetricsURL())
	}
	for _, u := range urls {
		resp, err := http.Get(u)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, u)
		sc := bufio.NewScanner(strings.NewReader(string(body)))
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			name, _, _ := strings.Cut(line, " ")
			name, _, _ = strings.Cut(name, "{")
			exposed[name] = true
		}
	}
	return exposed
}

// startAdapter runs the MCP adapter binary over streamable HTTP with its
// metrics on, makes one tool call with key, and returns its metrics URL.
func startAdapter(t *testing.T, s *stacktest.Stack, key string) string {
	t.Helper()
	// The metrics listener takes an address, not a socket: a port the
	// kernel just handed out and released is free in practice.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	a := s.StartAdapterHTTP(t, map[string]string{"BMCIS_MCP_METRICS_ADDR": addr})
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"semantic_search","arguments":{"query":"walrus"}}}`
	req, err := http.NewRequest(http.MethodPost, a.Base+"/mcp", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return "http://" + addr + "/metrics"
}

type gateway struct{ base, metricsURL string }

// startGateway runs the gateway binary in front of s, on loopback ports of
// the kernel's choice read back from its log, until the test ends.
func startGateway(t *testing.T, s *stacktest.Stack) gateway {
	t.Helper()
	env := os.Environ()
	for k, v := range s.ClientEnv() {
		env = append(env, k+"="+v)
	}
	env = append(env, "BMCIS_GATEWAY_ADDR=127.0.0.1:0", "BMCIS_GATEWAY_METRICS_ADDR=127.0.0.1:0",
		"BMCIS_MCP_HEALTH_URL=off", "BMCIS_LOG_LEVEL=info")
	for _, name := range stacktest.AllServices {
		env = append(env, "BMCIS_"+strings.ToUpper(name)+"_METRICS_URL="+s.Service(name).MetricsURL())
	}
	cmd := exec.Command(stacktest.Binary(t, "gateway"))
	cmd.Env = env
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = cmd.Stdout
	require.NoError(t, cmd.Start())
	var mu sync.Mutex
	var logs strings.Builder
	var gw gateway
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			mu.Lock()
			logs.WriteString(sc.Text() + "\n")
			var l struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &l) == nil {
				switch l.Msg {
				case "metrics listening":
					gw.metricsURL = "http://" + l.Addr + "/metrics"
				case "gateway listening":
					gw.base = "http://" + l.Addr
					close(ready)
				}
			}
			mu.Unlock()
		}
	}()
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	select {
	case <-ready:
	case <-exited:
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("gateway exited before serving:\n%s", logs.String())
	case <-time.After(90 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("gateway did not serve within 90 s:\n%s", logs.String())
	}
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, gw.metricsURL, "the gateway logs its metrics address before it serves")
	return gw
}
