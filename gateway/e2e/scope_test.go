package e2e

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/gateway/internal/rest"
)

// scopeDocs are documents in three categories that all answer one query.
var scopeDocs = map[string]string{
	"security/incident.md": "# Incident policy\n\nThe quokka policy says report every incident within an hour.\n",
	"security/access.md":   "# Access policy\n\nThe quokka policy grants access by role.\n",
	"hr/salaries.md":       "# Salary policy\n\nThe quokka policy keeps salary bands confidential.\n",
	"finance/budget.md":    "# Budget policy\n\nThe quokka policy caps travel budgets.\n",
}

type scopeSearch struct {
	Results []struct {
		Chunk struct {
			ChunkID        string `json:"chunkId"`
			SourceCategory string `json:"sourceCategory"`
		} `json:"chunk"`
	} `json:"results"`
	TotalAvailable int `json:"totalAvailable"`
}

// TestKeyScopesOverREST: a category-scoped key never sees another category
// through any REST read, whatever scope or filter the caller sends; a
// tool-scoped key is refused the routes of other tools.
func TestKeyScopesOverREST(t *testing.T) {
	s := newStack(t, nil)
	sum := s.st.IngestDocs(t, scopeDocs)
	require.Equal(t, len(scopeDocs), sum.Written, "%+v", sum)
	open := s.createKey(`{"name":"open"}`)
	scoped := s.createKey(`{"name":"scoped","scopes":{"categories":["security"]}}`)
	tooled := s.createKey(`{"name":"tooled","scopes":{"tools":["semantic_search","get_chunks"]}}`)

	search := func(key, body string) (int, scopeSearch, string) {
		t.Helper()
		r := s.do("POST", "/v1/search", body, rest.HeaderAPIKey, key)
		var out scopeSearch
		if r.status == http.StatusOK {
			require.NoError(t, json.Unmarshal(r.body, &out))
		}
		return r.status, out, string(r.body)
	}
	code, all, body := search(open, `{"query":"quokka policy","limit":50}`)
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, 4, all.TotalAvailable)
	var hrChunk, securityChunk string
	for _, r := range all.Results {
		switch r.Chunk.SourceCategory {
		case "hr":
			hrChunk = r.Chunk.ChunkID
		case "security":
			securityChunk = r.Chunk.ChunkID
		}
	}
	require.NotEmpty(t, hrChunk)
	require.NotEmpty(t, securityChunk)

	for _, tc := range []struct{ name, body string }{
		{"plain", `{"query":"quokka policy","limit":50}`},
		{"a scope sent by the caller is replaced", `{"query":"quokka policy","limit":50,"scope":{"categories":["hr","finance"]}}`},
		{"bm25", `{"query":"quokka salary budget","limit":50,"mode":"RETRIEVAL_MODE_BM25"}`},
		{"a filter inside the scope", `{"query":"quokka policy","limit":1,"categories":["security"]}`},
	} {
		t.Run("search: "+tc.name, func(t *testing.T) {
			code, out, body := search(scoped, tc.body)
			require.Equal(t, http.StatusOK, code, body)
			require.NotEmpty(t, out.Results)
			for _, r := range out.Results {
				require.Equal(t, "security", r.Chunk.SourceCategory)
			}
			require.Equal(t, 2, out.TotalAvailable, "the total counts only the key's categories")
		})
	}
	t.Run("search: a category outside the scope is unknown", func(t *testing.T) {
		code, _, body := search(scoped, `{"query":"quokka policy","limit":5,"categories":["hr"]}`)
		require.Equal(t, http.StatusBadRequest, code, body)
		require.Contains(t, body, "unknown category")
	})

	t.Run("chunks", func(t *testing.T) {
		r := s.do("GET", "/v1/chunks?chunk_ids="+hrChunk+"&chunk_ids="+securityChunk+"&scope.categories=hr", "", rest.HeaderAPIKey, scoped)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		var cr struct {
			Chunks []struct {
				ChunkID string `json:"chunkId"`
			} `json:"chunks"`
			MissingIDs []string `json:"missingIds"`
		}
		require.NoError(t, json.Unmarshal(r.body, &cr))
		require.Len(t, cr.Chunks, 1)
		require.Equal(t, securityChunk, cr.Chunks[0].ChunkID)
		require.Equal(t, []string{hrChunk}, cr.MissingIDs, "another category's chunk is as missing as an unknown one")
	})
	t.Run("search and chunks do not tell the index version", func(t *testing.T) {
		// Search tells the adapter alone the version an answer was computed
		// at (platform/answerversion): a REST caller does not learn the
		// change counter, in a header or in the body.
		for _, r := range []response{
			s.do("POST", "/v1/search", `{"query":"quokka policy","limit":5}`, rest.HeaderAPIKey, scoped),
			s.do("GET", "/v1/chunks?chunk_ids="+securityChunk, "", rest.HeaderAPIKey, scoped),
		} {
			require.Equal(t, http.StatusOK, r.status, "%s", r.body)
			for name := range r.header {
				lower := strings.ToLower(name)
				require.NotContains(t, lower, "index-version", name)
				require.False(t, strings.HasPrefix(lower, "grpc-metadata-"), name)
			}
			require.NotContains(t, string(r.body), "indexGeneration")
		}
	})
	t.Run("categories", func(t *testing.T) {
		r := s.do("GET", "/v1/categories?scope.categories=hr", "", rest.HeaderAPIKey, scoped)
		require.Equal(t, http.StatusOK, r.status)
		require.JSONEq(t, `{"categories":[{"name":"security","documentCount":2}]}`, string(r.body))
	})
	t.Run("index status", func(t *testing.T) {
		r := s.do("GET", "/v1/index/status", "", rest.HeaderAPIKey, scoped)
		require.Equal(t, http.StatusOK, r.status)
		var st struct {
			Documents string `json:"documents"`
		}
		require.NoError(t, json.Unmarshal(r.body, &st))
		require.Equal(t, "2", st.Documents)
		r = s.do("GET", "/v1/index/status", "", rest.HeaderAPIKey, open)
		require.NoError(t, json.Unmarshal(r.body, &st))
		require.Equal(t, strconv.Itoa(len(scopeDocs)), st.Documents, "unscoped keys keep today's answer")
	})

	t.Run("vendor evidence", func(t *testing.T) {
		s.st.ImportGraphLines(t, []string{`{"kind":"entity","id":"quokka","name":"Quokka","entity_type":"COMPANY","confidence":0.9,"is_vendor":true}`})
		vendor := func(key, query string) (count int, files []string) {
			t.Helper()
			r := s.do("GET", "/v1/vendors/Quokka?maxEvidence=10"+query, "", rest.HeaderAPIKey, key)
			require.Equal(t, http.StatusOK, r.status, string(r.body))
			var out struct {
				EvidenceChunkCount int `json:"evidenceChunkCount"`
				Evidence           []struct {
					SourceFile string `json:"sourceFile"`
				} `json:"evidence"`
			}
			require.NoError(t, json.Unmarshal(r.body, &out))
			for _, e := range out.Evidence {
				files = append(files, e.SourceFile)
			}
			return out.EvidenceChunkCount, files
		}
		n, files := vendor(open, "")
		require.Equal(t, 4, n, "every document names the vendor: %v", files)
		for _, query := range []string{"", "&evidenceCategories=hr&evidenceCategories=finance"} {
			n, files = vendor(scoped, query)
			require.Equal(t, 2, n, "only the key's category, whatever the caller sends (%q)", query)
			require.ElementsMatch(t, []string{"security/incident.md", "security/access.md"}, files)
		}
	})
	t.Run("tool scope", func(t *testing.T) {
		code, _, body := search(tooled, `{"query":"quokka policy","limit":5}`)
		require.Equal(t, http.StatusOK, code, body)
		for _, path := range []string{"/v1/vendors/Acme", "/v1/vendor-suggestions?text=ac", "/v1/graph/status"} {
			r := s.do("GET", path, "", rest.HeaderAPIKey, tooled)
			require.Equal(t, http.StatusForbidden, r.status, "%s: %s", path, r.body)
			require.Contains(t, string(r.body), "TOOL_NOT_ALLOWED", path)
			require.Contains(t, string(r.body), "semantic_search, get_chunks", "the refusal says what the key may use")
		}
	})
}
