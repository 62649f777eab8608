package tools_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/stretchr/testify/require"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tokens"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tools"
	"github.com/bmcis/knowledge/platform/grpcclient"
	"github.com/bmcis/knowledge/platform/stacktest"
)

// acmeNames are Acme Corp's name and alias in the demo graph.
var acmeNames = []string{"acme corp", "acme corporation"}

// holdsName reports whether text names one of names, compared the way the
// matcher compares (lowercase words of letters and digits).
func holdsName(text string, names []string) bool {
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	norm := " " + strings.Join(words, " ") + " "
	for _, n := range names {
		if strings.Contains(norm, " "+n+" ") {
			return true
		}
	}
	return false
}

func mentionNames(r map[string]any) []string {
	list, _ := r["mentions"].([]any)
	var out []string
	for _, m := range list {
		out = append(out, m.(map[string]any)["name"].(string))
	}
	return out
}

func TestFindVendorInfoEvidenceOnDemo(t *testing.T) {
	h := newReal(t)
	var evidence []any
	for _, mode := range modes {
		a := h.call(tools.ToolFindVendorInfo, map[string]any{"vendor_name": "Acme Corp", "response_mode": mode, "format": "both"})
		require.Equal(t, "success", a.status(), mode)
		r := a.results()[0]
		switch mode {
		case "ids_only":
			ids := r["evidence_chunk_ids"].([]any)
			require.NotEmpty(t, ids)
		case "metadata":
			docs := r["evidence_documents"].([]any)
			require.NotEmpty(t, docs)
			first := docs[0].(map[string]any)
			require.GreaterOrEqual(t, first["mention_count"].(float64), first["chunk_count"].(float64))
			require.Contains(t, a.blocks[0], "### Documents mentioning the vendor")
		default:
			evidence = r["evidence"].([]any)
			require.NotEmpty(t, evidence)
			require.Contains(t, a.blocks[0], "### Evidence (")
			require.NotContains(t, a.blocks[0], "`"+"0", "relationships name both ends, no raw ids")
		}
	}
	// The evidence chunks really hold the name: fetch them whole.
	var ids []any
	for _, e := range evidence {
		ev := e.(map[string]any)
		ids = append(ids, ev["chunk_id"])
		require.True(t, holdsName(ev["snippet"].(string), acmeNames), "snippet %q shows the name", ev["snippet"])
	}
	a := h.call(tools.ToolGetChunks, map[string]any{"chunk_ids": ids, "response_mode": "full", "format": "json"})
	require.Equal(t, "success", a.status())
	for _, c := range a.results() {
		require.True(t, holdsName(c["chunk_text"].(string), acmeNames), "chunk %v names Acme Corp", c["chunk_id"])
	}
}

func TestSearchResultsListTheirMentionsOnDemo(t *testing.T) {
	h := newReal(t)
	// A passage of vendor-onboarding.md that names Acme Corp.
	const passage = "Acme Corp our payroll and HR software provider, a tier 1 vendor holding employee personal data"
	for _, mode := range []string{"metadata", "preview", "full"} {
		a := h.call(tools.ToolSemanticSearch, map[string]any{"query": passage, "response_mode": mode, "page_size": 5, "format": "json"})
		require.Equal(t, "success", a.status())
		found := false
		for _, r := range a.results() {
			if strings.Contains(r["source_file"].(string), "vendor-onboarding") && contains(mentionNames(r), "Acme Corp") {
				found = true
			}
			list, _ := r["mentions"].([]any)
			for _, m := range list {
				require.Len(t, m.(map[string]any), 3, "name, type, entity_id")
			}
		}
		require.True(t, found, "%s: the passage's chunk lists Acme Corp", mode)
		qa := a.env["query_analysis"].(map[string]any)
		require.Equal(t, []any{"Acme Corp"}, qa["vendors"])
		require.NotContains(t, qa, "suggestion", "vendors is the pointer to find_vendor_info")
	}
	// The markdown says where to ask about the vendor.
	md := h.call(tools.ToolSemanticSearch, map[string]any{"query": passage, "response_mode": "metadata", "page_size": 5})
	require.Contains(t, md.blocks[0], `The query names the vendor "Acme Corp": find_vendor_info`)
	// ids_only stays ids.
	a := h.call(tools.ToolSemanticSearch, map[string]any{"query": passage, "response_mode": "ids_only", "format": "json"})
	require.NotContains(t, a.results()[0], "mentions")
}

