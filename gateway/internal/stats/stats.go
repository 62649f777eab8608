// Package stats is the dashboard's /api/stats: it scrapes the services'
// (and the adapter's) /metrics and the gateway's own registry on a timer,
// keeps the recent scrapes, and reduces them to requests, errors, latency
// quantiles, cache hit rates and denials per service, RPC, tool and route.
package stats

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/bmcis/knowledge/gateway/internal/backends"
	"github.com/bmcis/knowledge/gateway/internal/catalog"
	"github.com/bmcis/knowledge/gateway/internal/edgemetrics"
	"github.com/bmcis/knowledge/gateway/internal/httpjson"
)

// Metric names read from the services' /metrics (platform/grpcserver) and,
// when they exist, from service-specific and adapter metrics.
const (
	mHandled      = "bmcis_grpc_server_handled_total"    // {service, method, code}
	mHandling     = "bmcis_grpc_server_handling_seconds" // histogram {service, method}
	mStartTime    = "process_start_time_seconds"
	mBuildInfo    = "bmcis_build_info"                // gauge {version}
	mAuthChecks   = "bmcis_auth_checks_total"         // {outcome}: allowed, auth_required, ..., rate_limit
	mAuthDenials  = "bmcis_auth_denials_total"        // {reason}
	mToolCalls    = "bmcis_mcp_tool_calls_total"      // adapter {tool, outcome}
	mToolHandling = "bmcis_mcp_tool_handling_seconds" // adapter histogram {tool}
)

// labelledCaches are caches counted by one family with a hit/miss label.
var labelledCaches = []struct{ family, label, hit, miss, cache string }{
	// auth's verified-key cache: lookups answered from memory or the database.
	{"bmcis_auth_key_lookups_total", "source", "cache", "database", "verified-keys"},
}

// cacheFamily matches bmcis_<scope>_cache_hits_total / _misses_total and
// bmcis_<scope>_cache_requests_total{result="hit"|"miss"}.
var cacheFamily = regexp.MustCompile(`^bmcis_([a-z0-9_]+?)_cache_(hits|misses|requests)_total$`)

// series is one target's metrics, reduced to what /api/stats shows.
type series struct {
	ok        bool
	err       string
	at        time.Time
	startTime float64
	version   string
	calls     map[string]map[string]float64 // key (method, tool, route) → code/outcome → count
	latency   map[string]hist               // key → histogram
	caches    map[string][2]float64         // cache name → hits, misses
	denials   map[string]float64            // reason → count (auth service or gateway)
	hasDenial bool
}

func newSeries() *series {
	return &series{calls: map[string]map[string]float64{}, latency: map[string]hist{}, caches: map[string][2]float64{}, denials: map[string]float64{}}
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func value(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue()
	}
	return 0
}

// exemptMethod reports health checks and reflection, left out of the stats.
func exemptMethod(m string) bool {
	return strings.HasPrefix(m, "/grpc.health.v1.") || strings.HasPrefix(m, "/grpc.reflection.")
}

// parseFamilies reduces metric families into a series. callName and
// latencyName pick the call counter and histogram (services, adapter or the
// gateway itself); keyLabel names the label identifying a call.
func parseFamilies(fams map[string]*dto.MetricFamily, callName, latencyName, keyLabel, codeLabel string) *series {
	s := newSeries()
	s.ok = true
	if f := fams[callName]; f != nil {
		for _, m := range f.GetMetric() {
			k := label(m, keyLabel)
			if exemptMethod(k) {
				continue
			}
			if s.calls[k] == nil {
				s.calls[k] = map[string]float64{}
			}
			s.calls[k][label(m, codeLabel)] += value(m)
		}
	}
	if f := fams[latencyName]; f != nil {
		for _, m := range f.GetMetric() {
			k := label(m, keyLabel)
			if exemptMethod(k) || m.GetHistogram() == nil {
				continue
			}
			s.latency[k] = s.latency[k].add(histFrom(m.GetHistogram()))
		}
	}
	if f := fams[mStartTime]; f != nil && len(f.GetMetric()) > 0 {
		s.startTime = value(f.GetMetric()[0])
	}
	if f := fams[mBuildInfo]; f != nil && len(f.GetMetric()) > 0 {
		s.version = label(f.GetMetric()[0], "version")
	}
	for name, f := range fams {
		mm := cacheFamily.FindStringSubmatch(name)
		if mm == nil {
			continue
		}
		for _, m := range f.GetMetric() {
			cache := mm[1]
			if c := label(m, "cache"); c != "" {
				cache += "/" + c
			}
			hm := s.caches[cache]
			switch mm[2] {
			case "hits":
				hm[0] += value(m)
			case "misses":
				hm[1] += value(m)
			default:
				switch strings.ToLower(label(m, "result")) {
				case "hit":
					hm[0] += value(m)
				case "miss":
					hm[1] += value(m)
				}
			}
			s.caches[cache] = hm
		}
	}
	for _, c := range labelledCaches {
		f := fams[c.family]
		if f == nil {
			continue
		}
		hm := s.caches[c.cache]
		for _, m := range f.GetMetric() {
			switch label(m, c.label) {
			case c.hit:
				hm[0] += value(m)
			case c.miss:
				hm[1] += value(m)
			}
		}
		s.caches[c.cache] = hm
	}
	for _, name := range []string{mAuthChecks, mAuthDenials, edgemetrics.AuthDenials} {
		f := fams[name]
		if f == nil {
			continue
		}
		s.hasDenial = true
		for _, m := range f.GetMetric() {
			r := ""
			for _, l := range []string{"result", "outcome", "reason"} {
				if r = strings.ToUpper(label(m, l)); r != "" {
					break
				}
			}
			if r == "" || r == "ALLOWED" || r == "OK" {
				continue
			}
			s.denials[r] += value(m)
		}
	}
	return s
}

