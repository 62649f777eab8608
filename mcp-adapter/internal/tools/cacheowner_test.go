package tools_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/mcp-adapter/internal/tools"
	"github.com/bmcis/knowledge/platform/stacktest"
)

// One adapter serving two keys, on the real services: a search or vendor
// lookup the other key just made is not a cache hit for this one (the
// services cache per caller, platform/cacheowner), so cache_hit says
// nothing about another key's activity; each key's own repeat is a hit.
func TestCacheHitIsTheCallersOwn(t *testing.T) {
	s := demoStack(t)
	alice := mainKey(t)
	bob := s.CreateKey(t, stacktest.Key{Name: "mcp-cache-bob", PerMinute: 1_000, PerHour: 10_000, PerDay: 100_000})
	var current atomic.Pointer[string]
	current.Store(&alice)
	h := newRealWithClient(t, nil, nil, []harnessOpt{func(o *tools.Options) {
		o.Key = func(context.Context) string { return *current.Load() }
	}})
	as := func(key string) { current.Store(&key) }
	hit := func(a answer) bool { return a.execution()["cache_hit"].(bool) }

	q := fmt.Sprintf("backup retention policy %d", time.Now().UnixNano())
	search := map[string]any{"query": q, "response_mode": "ids_only"}
	as(alice)
	require.False(t, hit(h.call(tools.ToolSemanticSearch, search)))
	as(bob)
	a := h.call(tools.ToolSemanticSearch, search)
	require.False(t, hit(a), "alice's search is not a hit for bob")
	require.True(t, hit(h.call(tools.ToolSemanticSearch, search)), "bob's own repeat is a hit")
	as(alice)
	require.True(t, hit(h.call(tools.ToolSemanticSearch, search)), "and alice's")

	vendor := map[string]any{"vendor_name": "Acme Corp"}
	as(alice)
	h.call(tools.ToolFindVendorInfo, vendor) // alice's lookup is cached (or was already)
	require.True(t, hit(h.call(tools.ToolFindVendorInfo, vendor)))
	other := s.CreateKey(t, stacktest.Key{Name: "mcp-cache-carol"})
	as(other)
	require.False(t, hit(h.call(tools.ToolFindVendorInfo, vendor)), "alice's lookup is not a hit for a new key")
	require.True(t, hit(h.call(tools.ToolFindVendorInfo, vendor)), "its own repeat is")
}
