package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/gateway/internal/rest"
	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/stacktest"
)

// readableRecords all answer "wombat", in three categories (one spelled
// with a capital, which a scope resolves case-insensitively) with lists of
// every kind.
var readableRecords = []string{
	`{"_id":"pub","title":"Public","text":"The wombat policy for everyone.","category":"policy"}`,
	`{"_id":"hr","title":"Pay","text":"The wombat pay bands.","category":"policy","access":["group:hr"]}`,
	`{"_id":"hr-sec","title":"Badges","text":"The wombat badge rules.","category":"Security","access":["group:hr"]}`,
	`{"_id":"sec","title":"Doors","text":"The wombat door rules.","category":"Security"}`,
	`{"_id":"legal","title":"Contracts","text":"The wombat contracts.","category":"legal","access":["group:legal"]}`,
	`{"_id":"both","title":"Hiring","text":"The wombat hiring notes.","category":"policy","access":["group:hr","group:legal"]}`,
	`{"_id":"alice","title":"Review","text":"The wombat review of one person.","category":"policy","access":["user:alice"]}`,
}

// listedReadable is `bmcisctl documents --readable-by WHO`'s external ids.
func listedReadable(t *testing.T, s *stack, who string) []string {
	t.Helper()
	out := s.st.Ctl(t, "documents", "--readable-by", who, "-o", "json")
	ids := []string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var d struct {
			ID string `json:"external_id"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &d), line)
		ids = append(ids, d.ID)
	}
	sort.Strings(ids)
	return ids
}

// distinct sorts ids and drops repeats.
func distinct(ids []string) []string {
	out := []string{}
	seen := map[string]bool{}
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// TestReadableByIsWhatAKeyFinds: `bmcisctl documents --readable-by KEY_ID`
// lists exactly the documents the key's own reads return through the
// gateway: its searches, and GetChunks over every chunk there is. Keys: in
// a group, in none, in a group with a category scope (spelled in another
// case than the category), and scoped to a category no document has. A set
// given directly lists what a search carrying that set finds.
func TestReadableByIsWhatAKeyFinds(t *testing.T) {
	s := newStack(t, nil)
	sum := s.st.Ingest(t, writeJSONL(t, "readable.jsonl", readableRecords))
	require.Equal(t, len(readableRecords), sum.Written, "%+v", sum)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Every chunk id: a caller on every list finds them all.
	all, err := s.search.Search(ctx, &searchv1.SearchRequest{Query: "wombat", Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_BM25,
		Limit: 50, Scope: &searchv1.ReadScope{Access: []string{"group:hr", "group:legal", "user:alice"}}})
	require.NoError(t, err)
	require.Len(t, all.GetResults(), len(readableRecords))
	chunks := url.Values{}
	for _, r := range all.GetResults() {
		chunks.Add("chunk_ids", strconv.FormatInt(r.GetChunk().GetChunkId(), 10))
	}

	for _, tc := range []struct {
		name, body string
		want       []string
	}{
		{"hr", `{"name":"hr","groups":["hr"]}`, []string{"both", "hr", "hr-sec", "pub", "sec"}},
		{"no group", `{"name":"plain"}`, []string{"pub", "sec"}},
		{"hr, security only", `{"name":"hr-sec","groups":["hr"],"scopes":{"categories":["security"]}}`, []string{"hr-sec", "sec"}},
		{"a category no document has", `{"name":"none","groups":["hr"],"scopes":{"categories":["finance"]}}`, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := s.createKey(tc.body)
			listed := listedReadable(t, s, stacktest.KeyID(key))
			require.Equal(t, tc.want, listed)

			var searched []string
			for _, h := range s.restSearch(key, "wombat", 50) {
				searched = append(searched, h.DocumentID)
			}
			require.Equal(t, listed, distinct(searched), "the key's search")

			r := s.do("GET", "/v1/chunks?"+chunks.Encode(), "", rest.HeaderAPIKey, key)
			require.Equal(t, http.StatusOK, r.status, "%s", r.body)
			var got struct {
				Chunks []struct {
					DocumentID string `json:"documentId"`
				} `json:"chunks"`
			}
			require.NoError(t, json.Unmarshal(r.body, &got), "%s", r.body)
			var read []string
			for _, c := range got.Chunks {
				read = append(read, c.DocumentID)
			}
			require.Equal(t, listed, distinct(read), "the key's chunk reads")
		})
	}

	// A key limited to find_vendor_info: its groups allow the same
	// documents as hr's, but the answer says its tools read no text, and
	// the gateway's text reads (search, chunks) refuse it.
	t.Run("hr, find_vendor_info only", func(t *testing.T) {
		key := s.createKey(`{"name":"hr-vendors","groups":["hr"],"scopes":{"tools":["find_vendor_info"]}}`)
		id := stacktest.KeyID(key)
		require.Equal(t, []string{"both", "hr", "hr-sec", "pub", "sec"}, listedReadable(t, s, id))
		out := s.st.Ctl(t, "documents", "--readable-by", id)
		require.True(t, strings.HasPrefix(out, "API key "+id+": tools find_vendor_info; reads text: no; "), "%s", out)
		for tool, r := range map[string]response{
			"semantic_search": s.do("POST", "/v1/search", `{"query":"wombat","mode":"RETRIEVAL_MODE_BM25"}`, rest.HeaderAPIKey, key),
			"get_chunks":      s.do("GET", "/v1/chunks?"+chunks.Encode(), "", rest.HeaderAPIKey, key),
		} {
			require.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
			require.Contains(t, string(r.body), "TOOL_NOT_ALLOWED")
			// The tool is named, as the MCP adapter's refusal names it.
			require.Contains(t, string(r.body), "This API key may not use "+tool+"; it may use: find_vendor_info.")
		}
	})

	// A set given directly: what a read carrying it finds (an OAuth
	// caller's set holds user:SUB).
	for _, set := range []string{"group:hr", "user:alice", "group:legal,user:alice", "everyone"} {
		t.Run(set, func(t *testing.T) {
			found, err := s.search.Search(ctx, &searchv1.SearchRequest{Query: "wombat", Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_BM25,
				Limit: 50, Scope: &searchv1.ReadScope{Access: strings.Split(set, ",")}})
			require.NoError(t, err)
			var searched []string
			for _, r := range found.GetResults() {
				searched = append(searched, r.GetChunk().GetDocumentId())
			}
			require.Equal(t, distinct(searched), listedReadable(t, s, set))
		})
	}
}
