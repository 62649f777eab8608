package tools_test

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/stacktest"

	"github.com/bmcis/knowledge/mcp-adapter/internal/allowcache"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tools"
)

// TestScopedKeyStartsEarly: a key with a group starts its search while its
// check runs, in the scope its last allow had, and answers what a call
// started after its check answers. When its groups change, the early
// search is thrown away and the answer holds only what the new groups
// read; when it is revoked, the answer is the denial alone.
func TestScopedKeyStartsEarly(t *testing.T) {
	// A stack of its own: restricted documents would change the shared
	// demo stack's answers to other tests. Its second auth process reads
	// the key's record on every check (no key cache), so a change of groups
	// or a revocation applies at the next call.
	s := stacktest.Start(t, stacktest.Options{})
	authSvc := s.StartService(t, stacktest.Auth, map[string]string{"BMCIS_AUTH_KEY_CACHE_TTL": "0"})
	records := []string{
		`{"_id":"pub","title":"Public","text":"The quoll handbook for every employee.","category":"people"}`,
		`{"_id":"hr","title":"Pay","text":"The quoll handbook on pay bands.","category":"people","access":["group:hr"]}`,
		`{"_id":"legal","title":"Contracts","text":"The quoll handbook on contracts.","category":"people","access":["group:legal"]}`,
	}
	p := filepath.Join(t.TempDir(), "quoll.jsonl")
	require.NoError(t, os.WriteFile(p, []byte(strings.Join(records, "\n")+"\n"), 0o644))
	require.Equal(t, len(records), s.Ingest(t, p).Written)

	key := s.CreateKey(t, stacktest.Key{Name: "early-hr", Owner: "mcp-tests", Groups: []string{"hr"},
		PerMinute: 1_000_000, PerHour: 10_000_000, PerDay: 100_000_000})
	var cache *allowcache.Cache
	h := newRealWithClient(t, nil,
		[]realOpt{
			withAddr(stacktest.Search, s.Addr(stacktest.Search)),
			withAddr(stacktest.VendorGraph, s.Addr(stacktest.VendorGraph)),
			withAddr(stacktest.Auth, authSvc.Addr()),
			// Long enough that no call of this test outlives the memory.
			withConfig("BMCIS_AUTH_ALLOW_CACHE_TTL", "30s"),
		},
		[]harnessOpt{withKey(key), func(o *tools.Options) { cache = o.AllowCache }})
	require.NotNil(t, cache)

	type page struct {
		docs  []string
		ids   []any
		total int
	}
	search := func() page {
		t.Helper()
		a := h.call(tools.ToolSemanticSearch, map[string]any{"query": "quoll handbook", "response_mode": "full", "page_size": 10})
		require.Equal(t, "success", a.status(), "%v", a.env["error"])
		var out page
		for _, r := range a.results() {
			out.docs = append(out.docs, docOf(r["chunk_text"].(string)))
			out.ids = append(out.ids, r["chunk_id"])
		}
		sort.Strings(out.docs)
		out.total = int(a.pagination()["total_available"].(float64))
		return out
	}

	late := search()
	require.Equal(t, []string{"hr", "pub"}, late.docs, "everyone's and group hr's")
	require.Equal(t, 2, late.total)
	before := cache.Stats()

	early := search()
	after := cache.Stats()
	require.Equal(t, before.Started+1, after.Started, "the second call started before its check answered")
	require.Equal(t, before.Kept+1, after.Kept, "and its result answered")
	require.Equal(t, late, early, "an early start answers what a late one does")

	t.Run("get_chunks", func(t *testing.T) {
		ask := func() answer {
			return h.call(tools.ToolGetChunks, map[string]any{"chunk_ids": late.ids, "response_mode": "metadata"})
		}
		first := ask() // its first call: waits for the check
		b := cache.Stats()
		second := ask()
		require.Equal(t, b.Kept+1, cache.Stats().Kept)
		require.Equal(t, first.results(), second.results())
		require.Len(t, second.results(), 2, "both of the key's chunks")
	})

	// The key's groups change (hr → legal) behind the adapter's back: the
	// next call starts early in the remembered scope (hr) and the check
	// answers with the new one.
	s.Exec(t, `UPDATE auth.api_keys SET groups = '{legal}' WHERE key_id = $1`, stacktest.KeyID(key))
	before = cache.Stats()
	changed := search()
	after = cache.Stats()
	require.Equal(t, []string{"legal", "pub"}, changed.docs, "group legal's document, not group hr's")
	require.Equal(t, 2, changed.total)
	require.Equal(t, before.Started+1, after.Started)
	require.Equal(t, before.Discarded+1, after.Discarded, "the early search, made for group hr, was thrown away")
	require.Equal(t, before.Kept, after.Kept)
	kept := search()
	require.Equal(t, changed, kept, "the next call starts in the new scope and answers the same")
	require.Equal(t, after.Kept+1, cache.Stats().Kept)
	hrOnly := map[any]bool{}
	for _, id := range late.ids {
		hrOnly[id] = true
	}
	for _, id := range changed.ids {
		delete(hrOnly, id)
	}
	require.Len(t, hrOnly, 1, "group hr's chunk")
	var hrChunk any
	for id := range hrOnly {
		hrChunk = id
	}
	require.NotContains(t, changed.ids, hrChunk)

	t.Run("get_chunks after the change", func(t *testing.T) {
		b := cache.Stats()
		a := h.call(tools.ToolGetChunks, map[string]any{"chunk_ids": []any{hrChunk}, "response_mode": "full"})
		require.Equal(t, b.Discarded+1, cache.Stats().Discarded, "its early read, made for group hr, was thrown away")
		require.Equal(t, "partial", a.status(), "the chunk asked for is missing: %v", a.env["error"])
		require.Empty(t, a.results(), "group hr's chunk is no longer the key's")
		for _, block := range a.blocks {
			require.NotContains(t, block, "pay bands")
		}
	})

	// Revoked: the early search runs (the key was allowed a moment ago) and
	// the answer is the denial alone.
	s.RevokeKey(t, key)
	before = cache.Stats()
	a := h.call(tools.ToolSemanticSearch, map[string]any{"query": "quoll handbook", "response_mode": "full", "format": "both"})
	after = cache.Stats()
	require.Equal(t, "AUTH_INVALID", a.errCode())
	require.Equal(t, "AUTH_REVOKED", a.errObj()["details"].(map[string]any)["reason"])
	require.Equal(t, before.Started+1, after.Started)
	require.Equal(t, before.Discarded+1, after.Discarded)
	require.Empty(t, a.env["results"], "no result of the early search")
	for _, block := range a.blocks {
		require.NotContains(t, block, "quoll handbook")
	}
	before = cache.Stats()
	require.Equal(t, "AUTH_INVALID", h.call(tools.ToolSemanticSearch, map[string]any{"query": "quoll handbook"}).errCode())
	require.Equal(t, before.Started, cache.Stats().Started, "a denial forgets the key: its next call waits for its check")
}

// docOf names the test's document a chunk's text is from.
func docOf(text string) string {
	for doc, words := range map[string]string{"pub": "every employee", "hr": "pay bands", "legal": "contracts"} {
		if strings.Contains(text, words) {
			return doc
		}
	}
	return text
}
