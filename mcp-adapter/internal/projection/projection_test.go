package projection_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/readmask"

	"github.com/bmcis/knowledge/mcp-adapter/internal/apierr"
	"github.com/bmcis/knowledge/mcp-adapter/internal/envelope"
	"github.com/bmcis/knowledge/mcp-adapter/internal/model"
	"github.com/bmcis/knowledge/mcp-adapter/internal/projection"
)

func TestSearchWhitelists(t *testing.T) {
	cases := []struct {
		mode projection.Mode
		want []string
	}{
		{projection.IDsOnly, []string{"chunk_id", "hybrid_score", "rank"}},
		{projection.Metadata, []string{"chunk_id", "source_file", "source_category", "hybrid_score", "rank", "chunk_index", "total_chunks", "page", "mentions"}},
		{projection.Preview, []string{"chunk_id", "source_file", "source_category", "hybrid_score", "rank", "chunk_index", "total_chunks", "page", "chunk_snippet", "context_header", "mentions"}},
		{projection.Full, []string{"chunk_id", "chunk_text", "similarity_score", "bm25_score", "hybrid_score", "rank", "score_type", "source_file", "source_category", "context_header", "chunk_index", "total_chunks", "page", "chunk_token_count", "mentions"}},
	}
	h := hit()
	h.Chunk.Page = 4 // a PDF's chunk
	h.Mentions = []*searchv1.EntityMention{
		{EntityId: "v1", Name: "Acme Corp", EntityType: "COMPANY", IsVendor: true, Count: 2},
		{EntityId: "p1", Name: "Acme Cloud", EntityType: "PRODUCT", Count: 1},
		{EntityId: "p2", Name: "Acme Vault", EntityType: "PRODUCT", Count: 1},
		{EntityId: "p3", Name: "Acme Edge", EntityType: "PRODUCT", Count: 1},
	}
	for _, tc := range cases {
		t.Run(string(tc.mode), func(t *testing.T) {
			require.Equal(t, tc.want, projection.SearchFields(tc.mode))
			o := projection.Hit(h, projection.SearchFields(tc.mode))
			require.Equal(t, tc.want, o.Keys(), "exactly the whitelist, in order")
			if m, ok := o.Get("mentions"); ok {
				list := m.([]envelope.Object)
				require.Len(t, list, projection.MaxMentions, "mentions are capped")
				require.Equal(t, []string{"name", "type", "entity_id"}, list[0].Keys())
			}
			bare := hit()
			require.NotContains(t, projection.Hit(bare, projection.SearchFields(tc.mode)).Keys(), "mentions", "left out when empty")
			require.NotContains(t, projection.Hit(bare, projection.SearchFields(tc.mode)).Keys(), "page", "left out when 0 (not a paged format)")
			if p, ok := o.Get("page"); ok {
				require.Equal(t, 4, p)
			}
		})
	}
}

// TestReadsAreWhatTheFieldsRead pins each field's Reads, the read mask a
// request sends: a result pruned to the mask of a mode (as the search
// service prunes its answer) projects exactly as the whole result does,
// and a mode without text or mentions asks for neither.
func TestReadsAreWhatTheFieldsRead(t *testing.T) {
	whole := hit()
	whole.Chunk.Page = 4
	whole.MatchedTerms, whole.Bm25Rank, whole.VectorRank = []string{"chunk"}, 2, 3
	whole.Mentions = []*searchv1.EntityMention{{EntityId: "v1", Name: "Acme Corp", EntityType: "COMPANY", IsVendor: true, Count: 2}}
	searchDesc := (&searchv1.SearchResponse{}).ProtoReflect().Descriptor()
	chunksDesc := (&searchv1.GetChunksResponse{}).ProtoReflect().Descriptor()
	for _, m := range projection.Modes() {
		t.Run(string(m), func(t *testing.T) {
			fields := projection.SearchFields(m)
			mask, err := readmask.New(&fieldmaskpb.FieldMask{Paths: projection.SearchReads(fields)}, searchDesc)
			require.NoError(t, err)
			resp := &searchv1.SearchResponse{Results: []*searchv1.SearchResult{proto.Clone(whole).(*searchv1.SearchResult)}}
			mask.Prune(resp)
			require.Equal(t, projection.Hit(whole, fields), projection.Hit(resp.Results[0], fields))

			cfields := projection.ChunkFields(m)
			cmask, err := readmask.New(&fieldmaskpb.FieldMask{Paths: projection.ChunkReads(cfields)}, chunksDesc)
			require.NoError(t, err)
			chunks := &searchv1.GetChunksResponse{Chunks: []*searchv1.Chunk{proto.Clone(whole.Chunk).(*searchv1.Chunk)}}
			cmask.Prune(chunks)
			require.Equal(t, projection.Chunk(whole.Chunk, cfields), projection.Chunk(chunks.Chunks[0], cfields))

			text := slices.ContainsFunc(fields, func(f string) bool { return f == "chunk_text" || f == "chunk_snippet" })
			require.Equal(t, text, mask.Wants("results.chunk.chunk_text"))
			require.Equal(t, slices.Contains(fields, "mentions"), mask.Wants("results.mentions"))
		})
	}
	ids := projection.SearchReads(projection.SearchFields(projection.IDsOnly))
	require.Equal(t, []string{"results.chunk.chunk_id", "results.hybrid_score", "results.rank"}, ids,
		"ids_only asks for no text and no mentions")
	require.Equal(t, []string{"chunks.chunk_id"}, projection.ChunkReads(projection.ChunkFields(projection.IDsOnly)))
}

