package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/gateway/internal/rest"
)

// accessRecords are JSON Lines records that all answer one query, each
// readable by other principals (docs/ACCESS.md).
var accessRecords = []string{
	`{"_id":"pub","title":"Public","text":"The wombat policy is posted for every employee.","category":"policy"}`,
	`{"_id":"hr","title":"Salaries","text":"The wombat policy sets salary bands.","category":"policy","access":["group:hr"]}`,
	`{"_id":"legal","title":"Contracts","text":"The wombat policy governs contract review.","category":"policy","access":["group:legal"]}`,
	`{"_id":"both","title":"Hiring","text":"The wombat policy on hiring contracts and offers.","category":"policy","access":["group:hr","group:legal"]}`,
	`{"_id":"alice","title":"Review","text":"The wombat policy review notes for one person.","category":"policy","access":["user:alice"]}`,
}

// writeJSONL writes records to a fresh file and returns its path.
func writeJSONL(t *testing.T, name string, records []string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(strings.Join(records, "\n")+"\n"), 0o644))
	return p
}

type accessResult struct {
	Results []struct {
		Rank  int `json:"rank"`
		Chunk struct {
			ChunkID    string `json:"chunkId"`
			DocumentID string `json:"documentId"`
		} `json:"chunk"`
	} `json:"results"`
	TotalAvailable int  `json:"totalAvailable"`
	CacheHit       bool `json:"cacheHit"`
}

func (r accessResult) docs() []string {
	var out []string
	for _, x := range r.Results {
		out = append(out, x.Chunk.DocumentID)
	}
	sort.Strings(out)
	return out
}

