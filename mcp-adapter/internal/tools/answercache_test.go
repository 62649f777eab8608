package tools_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/auditlog"
	"github.com/bmcis/knowledge/platform/grpcclient"
	"github.com/bmcis/knowledge/platform/stacktest"

	"github.com/bmcis/knowledge/mcp-adapter/internal/answercache"
	"github.com/bmcis/knowledge/mcp-adapter/internal/indexwatch"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tools"
)

// fakeClock is the answer cache's clock, moved by the test.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *fakeClock) advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// numbatDoc names the document a chunk of numbatRecords comes from.
func numbatDoc(text string) string {
	for doc, words := range map[string]string{"pub": "every employee", "grp": "pay bands", "sec": "incident response"} {
		if strings.Contains(text, words) {
			return doc
		}
	}
	return text
}

// TestAnswerCache: on a stack of its own (its restricted documents would
// change the shared stack's answers, and it stops search), one adapter with
// the adapter's credential (WatchIndex is its alone) and an answer cache on
// a clock the test moves, serving several keys.
func TestAnswerCache(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{})
	records := []string{
		`{"_id":"pub","title":"Public","text":"The numbat field guide for every employee.","category":"people"}`,
		`{"_id":"grp","title":"Pay","text":"The numbat field guide on pay bands.","category":"people","access":["group:a"]}`,
		`{"_id":"sec","title":"Incidents","text":"The numbat field guide on incident response.","category":"security"}`,
	}
	p := filepath.Join(t.TempDir(), "numbat.jsonl")
	require.NoError(t, os.WriteFile(p, []byte(strings.Join(records, "\n")+"\n"), 0o644))
	require.Equal(t, len(records), s.Ingest(t, p).Written)

	newKey := func(name string, k stacktest.Key) string {
		k.Name, k.Owner = name, "mcp-tests"
		k.PerMinute, k.PerHour, k.PerDay = 1_000_000, 10_000_000, 100_000_000
		return s.CreateKey(t, k)
	}
	keys := map[string]string{
		"open":     newKey("cache-open", stacktest.Key{}),
		"open2":    newKey("cache-open-2", stacktest.Key{}),
		"group a":  newKey("cache-group-a", stacktest.Key{Groups: []string{"a"}}),
		"security": newKey("cache-security", stacktest.Key{Categories: []string{"security"}}),
	}

	clk := &fakeClock{t: time.Now()}
	var current string // the key of the next call
	var cache *tools.AnswerCache
	stackAddrs := []realOpt{
		withAddr(stacktest.Search, s.Addr(stacktest.Search)),
		withAddr(stacktest.VendorGraph, s.Addr(stacktest.VendorGraph)),
		withAddr(stacktest.Auth, s.Addr(stacktest.Auth)),
		withServiceToken(stacktest.AdapterToken),
	}
	h := newRealWithClient(t, nil, stackAddrs, []harnessOpt{func(o *tools.Options) {
		o.Key = func(context.Context) string { return current }
		cache = tools.NewAnswerCache(time.Second, 32<<20, clk.now)
		o.Answers = cache
		rec, err := auditlog.New(o.Clients.Auth, auditlog.Config{QueryText: true, FlushInterval: 20 * time.Millisecond})
		require.NoError(t, err)
		t.Cleanup(func() { rec.Close(context.Background()) })
		o.Audit = rec
	}})
	h.waitIndexCurrent()
	searchVia := func(via *harness, key string, args map[string]any) answer {
		t.Helper()
		current = keys[key]
		a := via.call(tools.ToolSemanticSearch, args)
		require.Equal(t, "success", a.status(), "%v", a.env["error"])
		return a
	}
	search := func(key string, args map[string]any) answer { t.Helper(); return searchVia(h, key, args) }
	docs := func(a answer) []string {
		var out []string
		for _, r := range a.results() {
			out = append(out, numbatDoc(r["chunk_text"].(string)))
		}
		slices.Sort(out)
		return out
	}
	query := map[string]any{"query": "numbat field guide", "response_mode": "full", "page_size": 5}

	t.Run("a hit is the miss again", func(t *testing.T) {
		for _, format := range []string{"markdown", "json", "both"} {
			t.Run(format, func(t *testing.T) {
				args := map[string]any{"query": "numbat field guide", "page_size": 3, "format": format}
				search("open", args)
				clk.advance(2 * time.Second) // the first answer is past its TTL
				before := cache.Stats()
				miss := search("open", args)
				mid := cache.Stats()
				hit := search("open", args)
				after := cache.Stats()
				require.Equal(t, before.Stores+1, mid.Stores, "the miss was kept")
				require.Equal(t, mid.Hits+1, after.Hits, "the second call was answered from the cache")
				require.Equal(t, mid.Stores, after.Stores)
				require.Equal(t, true, miss.execution()["cache_hit"], "search's own cache answered the miss: the same state")

				require.NotEqual(t, miss.env["_metadata"].(map[string]any)["request_id"], hit.env["_metadata"].(map[string]any)["request_id"])
				perCall := []string{"request_id", "execution_time_ms", "formatting_time_ms", "database_time_ms"}
				if format != "markdown" {
					// The JSON text counts its own request id and timings.
					perCall = append(perCall, "tokens_used", "tokens_estimated")
				}
				require.Equal(t, withoutPerCall(t, miss.env, perCall), withoutPerCall(t, hit.env, perCall))
				require.Equal(t, miss.links, hit.links)
				require.Len(t, hit.blocks, len(miss.blocks))
				for i := range miss.blocks {
					if strings.HasPrefix(miss.blocks[i], "{") {
						var m, h map[string]any
						require.NoError(t, json.Unmarshal([]byte(miss.blocks[i]), &m))
						require.NoError(t, json.Unmarshal([]byte(hit.blocks[i]), &h))
						require.Equal(t, withoutPerCall(t, m, perCall), withoutPerCall(t, h, perCall))
						continue
					}
					require.Equal(t, miss.blocks[i], hit.blocks[i], "the markdown, byte for byte")
				}
			})
		}
	})

	t.Run("get_chunks too", func(t *testing.T) {
		var ids []any
		for _, r := range search("open", query).results() {
			ids = append(ids, r["chunk_id"])
		}
		require.Len(t, ids, 2)
		args := map[string]any{"chunk_ids": ids, "response_mode": "metadata"}
		ask := func(key string) answer {
			current = keys[key]
			return h.call(tools.ToolGetChunks, args)
		}
		clk.advance(2 * time.Second)
		before := cache.Stats()
		miss := ask("open")
		hit := ask("open")
		after := cache.Stats()
		require.Equal(t, before.Stores+1, after.Stores)
		require.Equal(t, before.Hits+1, after.Hits)
		// A get_chunks miss never says cache_hit (search reports none for
		// chunk reads); its replay does, and its markdown says "cached",
		// two tokens more: the only difference.
		require.Equal(t, false, miss.execution()["cache_hit"])
		require.Equal(t, true, hit.execution()["cache_hit"])
		require.Equal(t, miss.blocks[0], strings.Replace(hit.blocks[0], " · cached", "", 1))
		perCall := []string{"request_id", "execution_time_ms", "formatting_time_ms", "database_time_ms", "cache_hit", "tokens_used", "tokens_estimated"}
		require.Equal(t, withoutPerCall(t, miss.env, perCall), withoutPerCall(t, hit.env, perCall))
		require.Equal(t, "success", hit.status())
		// The security key's scope holds one of the two: its own answer,
		// partial, and not kept.
		sec := ask("security")
		require.Equal(t, "partial", sec.status())
		require.Len(t, sec.results(), 1)
		require.Equal(t, after.Stores, cache.Stats().Stores)
	})

	t.Run("callers and scopes never share an answer", func(t *testing.T) {
		clk.advance(2 * time.Second)
		want := map[string][]string{
			"group a":  {"grp", "pub", "sec"},
			"open":     {"pub", "sec"},
			"open2":    {"pub", "sec"},
			"security": {"sec"},
		}
		// The widest scope first: a shared entry would show its document
		// to the others.
		order := []string{"group a", "open", "security", "open2"}
		for round := range 2 {
			for _, key := range order {
				before := cache.Stats()
				a := search(key, query)
				after := cache.Stats()
				require.Equal(t, want[key], docs(a), "%s, round %d", key, round)
				if round == 0 {
					require.Equal(t, before.Stores+1, after.Stores, "%s: its first call is its own miss", key)
					require.Equal(t, before.Hits, after.Hits, key)
				} else {
					require.Equal(t, before.Hits+1, after.Hits, "%s: its second call, its own hit", key)
				}
			}
		}
	})

	t.Run("a hit is audited as its miss", func(t *testing.T) {
		clk.advance(2 * time.Second)
		key := newKey("cache-audit", stacktest.Key{})
		keys["audit"] = key
		before := cache.Stats()
		miss := search("audit", query)
		hit := search("audit", query)
		require.Equal(t, before.Hits+1, cache.Stats().Hits)

		conn, err := grpcclient.Dial(s.Addr(stacktest.Auth), stacktest.AdminToken)
		require.NoError(t, err)
		defer conn.Close()
		auth := authv1.NewAuthServiceClient(conn)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var events []*authv1.AuditEvent
		require.Eventually(t, func() bool {
			resp, err := auth.ListAuditEvents(ctx, &authv1.ListAuditEventsRequest{Principal: stacktest.KeyID(key)})
			require.NoError(t, err)
			events = resp.GetEvents()
			return len(events) == 2
		}, 20*time.Second, 20*time.Millisecond)
		byRequest := map[string]*authv1.AuditEvent{}
		for _, e := range events {
			byRequest[e.GetRequestId()] = e
		}
		m := byRequest[miss.env["_metadata"].(map[string]any)["request_id"].(string)]
		h := byRequest[hit.env["_metadata"].(map[string]any)["request_id"].(string)]
		require.NotNil(t, m, "the miss's entry carries its request id")
		require.NotNil(t, h, "the hit's entry carries its own")
		var ids []int64
		for _, r := range hit.results() {
			ids = append(ids, int64(r["chunk_id"].(float64)))
		}
		require.Equal(t, ids, h.GetChunkIds())
		require.Len(t, h.GetDocumentIds(), 2)
		for _, e := range []*authv1.AuditEvent{m, h} {
			e.Time, e.RecordedAt, e.RequestId = nil, nil, ""
		}
		require.Equal(t, m.String(), h.String(), "the same tool, query, chunks, documents, outcome and principal")
	})

	t.Run("the byte bound evicts", func(t *testing.T) {
		other := map[string]any{"query": "numbat incident response", "response_mode": "full", "page_size": 5}
		withCache := func(c *tools.AnswerCache) *harness {
			h := newRealWithClient(t, nil, stackAddrs, []harnessOpt{func(o *tools.Options) {
				o.Key = func(context.Context) string { return current }
				o.Answers = c
			}})
			h.waitIndexCurrent()
			return h
		}
		// What each answer takes, measured in a large cache.
		probe := tools.NewAnswerCache(time.Minute, 32<<20, nil)
		hp := withCache(probe)
		var sz []int64
		for _, args := range []map[string]any{query, other} {
			b := probe.Stats().Bytes
			searchVia(hp, "open", args)
			sz = append(sz, probe.Stats().Bytes-b)
			require.Positive(t, sz[len(sz)-1])
		}

		// Room for either answer, not for both.
		small := tools.NewAnswerCache(time.Minute, max(sz[0], sz[1])+min(sz[0], sz[1])-1, nil)
		hs := withCache(small)
		searchVia(hs, "open", query)
		searchVia(hs, "open", other) // the first answer goes
		require.Equal(t, answercache.Stats{Misses: 2, Stores: 2, Evictions: 1, Bytes: sz[1], Entries: 1}, small.Stats())
		searchVia(hs, "open", other)
		searchVia(hs, "open", query)
		st := small.Stats()
		require.Equal(t, int64(1), st.Hits, "the answer kept was found; the evicted one was asked again")
		require.Equal(t, int64(3), st.Stores)
	})

	t.Run("after a delete the document is gone", func(t *testing.T) {
		clk.advance(2 * time.Second)
		require.Equal(t, []string{"pub", "sec"}, docs(search("open", query)))
		before := cache.Stats()
		require.Equal(t, []string{"pub", "sec"}, docs(search("open", query)))
		require.Equal(t, before.Hits+1, cache.Stats().Hits, "kept, well within its TTL")
		s.Ctl(t, "delete", "-addr", s.Addr(stacktest.Search), "pub")
		// No clock moves: the TTL plays no part. The delete returns once
		// the replica applied it, which pushes the new version the same
		// moment (indexwatch's test measures it): the wait is only for
		// that message's flight to the adapter, milliseconds (logged);
		// the bound leaves room for a loaded CI box.
		deleted := time.Now()
		require.Eventually(t, func() bool {
			return slices.Equal([]string{"sec"}, docs(search("open", query)))
		}, 10*time.Second, time.Millisecond)
		t.Logf("the deleted document left the answers %.1f ms after the delete returned", float64(time.Since(deleted).Microseconds())/1000)
		require.Equal(t, []string{"grp", "sec"}, docs(search("group a", query)), "and for every caller")
	})

	t.Run("with search stopped, nothing is answered from the cache", func(t *testing.T) {
		kept := search("open", query) // kept, or found, under the current epoch
		require.Equal(t, []string{"sec"}, docs(kept))
		before := cache.Stats()
		require.Equal(t, []string{"sec"}, docs(search("open", query)))
		require.Equal(t, before.Hits+1, cache.Stats().Hits)

		svc := s.Service(stacktest.Search)
		svc.Stop(t)
		// The stream ended as search began to drain (indexwatch's test):
		// milliseconds (logged); the bound is a silent stream's StaleAfter,
		// with room.
		stopped := time.Now()
		require.Eventually(t, func() bool { _, _, ok := h.index.Epoch(); return !ok }, 2*indexwatch.StaleAfter, time.Millisecond)
		t.Logf("the epoch stopped being current %.1f ms after search stopped", float64(time.Since(stopped).Microseconds())/1000)
		before = cache.Stats()
		current = keys["open"]
		a := h.call(tools.ToolSemanticSearch, query)
		require.Equal(t, "SERVICE_UNAVAILABLE", a.errCode(), "search's own error, not the kept answer")
		require.True(t, a.errObj()["retryable"].(bool))
		require.Equal(t, before, cache.Stats(), "the cache was neither read nor written")

		svc.Start(t)
		h.waitIndexCurrent()
		require.Equal(t, []string{"sec"}, docs(search("open", query)), "back with search")
	})
}

