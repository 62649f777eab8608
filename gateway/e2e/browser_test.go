package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/gateway/internal/browsertest"
	"github.com/bmcis/knowledge/gateway/internal/rest"
)

// The dashboard in headless Chromium against the running services: status
// cards, the tool list, stats and a search over the ingested documents; the
// screenshot is kept.
func TestDashboardInChromiumAgainstServices(t *testing.T) {
	browsertest.Chromium(t) // skips with instructions when absent
	s := newStack(t, nil)
	key := s.createKey(`{"name":"e2e-browser"}`)
	s.ingest()
	up := s.do("POST", "/v1/sources/handbook/files?file=docs.zip", zipOf(t, map[string]string{
		"a.md": "# A\n\nFirst handbook page.\n", "b.md": "# B\n\nSecond handbook page.\n"}), rest.HeaderAdminToken, ingestToken)
	require.Equal(t, 200, up.status, "%s", up.body)

	p := browsertest.Launch(t)
	p.Navigate(s.url + "/")
	defer func() {
		path := p.Screenshot("dashboard-real-services.png")
		t.Logf("screenshot: %s", path)
	}()
	p.WaitFor(`document.querySelectorAll("#servers .card").length === 4`, 20*time.Second)
	for _, name := range []string{"search", "vendorgraph", "auth"} {
		p.WaitFor(`document.querySelector('#servers .card[data-server="`+name+`"] .status').textContent === "connected"`, 10*time.Second)
	}
	p.WaitFor(`document.querySelectorAll("#tools-table tbody tr").length === 3`, 10*time.Second)

	p.MustEval(`(() => { document.getElementById("api-key").value = "`+key+`"; document.getElementById("key-form").requestSubmit(); return true })()`, nil)
	p.MustEval(`(() => { document.getElementById("q").value = "cloud providers"; document.getElementById("search-form").requestSubmit(); return true })()`, nil)
	p.WaitFor(`!document.getElementById("search-status").textContent.startsWith("Searching")`, 20*time.Second)
	var statusLine string
	p.MustEval(`document.getElementById("search-status").textContent`, &statusLine)
	t.Logf("search console: %s", statusLine)
	p.WaitFor(`document.querySelectorAll("#search-results tbody tr").length > 0`, 10*time.Second)
	var rows [][]string
	p.MustEval(`[...document.querySelectorAll("#search-results tbody tr")].map(tr => [...tr.cells].map(td => td.textContent))`, &rows)
	require.NotEmpty(t, rows)
	require.Equal(t, "1", rows[0][0])
	require.Regexp(t, `^[01]\.\d{3}$`, rows[0][3], "hybrid score")
	require.Contains(t, strings.ToLower(strings.Join(rows[0], " ")), "aws, azure and google cloud platform", "the cloud providers page ranks first")
	p.WaitFor(`document.querySelectorAll("#rpc-table tbody tr").length > 0`, 15*time.Second)

	// The uploaded source, with its documents and last sync.
	p.WaitFor(`document.querySelectorAll("#sources-table tbody tr").length === 1`, 15*time.Second)
	var src [][]string
	p.MustEval(`[...document.querySelectorAll("#sources-table tbody tr")].map(tr => [...tr.cells].map(td => td.textContent))`, &src)
	require.Equal(t, "handbook", src[0][0])
	require.Equal(t, "2", src[0][1], "documents")
	require.NotEqual(t, "never", src[0][3], "last sync")
	// No root: the dashboard's read credential is shown no paths. An
	// uploaded source is a folder kind, synced by its clients (no schedule,
	// no run status).
	require.Equal(t, []string{"2", "0", "0", "0", "folder", "–", "–"}, src[0][4:])

	// The vendor picture on the demo graph, with a document that names the
	// vendor: the neighbourhood drawn, the document beside it.
	s.st.ImportDemoGraph(t)
	s.st.IngestDocs(t, map[string]string{"contracts/acme-renewal.md": "# Acme renewal\n\nAcme Corp renewed the payroll contract; Acme Corporation also runs our HR software.\n"})
	p.MustEval(`(() => { document.getElementById("vendor-name").value = "Acme Corp"; document.getElementById("vendor-form").requestSubmit(); return true })()`, nil)
	p.WaitFor(`document.querySelectorAll("#vendor-graph svg .node").length > 1`, 20*time.Second)
	var picture struct {
		Nodes, Edges int
		Docs         []string
	}
	p.MustEval(`({
		nodes: document.querySelectorAll("#vendor-graph .node").length,
		edges: document.querySelectorAll("#vendor-graph .edge text").length,
		docs: [...document.querySelectorAll("#vendor-documents li")].map(li => li.textContent),
	})`, &picture)
	require.Greater(t, picture.Edges, 0, "labelled relationships drawn")
	require.Contains(t, picture.Docs, "contracts/acme-renewal.md · 2 mentions in 1 chunks")
	path := p.Screenshot("vendor-graph-real-services.png")
	t.Logf("vendor picture: %d nodes, %d relationships; screenshot: %s", picture.Nodes, picture.Edges, path)
}