// TestAccessListsOverREST: two keys in different groups, and one in none,
// see different results, totals, chunks, categories, counts and vendor
// evidence for the same reads; a page or a cached list of one is never
// another's; an access change applies without rewriting chunks; a bad
// entry writes nothing.
func TestAccessListsOverREST(t *testing.T) {
	s := newStack(t, nil)
	sum := s.st.Ingest(t, writeJSONL(t, "access.jsonl", accessRecords))
	require.Equal(t, len(accessRecords), sum.Written, "%+v", sum)
	plain := s.createKey(`{"name":"plain"}`)
	hr := s.createKey(`{"name":"hr","groups":["hr"]}`)
	legal := s.createKey(`{"name":"legal","groups":["Legal"]}`)

	search := func(key, body string) accessResult {
		t.Helper()
		r := s.do("POST", "/v1/search", body, rest.HeaderAPIKey, key)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		var out accessResult
		require.NoError(t, json.Unmarshal(r.body, &out))
		return out
	}
	const all = `{"query":"wombat policy","limit":50}`
	chunkOf := map[string]string{}
	for _, x := range search(hr, all).Results {
		chunkOf[x.Chunk.DocumentID] = x.Chunk.ChunkID
	}

	t.Run("results and totals", func(t *testing.T) {
		// Five short records train no vector model: the vector side's
		// filter is the store's test (TestVectorSearchAccess).
		for _, mode := range []string{"", `,"mode":"RETRIEVAL_MODE_BM25"`} {
			body := `{"query":"wombat policy","limit":50,"noCache":true` + mode + `}`
			for key, want := range map[string][]string{
				plain: {"pub"},
				hr:    {"both", "hr", "pub"},
				legal: {"both", "legal", "pub"},
			} {
				out := search(key, body)
				require.Equal(t, want, out.docs(), "mode %q", mode)
				require.Equal(t, len(want), out.TotalAvailable, "the total counts only what the caller may read (mode %q)", mode)
			}
		}
		// A scope the REST caller sends is replaced by its key's.
		out := search(plain, `{"query":"wombat policy","limit":50,"scope":{"access":["group:hr","user:alice"]}}`)
		require.Equal(t, []string{"pub"}, out.docs())
	})

	t.Run("pages and the cache are per caller", func(t *testing.T) {
		first := search(hr, all)
		again := search(hr, all)
		require.True(t, again.CacheHit, "the caller's own repeat is cached")
		require.Equal(t, first.docs(), again.docs())
		other := search(legal, all)
		require.False(t, other.CacheHit, "another caller's list is never served, nor its hit told")
		require.Equal(t, []string{"both", "legal", "pub"}, other.docs())
		// The same page asked by another caller is cut from that caller's list.
		for key, allowed := range map[string][]string{hr: {"both", "hr", "pub"}, legal: {"both", "legal", "pub"}, plain: {"pub"}} {
			for off := 0; off < 3; off++ {
				page := search(key, fmt.Sprintf(`{"query":"wombat policy","limit":1,"offset":%d}`, off))
				for _, x := range page.Results {
					require.Contains(t, allowed, x.Chunk.DocumentID, "offset %d", off)
				}
				require.Equal(t, len(allowed), page.TotalAvailable)
			}
		}
	})

	t.Run("chunks", func(t *testing.T) {
		q := "/v1/chunks?chunk_ids=" + chunkOf["hr"] + "&chunk_ids=" + chunkOf["pub"] + "&scope.access=group:hr"
		r := s.do("GET", q, "", rest.HeaderAPIKey, legal)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		var cr struct {
			Chunks []struct {
				ChunkID string `json:"chunkId"`
			} `json:"chunks"`
			MissingIDs []string `json:"missingIds"`
		}
		require.NoError(t, json.Unmarshal(r.body, &cr))
		require.Len(t, cr.Chunks, 1)
		require.Equal(t, chunkOf["pub"], cr.Chunks[0].ChunkID)
		require.Equal(t, []string{chunkOf["hr"]}, cr.MissingIDs, "a chunk the caller may not read is as missing as an unknown one")
	})

	t.Run("categories and status", func(t *testing.T) {
		r := s.do("GET", "/v1/categories", "", rest.HeaderAPIKey, plain)
		require.JSONEq(t, `{"categories":[{"name":"policy","documentCount":1}]}`, string(r.body))
		r = s.do("GET", "/v1/categories", "", rest.HeaderAPIKey, hr)
		require.JSONEq(t, `{"categories":[{"name":"policy","documentCount":3}]}`, string(r.body))
		var st struct {
			Documents string `json:"documents"`
		}
		r = s.do("GET", "/v1/index/status", "", rest.HeaderAPIKey, legal)
		require.NoError(t, json.Unmarshal(r.body, &st))
		require.Equal(t, "3", st.Documents)
	})

	t.Run("vendor evidence", func(t *testing.T) {
		s.st.ImportGraphLines(t, []string{`{"kind":"entity","id":"wombat","name":"Wombat","entity_type":"COMPANY","confidence":0.9,"is_vendor":true}`})
		evidence := func(key string) (int, []string) {
			r := s.do("GET", "/v1/vendors/Wombat?maxEvidence=10&evidenceAccess=group:hr&evidenceAccess=group:legal", "", rest.HeaderAPIKey, key)
			require.Equal(t, http.StatusOK, r.status, "%s", r.body)
			var out struct {
				EvidenceChunkCount int `json:"evidenceChunkCount"`
				Evidence           []struct {
					DocumentID string `json:"documentId"`
				} `json:"evidence"`
			}
			require.NoError(t, json.Unmarshal(r.body, &out))
			var docs []string
			for _, e := range out.Evidence {
				docs = append(docs, e.DocumentID)
			}
			sort.Strings(docs)
			return out.EvidenceChunkCount, docs
		}
		n, docs := evidence(plain)
		require.Equal(t, 1, n, "whatever access the caller sends: %v", docs)
		require.Equal(t, []string{"pub"}, docs)
		n, docs = evidence(hr)
		require.Equal(t, 3, n)
		require.Equal(t, []string{"both", "hr", "pub"}, docs)
	})

	t.Run("an access change applies without rewriting chunks", func(t *testing.T) {
		changed := append([]string(nil), accessRecords...)
		changed[1] = strings.Replace(changed[1], `"group:hr"`, `"group:legal"`, 1)
		sum := s.st.Ingest(t, writeJSONL(t, "access.jsonl", changed))
		require.Equal(t, 1, sum.Written, "%+v", sum)
		require.Equal(t, 0, sum.Chunks, "no chunk written, so none to embed: %+v", sum)
		require.Equal(t, []string{"both", "pub"}, search(hr, all).docs())
		out := search(legal, all)
		require.Equal(t, []string{"both", "hr", "legal", "pub"}, out.docs())
		for _, x := range out.Results {
			if x.Chunk.DocumentID == "hr" {
				require.Equal(t, chunkOf["hr"], x.Chunk.ChunkID, "the same chunk row: its text and vector stay")
			}
		}
	})

	t.Run("a bad entry refuses the whole input", func(t *testing.T) {
		bad := writeJSONL(t, "bad.jsonl", []string{
			`{"_id":"new","title":"New","text":"The wombat policy appendix.","category":"policy"}`,
			`{"_id":"broken","title":"Broken","text":"The wombat policy draft.","category":"policy","access":["group:hr","admins"]}`,
		})
		out, err := s.st.TryCtl("ingest", "-quiet", "-addr", s.st.Addr("search"), bad)
		require.Error(t, err, "%s", out)
		require.Contains(t, err.Error(), `record "broken"`)
		require.Contains(t, err.Error(), `"admins"`)
		for _, key := range []string{plain, hr, legal} {
			require.NotContains(t, search(key, all).docs(), "new", "nothing of the file was written")
		}
	})
}

