package e2e

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/gateway/internal/rest"
)

// GET /v1/documents and /v1/documents/{id} show every document's access
// list: operator routes (the ingest credential in X-Admin-Token), refused
// to an API key, even one in every group, and to the key administrators'
// credential.
func TestDocumentAccessListsOverREST(t *testing.T) {
	s := newStack(t, nil)
	sum := s.st.Ingest(t, writeJSONL(t, "access.jsonl", accessRecords))
	require.Equal(t, len(accessRecords), sum.Written, "%+v", sum)
	ingest := []string{rest.HeaderAdminToken, ingestToken}

	type doc struct {
		ExternalID string   `json:"externalId"`
		Access     []string `json:"access"`
		Category   string   `json:"category"`
		ChunkCount int      `json:"chunkCount"`
	}
	r := s.do("GET", "/v1/documents?principal=group:hr&pageSize=1", "", ingest...)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var page struct {
		Documents     []doc  `json:"documents"`
		NextPageToken string `json:"nextPageToken"`
	}
	require.NoError(t, json.Unmarshal(r.body, &page), "%s", r.body)
	require.Equal(t, []doc{{ExternalID: "both", Access: []string{"group:hr", "group:legal"}, Category: "policy", ChunkCount: 1}}, page.Documents)
	require.NotEmpty(t, page.NextPageToken)
	r = s.do("GET", "/v1/documents?principal=group:hr&pageSize=1&pageToken="+page.NextPageToken, "", ingest...)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	page.NextPageToken = ""
	require.NoError(t, json.Unmarshal(r.body, &page), "%s", r.body)
	require.Equal(t, "hr", page.Documents[0].ExternalID)
	require.Empty(t, page.NextPageToken, "the last page")

	r = s.do("GET", "/v1/documents/alice", "", ingest...)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var one struct {
		Document doc `json:"document"`
	}
	require.NoError(t, json.Unmarshal(r.body, &one), "%s", r.body)
	require.Equal(t, []string{"user:alice"}, one.Document.Access)

	// --readable-by over REST, as GATEWAY.md spells it: the ReadScope's
	// fields as query parameters (everyone is always in the set).
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"readableBy.access=group:legal", []string{"both", "legal", "pub"}},
		{"readable_by.access=group:hr&readable_by.access=user:alice", []string{"alice", "both", "hr", "pub"}},
		{"readableBy.access=group:hr&readableBy.categories=Policy", []string{"both", "hr", "pub"}},
		{"readableBy.access=group:hr&readableBy.categories=finance", nil},
	} {
		r := s.do("GET", "/v1/documents?"+tc.query, "", ingest...)
		require.Equal(t, http.StatusOK, r.status, "%s: %s", tc.query, r.body)
		var listed struct {
			Documents []doc `json:"documents"`
		}
		require.NoError(t, json.Unmarshal(r.body, &listed), "%s", r.body)
		var ids []string
		for _, d := range listed.Documents {
			ids = append(ids, d.ExternalID)
		}
		require.Equal(t, tc.want, ids, tc.query)
	}

	// Documents of no source: plain ingestion's, not an upload's (an
	// upload goes into the source the route names).
	r = s.do("POST", "/v1/sources/uploads/files?file=guide.md", "# Guide\n\nThe upload wombat guide.\n", ingest...)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	for query, want := range map[string][]string{
		"noSource=true":                    {"alice", "both", "hr", "legal", "pub"},
		"source=uploads":                   {"uploads:guide.md"},
		"noSource=true&principal=everyone": {"pub"},
	} {
		r := s.do("GET", "/v1/documents?"+query, "", ingest...)
		require.Equal(t, http.StatusOK, r.status, "%s: %s", query, r.body)
		var listed struct {
			Documents []doc `json:"documents"`
		}
		require.NoError(t, json.Unmarshal(r.body, &listed), "%s", r.body)
		var ids []string
		for _, d := range listed.Documents {
			ids = append(ids, d.ExternalID)
		}
		require.Equal(t, want, ids, query)
	}

	for _, tc := range []struct {
		name, path string
		status     int
	}{
		{"unknown document", "/v1/documents/nothing", http.StatusNotFound},
		{"unknown principal form", "/v1/documents?principal=role:hr", http.StatusBadRequest},
		{"malformed page token", "/v1/documents?pageToken=x", http.StatusBadRequest},
		{"no source and a source", "/v1/documents?noSource=true&source=handbook", http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.do("GET", tc.path, "", ingest...)
			require.Equal(t, tc.status, r.status, "%s", r.body)
		})
	}

	allGroups := s.createKey(`{"name":"every-group","groups":["hr","legal"]}`)
	for _, path := range []string{"/v1/documents", "/v1/documents/hr"} {
		r := s.do("GET", path, "", rest.HeaderAPIKey, allGroups)
		require.Equal(t, http.StatusUnauthorized, r.status, "an API key: %s", r.body)
		r = s.do("GET", path, "", rest.HeaderAdminToken, adminToken)
		require.Equal(t, http.StatusForbidden, r.status, "the key administrators' credential: %s", r.body)
	}
}