func TestVendorWhitelistsAndCaps(t *testing.T) {
	v := vendor(150, 700)
	cases := []struct {
		mode       projection.Mode
		want       []string
		maxE, maxR int
	}{
		{projection.IDsOnly, []string{"vendor_name", "entity_ids", "relationship_ids", "evidence_chunk_ids"}, 100, 500},
		{projection.Metadata, []string{"vendor_name", "statistics", "top_entities", "last_updated", "evidence_documents"}, 5, 5},
		{projection.Preview, []string{"vendor_name", "entities", "relationships", "statistics", "evidence"}, 5, 5},
		{projection.Full, []string{"vendor_name", "entities", "relationships", "statistics", "evidence"}, 100, 500},
	}
	for _, tc := range cases {
		t.Run(string(tc.mode), func(t *testing.T) {
			e, r := projection.VendorCaps(tc.mode)
			require.Equal(t, tc.maxE, e)
			require.Equal(t, tc.maxR, r)
			o := projection.Vendor(v, tc.mode, true)
			require.Equal(t, tc.want, o.Keys())
			if list, ok := o.Get("entities"); ok {
				require.Len(t, list, tc.maxE)
				rel, _ := o.Get("relationships")
				require.Len(t, rel, tc.maxR)
				first := list.([]envelope.Object)[0]
				snippet, _ := first.Get("snippet")
				meta, _ := rel.([]envelope.Object)[0].Get("metadata")
				if tc.mode == projection.Full {
					require.NotNil(t, snippet)
					require.NotNil(t, meta)
				} else {
					require.Nil(t, snippet, "preview leaves snippets out")
					require.Nil(t, meta)
				}
			}
			if ids, ok := o.Get("entity_ids"); ok {
				require.Len(t, ids, tc.maxE)
			}
		})
	}
	o := projection.Vendor(v, projection.Preview, false)
	rel, _ := o.Get("relationships")
	require.Empty(t, rel)
	o = projection.Vendor(v, projection.IDsOnly, false)
	ids, _ := o.Get("relationship_ids")
	require.Empty(t, ids)
}

func TestSelect(t *testing.T) {
	allowed := projection.SearchFields(projection.Metadata)
	got, err := projection.Select(allowed, nil, projection.Metadata)
	require.Nil(t, err)
	require.Equal(t, allowed, got)

	got, err = projection.Select(allowed, []string{"rank", "chunk_id", "rank"}, projection.Metadata)
	require.Nil(t, err)
	require.Equal(t, []string{"chunk_id", "rank"}, got, "whitelist order, duplicates collapsed")

	_, err = projection.Select(allowed, []string{"chunk_id", "chunk_text", "bogus"}, projection.Metadata)
	require.NotNil(t, err)
	require.Equal(t, apierr.InvalidFields, err.Code)
	require.Equal(t, "Fields ['chunk_text', 'bogus'] not available in 'metadata' mode", err.Message)
	e := err.Envelope()
	require.Equal(t, allowed, e.AllowedFields)
	require.Equal(t, allowed, e.Details["allowed_fields"])
}

func TestSelectBounds(t *testing.T) {
	allowed := projection.SearchFields(projection.Metadata)
	names := func(n int, prefix string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s%d", prefix, i)
		}
		return out
	}
	for _, kind := range []projection.Kind{projection.SearchResult, projection.ChunkResult} {
		require.LessOrEqual(t, 2*len(projection.AllFields(kind)), projection.MaxRequestedFields,
			"every field of a result fits the cap twice over")
	}
	cases := []struct {
		name      string
		requested []string
		code      apierr.Code
		message   string
		listed    []string
		more      any
	}{
		{name: "every field twice", requested: append(slices.Clone(allowed), allowed...)},
		{name: "over the cap", requested: names(60_000, "f"), code: apierr.InvalidParams,
			message: fmt.Sprintf("Invalid request parameters: fields must hold at most %d names (got 60000)", projection.MaxRequestedFields)},
		{name: "one over the cap", requested: names(projection.MaxRequestedFields+1, "f"), code: apierr.InvalidParams,
			message: fmt.Sprintf("Invalid request parameters: fields must hold at most %d names (got %d)", projection.MaxRequestedFields, projection.MaxRequestedFields+1)},
		{name: "many invalid: a few listed", requested: append([]string{"chunk_id"}, names(20, "x")...), code: apierr.InvalidFields,
			message: "Fields ['x0', 'x1', 'x2', 'x3', 'x4'] and 15 more not available in 'metadata' mode",
			listed:  []string{"x0", "x1", "x2", "x3", "x4"}, more: 15},
		{name: "duplicate invalid counted once", requested: []string{"x", "x", "y", "x"}, code: apierr.InvalidFields,
			message: "Fields ['x', 'y'] not available in 'metadata' mode", listed: []string{"x", "y"}},
		{name: "long name shortened", requested: []string{strings.Repeat("z", 5000)}, code: apierr.InvalidFields,
			message: "Fields ['" + strings.Repeat("z", 64) + "...'] not available in 'metadata' mode",
			listed:  []string{strings.Repeat("z", 64) + "..."}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := projection.Select(allowed, tc.requested, projection.Metadata)
			if tc.code == "" {
				require.Nil(t, err)
				require.Equal(t, allowed, got)
				return
			}
			require.NotNil(t, err)
			require.Equal(t, tc.code, err.Code)
			require.Equal(t, tc.message, err.Message)
			if tc.listed != nil {
				require.Equal(t, tc.listed, err.Details["invalid_fields"])
				require.Equal(t, tc.more, err.Details["more_invalid_fields"])
			}
		})
	}
}