// withoutPerCall is env without the members that differ from call to call.
func withoutPerCall(t *testing.T, env map[string]any, execution []string) map[string]any {
	t.Helper()
	raw, err := json.Marshal(env)
	require.NoError(t, err)
	var out map[string]any
	require.NoError(t, json.Unmarshal(raw, &out))
	meta := out["_metadata"].(map[string]any)
	delete(meta, "request_id")
	delete(meta, "timestamp")
	ec := out["execution_context"].(map[string]any)
	for _, k := range execution {
		delete(ec, k)
	}
	return out
}

// TestAnswerCacheNotForADegradedCheck: a kept answer carries no warning
// about its call's check, so a call whose check has one (auth's limiter
// degraded) is answered afresh, with its warning, and not kept.
func TestAnswerCacheNotForADegradedCheck(t *testing.T) {
	shared := tools.NewAnswerCache(time.Minute, 32<<20, nil)
	withShared := func(o *tools.Options) { o.Answers = shared }
	// The adapter's credential, whose WatchIndex makes the cache usable.
	adapter := withServiceToken(stacktest.AdapterToken)
	healthy := newRealWithClient(t, nil, []realOpt{adapter}, []harnessOpt{withShared})
	degraded := newRealWithClient(t, nil, []realOpt{adapter, withAddr(stacktest.Auth, degradedAuthAddr(t))}, []harnessOpt{withShared})
	healthy.waitIndexCurrent()
	degraded.waitIndexCurrent()
	args := map[string]any{"query": "kept answers and a degraded limiter", "page_size": 3}

	first := healthy.call(tools.ToolSemanticSearch, args)
	require.Equal(t, "success", first.status())
	require.Equal(t, int64(1), shared.Stats().Stores)

	a := degraded.call(tools.ToolSemanticSearch, args)
	require.Equal(t, "success", a.status())
	require.Contains(t, a.warningCodes(), "RATE_LIMITER_DEGRADED")
	st := shared.Stats()
	require.Equal(t, int64(1), st.Hits, "the kept answer was found")
	require.Equal(t, int64(1), st.Stores, "and not used; the fresh answer, with its warning, not kept")

	again := healthy.call(tools.ToolSemanticSearch, args)
	require.NotContains(t, again.warningCodes(), "RATE_LIMITER_DEGRADED")
	require.Equal(t, int64(2), shared.Stats().Hits)
}