// TestSyncAccessOverREST: a synced folder's default (sync --access) and a
// subfolder's .bmcis-access decide who reads its files, and /v1/sources
// counts only what the caller may read.
func TestSyncAccessOverREST(t *testing.T) {
	s := newStack(t, nil)
	dir := t.TempDir()
	for rel, text := range map[string]string{
		"handbook.md":         "# Handbook\n\nThe numbat rules for everybody in HR.\n",
		"contracts/vendor.md": "# Vendor\n\nThe numbat rules for contracts.\n",
		"contracts/nda.md":    "# NDA\n\nThe numbat rules for NDAs.\n",
	} {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "contracts", ".bmcis-access"), []byte("# legal only\ngroup:legal\n"), 0o644))
	s.st.Ctl(t, "sync", "-addr", s.st.Addr("search"), "-access", "group:hr", "people", dir)

	plain := s.createKey(`{"name":"plain"}`)
	hr := s.createKey(`{"name":"hr","groups":["hr"]}`)
	legal := s.createKey(`{"name":"legal","groups":["legal"]}`)
	total := func(key string) int {
		r := s.do("POST", "/v1/search", `{"query":"numbat rules","limit":50}`, rest.HeaderAPIKey, key)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		var out accessResult
		require.NoError(t, json.Unmarshal(r.body, &out))
		return out.TotalAvailable
	}
	require.Equal(t, 0, total(plain))
	require.Equal(t, 1, total(hr))
	require.Equal(t, 2, total(legal))

	sources := func(key string) string {
		r := s.do("GET", "/v1/sources", "", rest.HeaderAPIKey, key)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		return string(r.body)
	}
	require.NotContains(t, sources(plain), "people", "a source without a readable document is not listed")
	require.Contains(t, sources(hr), `"documentCount":1`)
	require.Contains(t, sources(legal), `"documentCount":2`)
	require.NotContains(t, sources(legal), "group:hr", "only operators see access lists")

	// A new default reaches the documents that hold it, without a resend.
	s.st.Ctl(t, "sync", "-addr", s.st.Addr("search"), "-access", "everyone", "people", dir)
	require.Equal(t, 1, total(plain))
	require.Equal(t, 1, total(hr), "the folder's own list stays")
	require.Equal(t, 3, total(legal))
	out := s.st.Ctl(t, "sources", "-addr", s.st.Addr("search"), "-o", "json")
	require.NotContains(t, out, "group:hr", "everyone is no list")

	// A broken access file stops the sync before anything is sent.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "contracts", ".bmcis-access"), []byte("legal\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "new.md"), []byte("# New\n\nThe numbat rules appendix.\n"), 0o644))
	msg, err := s.st.TryCtl("sync", "-addr", s.st.Addr("search"), "people", dir)
	require.Error(t, err, "%s", msg)
	require.Contains(t, err.Error(), ".bmcis-access")
	require.Equal(t, 1, total(plain), "nothing of the pass was written")
}
