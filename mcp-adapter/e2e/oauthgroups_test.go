package e2e

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/stacktest"
)

// TestOAuthGroups: an access token's groups claim, read by the adapter and
// mapped by the auth service (BMCIS_OAUTH_GROUP_MAP), and its subject
// (user:SUB) decide which documents it reads, through search results,
// their totals, a cursor replayed by another caller and the kb:// chunk
// resource. Tokens come from the real OpenID provider.
func TestOAuthGroups(t *testing.T) {
	_, npm := nodeTools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	prov := startOIDC(t, ctx, npm)
	iss := prov.issuers.Issuer

	// A stack of its own: restricted documents would change the shared
	// demo stack's answers to other tests.
	s := stacktest.Start(t, stacktest.Options{})
	authSvc := s.StartService(t, stacktest.Auth, map[string]string{
		"BMCIS_AUTH_OAUTH_ISSUERS": iss,
		// The provider's "HR-Team" is our hr; its "legal" maps to nothing.
		"BMCIS_OAUTH_GROUP_MAP": "HR-Team=hr",
	})
	ln := stacktest.Listen(t)
	resource := "http://" + ln.Addr().String() + "/mcp"
	base := adapterHTTPOn(t, s, ln, map[string]string{
		"BMCIS_AUTH_ADDR":      authSvc.Addr(),
		"BMCIS_OAUTH_ISSUER":   iss,
		"BMCIS_OAUTH_RESOURCE": resource,
	})
	reader := prov.token(t, ctx, iss, "kb-reader", "kb:read", resource)
	hr := prov.token(t, ctx, iss, "kb-hr", "kb:read", resource)
	legal := prov.token(t, ctx, iss, "kb-legal", "kb:read", resource)
	require.Equal(t, []any{"HR-Team", "Staff"}, jwtPart(t, hr, 1)["groups"], "the provider puts the claim in the token")
	legalSub := jwtPart(t, legal, 1)["sub"].(string)
	require.NotEmpty(t, legalSub)

	records := []string{
		`{"_id":"pub","title":"Public","text":"The quoll handbook for every employee.","category":"people"}`,
		`{"_id":"hr","title":"Pay","text":"The quoll handbook on pay bands.","category":"people","access":["group:hr"]}`,
		`{"_id":"legal","title":"Contracts","text":"The quoll handbook on contracts.","category":"people","access":["group:legal"]}`,
		`{"_id":"mine","title":"Review","text":"The quoll handbook review notes.","category":"people","access":["user:` + legalSub + `"]}`,
	}
	p := filepath.Join(t.TempDir(), "quoll.jsonl")
	require.NoError(t, os.WriteFile(p, []byte(strings.Join(records, "\n")+"\n"), 0o644))
	sum := s.Ingest(t, p)
	require.Equal(t, len(records), sum.Written, "%+v", sum)

	bearer := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }
	type page struct {
		files  []string
		chunks []any
		total  int
		cursor string
	}
	search := func(tok string, args map[string]any) page {
		t.Helper()
		env := callTool(t, httpClient(t, base, bearer(tok)), "semantic_search", args)
		require.Equal(t, "success", status(env), "%v", env["error"])
		var out page
		for _, r := range env["results"].([]any) {
			out.files = append(out.files, strings.TrimSuffix(r.(map[string]any)["source_file"].(string), ""))
			out.chunks = append(out.chunks, r.(map[string]any)["chunk_id"])
		}
		pg := env["pagination"].(map[string]any)
		out.total = int(pg["total_available"].(float64))
		if c, ok := pg["cursor"].(string); ok {
			out.cursor = c
		}
		return out
	}
	all := map[string]any{"query": "quoll handbook", "response_mode": "metadata", "page_size": 10}
	totals := map[string]int{}
	for name, tok := range map[string]string{"reader": reader, "hr": hr, "legal": legal} {
		totals[name] = search(tok, all).total
	}
	require.Equal(t, map[string]int{"reader": 1, "hr": 2, "legal": 2}, totals,
		"reader: everyone's; hr: + the mapped group; legal: + its user (its unmapped group counts for nothing)")

	t.Run("a cursor replayed by another caller", func(t *testing.T) {
		first := search(hr, map[string]any{"query": "quoll handbook", "response_mode": "metadata", "page_size": 1})
		require.NotEmpty(t, first.cursor)
		next := search(reader, map[string]any{"query": "quoll handbook", "cursor": first.cursor})
		require.Equal(t, 1, next.total, "the replaying caller's own list")
		require.Empty(t, next.chunks, "the reader's list has no second result")
	})

	t.Run("the chunk resource", func(t *testing.T) {
		hrChunks := search(hr, all).chunks
		readerChunks := search(reader, all).chunks
		var hrOnly any
		for _, c := range hrChunks {
			if !containsAny(readerChunks, c) {
				hrOnly = c
			}
		}
		require.NotNil(t, hrOnly)
		env := callTool(t, httpClient(t, base, bearer(reader)), "get_chunks", map[string]any{"chunk_ids": []any{hrOnly}})
		got := env["results"]
		if got != nil {
			require.Empty(t, got, "another group's chunk is not the reader's")
		}
		env = callTool(t, httpClient(t, base, bearer(hr)), "get_chunks", map[string]any{"chunk_ids": []any{hrOnly}})
		require.Equal(t, "success", status(env), "%v", env["error"])
		require.Len(t, env["results"].([]any), 1)
	})
	files := search(legal, all).files
	sort.Strings(files)
	require.Len(t, files, 2)
}

func containsAny(list []any, v any) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
