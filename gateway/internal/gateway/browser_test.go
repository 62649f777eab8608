package gateway

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/gateway/internal/browsertest"
)

// The dashboard in headless Chromium against the gateway and the scripted
// services: cards, tools, stats and a search whose results render with their
// scores. The same test runs against the real services in ../../e2e.
func TestDashboardInChromium(t *testing.T) {
	browsertest.Chromium(t) // skips when absent
	s := newStack(t, nil)
	p := browsertest.Launch(t)
	p.Navigate(s.url + "/")

	p.WaitFor(`document.querySelectorAll("#servers .card").length === 4`, 20*time.Second)
	p.WaitFor(`document.querySelector('#servers .card[data-server="search"] .status').textContent === "connected"`, 10*time.Second)
	p.WaitFor(`document.querySelectorAll("#tools-table tbody tr").length === 3`, 10*time.Second)
	var overall string
	p.MustEval(`document.getElementById("overall-status").textContent`, &overall)
	require.Equal(t, "ok", overall)

	// Without a key, a search shows the gateway's error.
	p.MustEval(`(() => { document.getElementById("q").value = "cloud"; document.getElementById("search-form").requestSubmit(); return true })()`, nil)
	p.WaitFor(`document.getElementById("search-status").textContent.startsWith("AUTH_REQUIRED")`, 10*time.Second)

	// With one, results render with their scores, and stats appear.
	p.MustEval(`(() => { document.getElementById("api-key").value = "`+keyGood+`"; document.getElementById("key-form").requestSubmit(); return true })()`, nil)
	p.MustEval(`(() => { document.getElementById("mode").value = "RETRIEVAL_MODE_BM25"; document.getElementById("search-form").requestSubmit(); return true })()`, nil)
	p.WaitFor(`document.querySelectorAll("#search-results tbody tr").length === 2`, 10*time.Second)
	var rows [][]string
	p.MustEval(`[...document.querySelectorAll("#search-results tbody tr")].map(tr => [...tr.cells].map(td => td.textContent))`, &rows)
	require.Equal(t, "1", rows[0][0])
	require.Equal(t, "101", rows[0][1])
	require.Contains(t, rows[0][2], "Cloud providers")
	require.Equal(t, "0.910", rows[0][3])
	require.Equal(t, "0.800", rows[0][4])
	require.Equal(t, "0.700", rows[0][5])
	require.Contains(t, rows[0][6], "compared for cloud")
	var status string
	p.MustEval(`document.getElementById("search-status").textContent`, &status)
	require.Contains(t, status, "2 of 2 results · bm25")

	p.WaitFor(`document.querySelectorAll("#rpc-table tbody tr").length > 0`, 10*time.Second)
	p.WaitFor(`document.querySelector("#latency-chart svg") !== null`, 10*time.Second)

	// Sources: documents, chunks, last sync and what it did.
	p.WaitFor(`document.querySelectorAll("#sources-table tbody tr").length === 1`, 10*time.Second)
	var src [][]string
	p.MustEval(`[...document.querySelectorAll("#sources-table tbody tr")].map(tr => [...tr.cells].map(td => td.textContent))`, &src)
	require.Equal(t, "handbook", src[0][0])
	require.Equal(t, []string{"4", "9"}, src[0][1:3])
	require.Contains(t, src[0][3], "2026")
	require.Equal(t, []string{"2", "2", "0", "1"}, src[0][4:8], "no root column: the read credential is shown no paths")
	require.Equal(t, []string{"git", "15 min", "failed ×2"}, src[0][8:])

	// The index box: model age, term coverage and a pending retrain.
	p.WaitFor(`document.querySelectorAll("#index-status div").length === 5`, 10*time.Second)
	var index []string
	p.MustEval(`[...document.querySelectorAll("#index-status div")].map(d => d.textContent)`, &index)
	require.Equal(t, []string{"2documents", "5chunks", "3 hmodel age", "62 %model term coverage", "pendingretrain"}, index)
	var reason string
	p.MustEval(`document.querySelector('#index-status [data-retrain="pending"]').title`, &reason)
	require.Equal(t, "the model knows 62% of the indexed terms", reason)
	dom := p.DOM()
	require.Contains(t, dom, "semantic_search")
	require.NotContains(t, dom, keyGood, "the key is never written into the page")

	path := p.Screenshot("dashboard-fake-services.png")
	t.Logf("screenshot: %s", path)
	for _, c := range p.Console {
		if strings.Contains(c, "exceptionThrown") {
			t.Errorf("page error: %s", c)
		}
	}
}