// scrape fetches and parses one /metrics endpoint.
func scrape(ctx context.Context, client *http.Client, url string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("not reachable: %s", backends.UnreachableReason(err.Error()))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics endpoint answered %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return nil, fmt.Errorf("unreadable metrics: %w", err)
	}
	return fams, nil
}

// snapshot is one round of scrapes.
type snapshot struct {
	at      time.Time
	targets map[string]*series // by server name
	gateway *series            // the gateway's own registry
}

// Target is one /metrics endpoint to scrape: a service's, or the MCP
// adapter's (named backends.MCPAdapter).
type Target struct{ Name, URL string }

// Collector scrapes the metrics endpoints on a timer and keeps the recent
// snapshots for windowed figures and the latency chart.
type Collector struct {
	own      prometheus.Gatherer // the gateway's own registry (edgemetrics)
	client   *http.Client
	targets  []Target
	interval time.Duration
	keep     int

	mu    sync.Mutex
	snaps []*snapshot
	busy  sync.Mutex // one scrape round at a time
}

// NewCollector scrapes targets and own every interval and keeps the last
// keep rounds.
func NewCollector(own prometheus.Gatherer, interval time.Duration, keep int, targets ...Target) *Collector {
	return &Collector{own: own, client: &http.Client{Timeout: 5 * time.Second}, targets: targets, interval: interval, keep: keep}
}

func (c *Collector) collect(ctx context.Context) *snapshot {
	c.busy.Lock()
	defer c.busy.Unlock()
	snap := &snapshot{at: time.Now(), targets: map[string]*series{}}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, t := range c.targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sctx, cancel := context.WithTimeout(ctx, max(c.interval, 2*time.Second))
			defer cancel()
			fams, err := scrape(sctx, c.client, t.URL)
			var s *series
			switch {
			case err != nil:
				s = newSeries()
				s.err = err.Error()
			case t.Name == backends.MCPAdapter:
				s = parseFamilies(fams, mToolCalls, mToolHandling, "tool", "outcome")
			default:
				s = parseFamilies(fams, mHandled, mHandling, "method", "code")
			}
			s.at = time.Now()
			mu.Lock()
			snap.targets[t.Name] = s
			mu.Unlock()
		}()
	}
	wg.Wait()
	if fams, err := c.own.Gather(); err == nil {
		m := make(map[string]*dto.MetricFamily, len(fams))
		for _, f := range fams {
			m[f.GetName()] = f
		}
		snap.gateway = parseFamilies(m, edgemetrics.Requests, edgemetrics.Latency, "route", "code")
	} else {
		snap.gateway = newSeries()
	}
	c.mu.Lock()
	c.snaps = append(c.snaps, snap)
	if len(c.snaps) > c.keep {
		c.snaps = append([]*snapshot(nil), c.snaps[len(c.snaps)-c.keep:]...)
	}
	c.mu.Unlock()
	return snap
}

// Run scrapes until ctx ends.
func (c *Collector) Run(ctx context.Context) {
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		c.collect(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// recent returns the kept snapshots, scraping first when the newest is stale.
func (c *Collector) recent(ctx context.Context) []*snapshot {
	c.mu.Lock()
	stale := len(c.snaps) == 0 || time.Since(c.snaps[len(c.snaps)-1].at) > 2*c.interval
	c.mu.Unlock()
	if stale {
		c.collect(ctx)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*snapshot(nil), c.snaps...)
}

// latest returns the newest snapshot, or nil.
func (c *Collector) latest() *snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.snaps) == 0 {
		return nil
	}
	return c.snaps[len(c.snaps)-1]
}