// TestAnswerKeptOnlyAtTheWatchedVersion: the index watch follows one search
// replica while the calls reach another (as after a GOAWAY behind a k8s
// Service). An answer is kept only when search says it computed it at the
// version the watch reports: a replica alike and caught up, yes; one with
// other ranking settings (another version), or one that says nothing (an
// older search; here the read credential, which search does not tell), no.
// Each answer is the replica's own, kept or not.
func TestAnswerKeptOnlyAtTheWatchedVersion(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{})
	p := filepath.Join(t.TempDir(), "quokka.jsonl")
	require.NoError(t, os.WriteFile(p, []byte(`{"_id":"q","title":"Quokka","text":"The quokka field guide for two replicas.","category":"fauna"}`+"\n"), 0o644))
	require.Equal(t, 1, s.Ingest(t, p).Written)
	key := s.CreateKey(t, stacktest.Key{Name: "versions", Owner: "mcp-tests", PerMinute: 1_000_000, PerHour: 10_000_000, PerDay: 100_000_000})

	// The watch, on the stack's replica, with the adapter's credential.
	conn, err := grpcclient.Dial(s.Addr(stacktest.Search), stacktest.AdapterToken)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	watch, stopWatch := indexwatch.Start(searchv1.NewSearchServiceClient(conn), nil)
	t.Cleanup(stopWatch)

	alike := s.StartService(t, stacktest.Search, nil)
	otherSettings := s.StartService(t, stacktest.Search, map[string]string{"BMCIS_SEARCH_RRF_K": "30"})
	for _, tc := range []struct {
		name  string
		addr  string
		token string
		kept  bool
	}{
		{"a replica alike, caught up", alike.Addr(), stacktest.AdapterToken, true},
		{"a replica with other ranking settings", otherSettings.Addr(), stacktest.AdapterToken, false},
		{"no version said", alike.Addr(), stacktest.ServiceToken, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := tools.NewAnswerCache(time.Minute, 32<<20, nil)
			h := newRealWithClient(t, nil, []realOpt{
				withAddr(stacktest.Search, tc.addr),
				withAddr(stacktest.VendorGraph, s.Addr(stacktest.VendorGraph)),
				withAddr(stacktest.Auth, s.Addr(stacktest.Auth)),
				withServiceToken(tc.token),
			}, []harnessOpt{func(o *tools.Options) {
				o.Key = func(context.Context) string { return key }
				o.Answers = cache
				o.Index = watch
			}})
			h.waitIndexCurrent()
			reg := prometheus.NewRegistry()
			require.NoError(t, tools.RegisterCacheMetrics(reg, tools.Options{Answers: cache}))
			// answered counts the successes: each is kept, found, or counted
			// not stored for its version.
			answered := 0
			call := func(tool string, args map[string]any) answer {
				a := h.call(tool, args)
				if a.status() == "success" {
					answered++
				}
				return a
			}
			searchArgs := map[string]any{"query": "quokka field guide", "response_mode": "full", "page_size": 3}
			var first answer
			// The replica alike is caught up once its answer finds the
			// document (its version is then the watched one).
			require.Eventually(t, func() bool {
				first = call(tools.ToolSemanticSearch, searchArgs)
				return first.status() == "success" && len(first.results()) == 1
			}, 20*time.Second, 20*time.Millisecond)
			chunkArgs := map[string]any{"chunk_ids": []any{first.results()[0]["chunk_id"]}, "response_mode": "metadata"}
			for _, c := range []struct {
				tool string
				args map[string]any
			}{{tools.ToolSemanticSearch, searchArgs}, {tools.ToolGetChunks, chunkArgs}} {
				a := call(c.tool, c.args)
				require.Equal(t, "success", a.status(), "%s: %v", c.tool, a.env["error"])
				b := call(c.tool, c.args)
				require.Equal(t, a.results(), b.results(), c.tool)
			}
			st := cache.Stats()
			otherVersion := gathered(t, reg, tools.MetricAnswerCacheNotStored, "reason", "other_version")
			noVersion := gathered(t, reg, tools.MetricAnswerCacheNotStored, "reason", "no_version")
			require.Equal(t, float64(st.NotStored[answercache.OtherVersion]), otherVersion)
			require.Equal(t, float64(st.NotStored[answercache.NoVersion]), noVersion)
			switch {
			case tc.kept:
				require.Equal(t, int64(2), st.Stores, "one search answer and one get_chunks answer kept")
				require.Equal(t, int64(3), st.Hits, "and found: both search calls after the first, the second get_chunks")
				// Answers before the replica caught up were at an older version.
				require.Equal(t, float64(answered)-5, otherVersion)
				require.Zero(t, noVersion)
			default:
				require.Zero(t, st.Stores, "nothing kept")
				require.Zero(t, st.Hits)
				reason, other := "other_version", "no_version"
				if tc.token == stacktest.ServiceToken {
					reason, other = other, reason
				}
				require.Equal(t, float64(answered), gathered(t, reg, tools.MetricAnswerCacheNotStored, "reason", reason),
					"every answer counted not stored, for its version")
				require.Zero(t, gathered(t, reg, tools.MetricAnswerCacheNotStored, "reason", other))
			}
		})
	}
}