// The vendor picture in headless Chromium: a vendor's neighbourhood drawn as
// SVG (the vendor, its entities coloured by type, labelled relationships)
// with the documents that mention it beside; the screenshot is kept.
func TestVendorGraphInChromium(t *testing.T) {
	browsertest.Chromium(t) // skips when absent
	s := newStack(t, nil)
	p := browsertest.Launch(t)
	p.Navigate(s.url + "/")
	p.WaitFor(`document.getElementById("vendor-form") !== null`, 20*time.Second)
	p.MustEval(`(() => { document.getElementById("api-key").value = "`+keyGood+`"; document.getElementById("key-form").requestSubmit(); return true })()`, nil)
	p.MustEval(`(() => { document.getElementById("vendor-name").value = "Acme Corp"; document.getElementById("vendor-form").requestSubmit(); return true })()`, nil)
	p.WaitFor(`document.querySelectorAll("#vendor-graph svg .node").length === 6`, 10*time.Second)

	var picture struct {
		Types  []string
		Edges  []string
		Vendor string
		Legend []string
		Docs   []string
		Chunks []string
	}
	p.MustEval(`({
		types: [...document.querySelectorAll("#vendor-graph .node:not(.vendor)")].map(n => n.dataset.type),
		edges: [...document.querySelectorAll("#vendor-graph .edge text")].map(t => t.textContent),
		vendor: document.querySelector("#vendor-graph .vendor text").textContent,
		legend: [...document.querySelectorAll("#vendor-legend span[data-type]")].map(s => s.textContent),
		docs: [...document.querySelectorAll("#vendor-documents li")].map(li => li.textContent),
		chunks: [...document.querySelectorAll("#vendor-evidence li")].map(li => li.textContent),
	})`, &picture)
	require.Equal(t, "Acme Corp", picture.Vendor)
	require.Equal(t, []string{"LOCATION", "PERSON", "PERSON", "PRODUCT", "PRODUCT"}, picture.Types, "entities grouped by type")
	require.Equal(t, []string{"LOCATION", "PERSON", "PRODUCT"}, picture.Legend)
	require.ElementsMatch(t, []string{"PRODUCES", "PRODUCES", "WORKS_FOR", "HEADQUARTERED_IN", "WORKS_FOR", "INTEGRATES_WITH"}, picture.Edges,
		"every relationship drawn and labelled, between entities too")
	require.Len(t, picture.Docs, 2)
	require.Contains(t, picture.Docs[0], "vendor-management/vendor-tiers.md · 3 mentions in 2 chunks")
	require.Len(t, picture.Chunks, 2)
	require.Contains(t, picture.Chunks[0], "Acme Corp (payroll and HR) is a tier 1 vendor.")
	var status string
	p.MustEval(`document.getElementById("vendor-status").textContent`, &status)
	require.Contains(t, status, "Acme Corp · 5 entities, 6 relationships shown · 4 chunks mention it")

	path := p.Screenshot("vendor-graph-fake-services.png")
	t.Logf("screenshot: %s", path)

	// An unknown vendor shows the gateway's error and hides the picture.
	p.MustEval(`(() => { document.getElementById("vendor-name").value = "Unknown Co"; document.getElementById("vendor-form").requestSubmit(); return true })()`, nil)
	p.WaitFor(`document.getElementById("vendor-status").textContent.startsWith("VENDOR_NOT_FOUND") || document.getElementById("vendor-status").textContent.startsWith("NOT_FOUND")`, 10*time.Second)
	p.WaitFor(`document.getElementById("vendor-view").classList.contains("hidden")`, 5*time.Second)
	for _, c := range p.Console {
		if strings.Contains(c, "exceptionThrown") {
			t.Errorf("page error: %s", c)
		}
	}
}