// ServerInfo is what the newest scrape of a server's metrics says about the
// process: its start time (process_start_time_seconds, 0 when absent) and
// version (bmcis_build_info, empty when absent). ok is false when there was
// no successful scrape.
func (c *Collector) ServerInfo(name string) (startTime float64, version string, ok bool) {
	latest := c.latest()
	if latest == nil {
		return 0, "", false
	}
	s := latest.targets[name]
	if s == nil || !s.ok {
		return 0, "", false
	}
	return s.startTime, s.version, true
}

// Stats returns what /api/stats shows, scraping first when the last scrape
// is stale.
func (c *Collector) Stats(ctx context.Context) Response {
	return c.buildStats(c.recent(ctx))
}

// --- /api/stats ---

// ms converts seconds to milliseconds, rounded to microseconds; nil for NaN.
func ms(sec float64) *float64 {
	if math.IsNaN(sec) {
		return nil
	}
	v := math.Round(sec*1e6) / 1e3
	return &v
}

func rate(num, den float64) *float64 {
	if den == 0 {
		return nil
	}
	v := num / den
	return &v
}

type callStats struct {
	Requests  float64  `json:"requests"`
	Errors    float64  `json:"errors"`
	ErrorRate *float64 `json:"errorRate"`
	P50Ms     *float64 `json:"p50Ms"`
	P95Ms     *float64 `json:"p95Ms"`
	// Over the chart's window (oldest kept scrape to newest).
	RecentRequests float64  `json:"recentRequests"`
	RecentP50Ms    *float64 `json:"recentP50Ms"`
	RecentP95Ms    *float64 `json:"recentP95Ms"`
}

// RPCStat is one service method in /api/stats.
type RPCStat struct {
	Service string `json:"service"`
	Method  string `json:"method"`
	RPC     string `json:"rpc"`
	callStats
}

type toolStat struct {
	Name    string `json:"name"`
	Source  string `json:"source"` // "mcp-adapter" (its own metrics) or "rpc" (the backing RPC's)
	Service string `json:"service"`
	RPC     string `json:"rpc"`
	callStats
}

type routeStat struct {
	Route string `json:"route"`
	callStats
}

type serviceStat struct {
	Name      string  `json:"name"`
	Scraped   bool    `json:"scraped"`
	Error     *string `json:"error"`
	ScrapedAt *string `json:"scrapedAt"`
	Requests  float64 `json:"requests"`
	Errors    float64 `json:"errors"`
}

type cacheStat struct {
	Service string   `json:"service"`
	Cache   string   `json:"cache"`
	Hits    float64  `json:"hits"`
	Misses  float64  `json:"misses"`
	HitRate *float64 `json:"hitRate"`
}

type historyPoint struct {
	Timestamp   string   `json:"timestamp"`
	Requests    float64  `json:"requests"`
	Errors      float64  `json:"errors"`
	P50Ms       *float64 `json:"p50Ms"`
	P95Ms       *float64 `json:"p95Ms"`
	RestP50Ms   *float64 `json:"restP50Ms"`
	RestP95Ms   *float64 `json:"restP95Ms"`
	RestRequest float64  `json:"restRequests"`
}

// Response is the body of /api/stats.
type Response struct {
	Timestamp       string         `json:"timestamp"`
	IntervalSeconds float64        `json:"intervalSeconds"`
	WindowSeconds   float64        `json:"windowSeconds"`
	Totals          statsTotals    `json:"totals"`
	Services        []serviceStat  `json:"services"`
	RPCs            []RPCStat      `json:"rpcs"`
	Tools           []toolStat     `json:"tools"`
	Routes          []routeStat    `json:"routes"`
	Cache           []cacheStat    `json:"cache"`
	RateLimit       rateLimitStat  `json:"rateLimit"`
	History         []historyPoint `json:"history"`
}

type statsTotals struct {
	Requests         float64 `json:"requests"`
	Errors           float64 `json:"errors"`
	RestRequests     float64 `json:"restRequests"`
	RestErrors       float64 `json:"restErrors"`
	AuthDenials      float64 `json:"authDenials"`
	RateLimitDenials float64 `json:"rateLimitDenials"`
}