// The cost of mentions on a vendor-heavy page, against the metadata and
// preview targets of docs/MCP.md.
func TestMentionsTokenCostOnDemo(t *testing.T) {
	h := newReal(t)
	const query = "which vendors handle payroll, CRM and backups"
	for _, mode := range []string{"metadata", "preview"} {
		args := map[string]any{"query": query, "response_mode": mode, "page_size": 10}
		h.call(tools.ToolSemanticSearch, args)
		a := h.call(tools.ToolSemanticSearch, args)
		args["format"] = "json"
		j := h.call(tools.ToolSemanticSearch, args)
		total := int(a.execution()["tokens_used"].(float64))
		jsonCost, mdCost, with := 0, 0, 0
		for _, r := range j.results() {
			if list, ok := r["mentions"].([]any); ok {
				with++
				b, err := json.Marshal(map[string]any{"mentions": list})
				require.NoError(t, err)
				jsonCost += tokens.Count(string(b)) - 1 // the member, without one of the braces
			}
		}
		for _, line := range strings.Split(a.blocks[0], "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "Mentions: ") {
				mdCost += tokens.Count(line + "\n")
			}
		}
		t.Logf("%s, page of 10 on %q: %d tokens in all (default format), %d results with mentions; mentions cost %d tokens in markdown, %d in json (page %d)",
			mode, query, total, with, mdCost, jsonCost, int(j.execution()["tokens_used"].(float64)))
		require.Positive(t, with, "the page names vendors")
		require.LessOrEqual(t, total, maxDefaultTotal[mode], mode)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestMentionLinksFollowDocumentsAndGraphOnDemo ingests a document into the
// demo stack, names a new vendor in the graph, adds an alias, then deletes
// the document: the links follow each step.
func TestMentionLinksFollowDocumentsAndGraphOnDemo(t *testing.T) {
	h := newReal(t)
	s := demoStack(t)
	s.IngestDocs(t, map[string]string{"mentions-test/zyxwv.md": "# Zyxwv\n\nThe Zyxwv Holdings contract was signed by Qrstu Group in March; Qrstu Group renews it yearly.\n"})
	s.ImportGraphLines(t, []string{`{"kind":"entity","id":"mentions-test-zyxwv","name":"Zyxwv Holdings","entity_type":"COMPANY","confidence":0.9,"is_vendor":true}`})
	evidence := func() float64 {
		a := h.call(tools.ToolFindVendorInfo, map[string]any{"vendor_name": "Zyxwv Holdings", "response_mode": "metadata", "format": "json"})
		require.Equal(t, "success", a.status())
		docs := a.results()[0]["evidence_documents"].([]any)
		if len(docs) == 0 {
			return 0
		}
		return docs[0].(map[string]any)["mention_count"].(float64)
	}
	require.Equal(t, 1.0, evidence(), "importing a vendor links the chunks already naming it")

	s.ImportGraphLines(t, []string{`{"kind":"entity","id":"mentions-test-zyxwv","name":"Zyxwv Holdings","entity_type":"COMPANY","confidence":0.9,"is_vendor":true,"aliases":["Qrstu Group"]}`})
	require.Equal(t, 3.0, evidence(), "importing a new alias links existing chunks")

	a := h.call(tools.ToolSemanticSearch, map[string]any{"query": "Zyxwv Holdings contract Qrstu Group", "response_mode": "metadata", "format": "json"})
	require.Contains(t, mentionNames(a.results()[0]), "Zyxwv Holdings")

	conn, err := grpcclient.Dial(s.Addr(stacktest.Search), stacktest.IngestToken)
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = searchv1.NewSearchServiceClient(conn).DeleteDocument(ctx, &searchv1.DeleteDocumentRequest{ExternalId: "mentions-test/zyxwv.md"})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return evidence() == 0 }, 5*time.Second, 50*time.Millisecond, "deleting the document removes its links")
}

// A name the graph does not know gets, among its suggestions, the vendors
// the chunks matching its words mention.
func TestVendorNotFoundSuggestsMentionedVendorsOnDemo(t *testing.T) {
	h := newReal(t)
	a := h.call(tools.ToolFindVendorInfo, map[string]any{"vendor_name": "payroll and HR software provider", "format": "json"})
	require.Equal(t, "VENDOR_NOT_FOUND", a.errCode())
	var suggestions []string
	for _, s := range a.errObj()["suggestions"].([]any) {
		suggestions = append(suggestions, s.(string))
	}
	require.Contains(t, suggestions, "Acme Corp", "the payroll passages name Acme Corp")
}