func TestSnippet(t *testing.T) {
	cases := []struct {
		name, text, want string
	}{
		{"short", "A short chunk.", "A short chunk."},
		{"collapses space", "Line one.\n\n  Line   two.", "Line one. Line two."},
		{"exact", strings.Repeat("a", 200), strings.Repeat("a", 200)},
		{"one long word", strings.Repeat("x", 250), strings.Repeat("x", 200) + "..."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, projection.Snippet(tc.text, 200))
		})
	}
	words := strings.Repeat("alpha beta gamma delta ", 20)
	s := projection.Snippet(words, 200)
	body := strings.TrimSuffix(s, "...")
	require.True(t, strings.HasSuffix(s, "..."))
	require.LessOrEqual(t, utf8.RuneCountInString(body), 200)
	require.True(t, strings.HasPrefix(words, body), "the snippet is the start of the text")
	require.Contains(t, []byte{' '}, words[len(body)], "cut on a word boundary")
	cut := projection.Snippet("word "+strings.Repeat("é", 300), 200)
	require.Equal(t, "word...", cut, "a cut inside a word backs up to the previous space")
}

func TestParseMode(t *testing.T) {
	m, ok := projection.ParseMode("", projection.Metadata)
	require.True(t, ok)
	require.Equal(t, projection.Metadata, m)
	m, ok = projection.ParseMode(" FULL ", projection.Metadata)
	require.True(t, ok)
	require.Equal(t, projection.Full, m)
	_, ok = projection.ParseMode("everything", projection.Metadata)
	require.False(t, ok)
}

func TestScoreAndNulls(t *testing.T) {
	require.Equal(t, 0.875, projection.Score(0.87514))
	require.Equal(t, 0.876, projection.Score(0.8756))
	h := hit()
	h.Chunk.SourceCategory, h.Chunk.ContextHeader = "", ""
	o := projection.Hit(h, projection.SearchFields(projection.Preview))
	cat, _ := o.Get("source_category")
	hdr, _ := o.Get("context_header")
	require.Nil(t, cat)
	require.Nil(t, hdr)
	full := projection.Hit(h, projection.SearchFields(projection.Full))
	text, _ := full.Get("chunk_text")
	require.Equal(t, envelope.Text{S: h.GetChunk().GetChunkText(), Tokens: int(h.GetChunk().GetChunkTokenCount())}, text)
}

func hit() *searchv1.SearchResult {
	return &searchv1.SearchResult{
		Chunk: &searchv1.Chunk{ChunkId: 7, SourceFile: "docs/a.md", SourceCategory: "security", ContextHeader: "A > B",
			ChunkText: "Text of the chunk.", ChunkIndex: 1, TotalChunks: 3, ChunkTokenCount: 5, UpdatedAt: timestamppb.Now()},
		Rank: 1, HybridScore: 0.9, SimilarityScore: 0.8, Bm25Score: 0.7, ScoreType: searchv1.RetrievalMode_RETRIEVAL_MODE_HYBRID,
	}
}

func vendor(ne, nr int) model.Vendor {
	v := model.Vendor{VendorName: "V", LastUpdated: time.Now()}
	for i := 0; i < ne; i++ {
		e := model.Entity{EntityID: "e", Name: "n", EntityType: "PRODUCT", Confidence: 0.9, Snippet: "s"}
		v.Entities = append(v.Entities, e)
		v.EntityIDs = append(v.EntityIDs, "e")
		if i < 5 {
			v.TopEntities = append(v.TopEntities, e)
		}
	}
	for i := 0; i < nr; i++ {
		v.Relationships = append(v.Relationships, model.Relationship{RelationshipID: "r", SourceID: "e", TargetID: "e", RelationshipType: "X", Confidence: 0.5})
		v.RelationshipIDs = append(v.RelationshipIDs, "r")
	}
	return v
}