type rateLimitStat struct {
	// Denials the gateway answered 429 to.
	GatewayDenials float64 `json:"gatewayDenials"`
	// Rate-limit denials the auth service counted for every caller, when it
	// exports them (null otherwise).
	ServiceDenials *float64 `json:"serviceDenials"`
	// Denials by reason (AUTH_REQUIRED, RATE_LIMIT, ...): the auth service's
	// counts when it exports them, else the gateway's.
	ByReason map[string]float64 `json:"byReason"`
}

func isErrorCode(code string) bool {
	switch strings.ToUpper(code) {
	case "OK", "":
		return false
	}
	if n, err := strconv.Atoi(code); err == nil { // HTTP status (gateway routes)
		return n >= 400
	}
	return strings.ToLower(code) != "ok" && strings.ToLower(code) != "success"
}

func sumCalls(m map[string]float64) (req, errs float64) {
	for code, v := range m {
		req += v
		if isErrorCode(code) {
			errs += v
		}
	}
	return req, errs
}

func makeCallStats(calls map[string]float64, h, oldH hist, haveOld bool) callStats {
	req, errs := sumCalls(calls)
	cs := callStats{Requests: req, Errors: errs, ErrorRate: rate(errs, req), P50Ms: ms(h.quantile(.5)), P95Ms: ms(h.quantile(.95))}
	if haveOld {
		d := h.sub(oldH)
		cs.RecentRequests = d.count
		cs.RecentP50Ms, cs.RecentP95Ms = ms(d.quantile(.5)), ms(d.quantile(.95))
	}
	return cs
}

func shortMethod(full string) string {
	if i := strings.LastIndex(full, "/"); i >= 0 {
		return full[i+1:]
	}
	return full
}

func isRateLimit(reason string) bool { return strings.Contains(strings.ToUpper(reason), "RATE") }

// buildStats turns the kept snapshots into /api/stats.
func (c *Collector) buildStats(snaps []*snapshot) Response {
	out := Response{
		Timestamp:       httpjson.Time(time.Now()),
		IntervalSeconds: c.interval.Seconds(),
		Services:        []serviceStat{}, RPCs: []RPCStat{}, Tools: []toolStat{}, Routes: []routeStat{},
		Cache: []cacheStat{}, History: []historyPoint{},
		RateLimit: rateLimitStat{ByReason: map[string]float64{}},
	}
	if len(snaps) == 0 {
		return out
	}
	last, first := snaps[len(snaps)-1], snaps[0]
	haveOld := len(snaps) > 1
	out.WindowSeconds = last.at.Sub(first.at).Seconds()

	targetNames := make([]string, 0, len(c.targets))
	for _, t := range c.targets {
		targetNames = append(targetNames, t.Name)
	}
	rpcHist := map[string]hist{} // "service method" → latest histogram, for tools
	rpcCalls := map[string]map[string]float64{}
	rpcOld := map[string]hist{}
	for _, name := range targetNames {
		s := last.targets[name]
		if s == nil {
			continue
		}
		ss := serviceStat{Name: name, Scraped: s.ok}
		if !s.ok {
			e := s.err
			ss.Error = &e
		} else {
			at := httpjson.Time(s.at)
			ss.ScrapedAt = &at
		}
		old := first.targets[name]
		if name != backends.MCPAdapter {
			methods := sortedKeys(s.calls, s.latency)
			for _, m := range methods {
				oldH, ok := hist{}, false
				if old != nil && old.ok {
					oldH, ok = old.latency[m]
				}
				cs := makeCallStats(s.calls[m], s.latency[m], oldH, haveOld && ok)
				if haveOld && !ok { // the method first appeared inside the window
					d := s.latency[m]
					cs.RecentRequests, cs.RecentP50Ms, cs.RecentP95Ms = d.count, ms(d.quantile(.5)), ms(d.quantile(.95))
				}
				out.RPCs = append(out.RPCs, RPCStat{Service: name, Method: m, RPC: shortMethod(m), callStats: cs})
				ss.Requests += cs.Requests
				ss.Errors += cs.Errors
				rpcHist[name+" "+shortMethod(m)] = s.latency[m]
				rpcCalls[name+" "+shortMethod(m)] = s.calls[m]
				rpcOld[name+" "+shortMethod(m)] = oldH
			}
			out.Totals.Requests += ss.Requests
			out.Totals.Errors += ss.Errors
		}
		for _, cache := range sortedKeys(s.caches, map[string]bool(nil)) {
			hm := s.caches[cache]
			out.Cache = append(out.Cache, cacheStat{Service: name, Cache: cache, Hits: hm[0], Misses: hm[1], HitRate: rate(hm[0], hm[0]+hm[1])})
		}
		if name == backends.Auth && s.hasDenial {
			var rl float64
			for reason, v := range s.denials {
				out.RateLimit.ByReason[reason] = v
				if isRateLimit(reason) {
					rl += v
				}
			}
			out.RateLimit.ServiceDenials = &rl
		}
		out.Services = append(out.Services, ss)
	}

	// Tools: the adapter's own metrics when it exports them, else the RPC behind each tool.
	adapter := last.targets[backends.MCPAdapter]
	for _, t := range catalog.Tools() {
		ts := toolStat{Name: t.Name, Service: t.Backend(), RPC: t.RPC()}
		if adapter != nil && adapter.ok && (adapter.calls[t.Name] != nil || adapter.latency[t.Name].count > 0) {
			ts.Source = backends.MCPAdapter
			var oldH hist
			ok := false
			if o := first.targets[backends.MCPAdapter]; o != nil && o.ok {
				oldH, ok = o.latency[t.Name]
			}
			ts.callStats = makeCallStats(adapter.calls[t.Name], adapter.latency[t.Name], oldH, haveOld && ok)
		} else {
			ts.Source = "rpc"
			k := t.Backend() + " " + t.RPC()
			_, ok := rpcOld[k]
			ts.callStats = makeCallStats(rpcCalls[k], rpcHist[k], rpcOld[k], haveOld && ok)
		}
		out.Tools = append(out.Tools, ts)
	}

	// The gateway's own routes.
	gw := last.gateway
	if gw != nil {
		for _, route := range sortedKeys(gw.calls, gw.latency) {
			var oldH hist
			ok := false
			if first.gateway != nil {
				oldH, ok = first.gateway.latency[route]
			}
			cs := makeCallStats(gw.calls[route], gw.latency[route], oldH, haveOld && ok)
			out.Routes = append(out.Routes, routeStat{Route: route, callStats: cs})
			out.Totals.RestRequests += cs.Requests
			out.Totals.RestErrors += cs.Errors
		}
		for reason, v := range gw.denials {
			out.Totals.AuthDenials += v
			if isRateLimit(reason) {
				out.RateLimit.GatewayDenials += v
			}
			if out.RateLimit.ServiceDenials == nil {
				out.RateLimit.ByReason[reason] = v
			}
		}
	}
	out.Totals.RateLimitDenials = out.RateLimit.GatewayDenials
	if out.RateLimit.ServiceDenials != nil {
		out.Totals.RateLimitDenials = max(*out.RateLimit.ServiceDenials, out.RateLimit.GatewayDenials)
	}

	// History: per scrape interval, the services' RPC latency and the REST layer's.
	for i := 1; i < len(snaps); i++ {
		prev, cur := snaps[i-1], snaps[i]
		var rpcD, restD hist
		var reqs, errs float64
		for _, name := range targetNames {
			if name == backends.MCPAdapter {
				continue
			}
			cs, ps := cur.targets[name], prev.targets[name]
			if cs == nil || !cs.ok {
				continue
			}
			for m, h := range cs.latency {
				var ph hist
				if ps != nil && ps.ok {
					ph = ps.latency[m]
				}
				rpcD = rpcD.add(h.sub(ph))
			}
			for m, calls := range cs.calls {
				r, e := sumCalls(calls)
				if ps != nil && ps.ok {
					pr, pe := sumCalls(ps.calls[m])
					if r >= pr {
						r, e = r-pr, max(e-pe, 0)
					}
				}
				reqs += r
				errs += e
			}
		}
		if cur.gateway != nil {
			for route, h := range cur.gateway.latency {
				if !strings.Contains(route, " /v1/") { // the REST API only, not dashboard polls
					continue
				}
				var ph hist
				if prev.gateway != nil {
					ph = prev.gateway.latency[route]
				}
				restD = restD.add(h.sub(ph))
			}
		}
		out.History = append(out.History, historyPoint{
			Timestamp: httpjson.Time(cur.at), Requests: reqs, Errors: errs,
			P50Ms: ms(rpcD.quantile(.5)), P95Ms: ms(rpcD.quantile(.95)),
			RestP50Ms: ms(restD.quantile(.5)), RestP95Ms: ms(restD.quantile(.95)), RestRequest: restD.count,
		})
	}
	return out
}

func sortedKeys[V any, W any](a map[string]V, b map[string]W) []string {
	seen := map[string]bool{}
	for k := range a {
		seen[k] = true
	}
	for k := range b {
		seen[k] = true
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
