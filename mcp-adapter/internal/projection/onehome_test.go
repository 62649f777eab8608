package projection_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/mcp-adapter/internal/cursor"
	"github.com/bmcis/knowledge/mcp-adapter/internal/envelope"
	"github.com/bmcis/knowledge/mcp-adapter/internal/jschema"
	"github.com/bmcis/knowledge/mcp-adapter/internal/projection"
	"github.com/bmcis/knowledge/mcp-adapter/internal/testfake"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tools"
	"github.com/bmcis/knowledge/mcp-adapter/internal/warnings"
)

// The mode table and the field registry are the one home of response modes
// and result fields: a throwaway mode with a field of its own, added there
// and nowhere else, shows up in the tool descriptions, the response_mode
// and fields enums, the output schemas, the answers (which the server
// validates against those schemas), the error texts and the markdown.
func TestThrowawayModeIsPickedUpEverywhere(t *testing.T) {
	projection.AddForTest(t, projection.Spec{
		Name: "scores",
		Fields: map[projection.Kind][]string{
			projection.SearchResult: {"chunk_id", "rank", "hybrid_score", "chunk_chars"},
			projection.ChunkResult:  {"chunk_id", "chunk_chars"},
			projection.VendorResult: {"vendor_name", "entity_ids"},
		},
		Summary: map[projection.Kind]string{projection.SearchResult: "scores and text length"},
		Caps:    projection.Caps{Entities: 3, Relationships: 0},
	}, projection.Field{
		Name:   "chunk_chars",
		Schema: jschema.Int(0),
		Reads:  []string{"chunk.chunk_text"},
		Value:  func(s *projection.Source) any { return utf8.RuneCountInString(s.Hit.GetChunk().GetChunkText()) },
		Markdown: []projection.Markdown{{Place: projection.Fact, Text: func(_ envelope.Object, v any) string {
			return fmt.Sprintf("%d chars", v)
		}}},
	})

	env := testfake.Start(t)
	codec, err := cursor.New([]byte("test-cursor-secret-0123456789"))
	require.NoError(t, err)
	srv := tools.New(tools.Options{
		Clients: env.Clients, Key: func(context.Context) string { return testfake.KeyGood }, Desktop: true,
		Cursors: codec, Thresholds: warnings.Thresholds{MaxTokens: 15000, WarnRatio: 0.8},
		ValidateOutput: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})

	t.Run("descriptions and enums", func(t *testing.T) {
		for _, name := range []string{tools.ToolSemanticSearch, tools.ToolGetChunks, tools.ToolFindVendorInfo} {
			tool := toMap(t, srv.GetTool(name).Tool)
			props := tool["inputSchema"].(map[string]any)["properties"].(map[string]any)
			mode := props["response_mode"].(map[string]any)
			require.Contains(t, mode["enum"], "scores", name)
			require.Contains(t, tool["description"], "scores", name)
			if fields, ok := props["fields"].(map[string]any); ok {
				require.Contains(t, fields["items"].(map[string]any)["enum"], "chunk_chars", name)
				// The cap Select enforces is the one the schema declares.
				require.Equal(t, float64(projection.MaxRequestedFields), fields["maxItems"], name)
			}
		}
		search := toMap(t, srv.GetTool(tools.ToolSemanticSearch).Tool)
		require.Contains(t, search["description"], "or scores (scores and text length)")
	})

	t.Run("output schemas", func(t *testing.T) {
		for _, name := range []string{tools.ToolSemanticSearch, tools.ToolGetChunks} {
			var s map[string]any
			require.NoError(t, json.Unmarshal(tools.OutputSchema(name), &s))
			item := s["properties"].(map[string]any)["results"].(map[string]any)["items"].(map[string]any)
			require.Equal(t, map[string]any{"type": "integer", "minimum": float64(0)}, item["properties"].(map[string]any)["chunk_chars"], name)
		}
	})

	cli, err := client.NewInProcessClient(srv)
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, cli.Start(ctx))
	t.Cleanup(func() { _ = cli.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "test", Version: "1"}
	_, err = cli.Initialize(ctx, init)
	require.NoError(t, err)
	call := func(tool string, args map[string]any) (map[string]any, []string) {
		t.Helper()
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = tool, args
		res, err := cli.CallTool(ctx, req)
		require.NoError(t, err)
		raw, err := json.Marshal(res.StructuredContent)
		require.NoError(t, err)
		// The server validated the answer; check it here too.
		validate(t, tools.OutputSchema(tool), raw)
		var out map[string]any
		require.NoError(t, json.Unmarshal(raw, &out))
		var blocks []string
		for _, c := range res.Content {
			if tc, ok := c.(mcp.TextContent); ok { // resource links follow
				blocks = append(blocks, tc.Text)
			}
		}
		return out, blocks
	}

	t.Run("answers and markdown", func(t *testing.T) {
		out, blocks := call(tools.ToolSemanticSearch, map[string]any{"query": "password reset", "response_mode": "scores", "format": "both"})
		results := out["results"].([]any)
		require.NotEmpty(t, results)
		first := results[0].(map[string]any)
		require.ElementsMatch(t, []string{"chunk_id", "rank", "hybrid_score", "chunk_chars"}, keys(first))
		require.Positive(t, first["chunk_chars"])
		require.Contains(t, blocks[0], "scores mode")
		require.Contains(t, blocks[0], fmt.Sprintf("%v chars", first["chunk_chars"]))

		out, blocks = call(tools.ToolGetChunks, map[string]any{"chunk_ids": []any{first["chunk_id"]}, "response_mode": "scores", "format": "markdown"})
		require.ElementsMatch(t, []string{"chunk_id", "chunk_chars"}, keys(out["results"].([]any)[0].(map[string]any)))
		require.Contains(t, blocks[0], "chars")

		out, blocks = call(tools.ToolFindVendorInfo, map[string]any{"vendor_name": testfake.VendorBig, "response_mode": "scores", "format": "both"})
		vendor := out["results"].([]any)[0].(map[string]any)
		require.ElementsMatch(t, []string{"vendor_name", "entity_ids"}, keys(vendor))
		require.Len(t, vendor["entity_ids"], 3, "the mode's caps")
		require.Contains(t, blocks[0], "entity_ids (3)")
	})

	t.Run("error texts", func(t *testing.T) {
		out, _ := call(tools.ToolSemanticSearch, map[string]any{"query": "password", "response_mode": "scores", "fields": []any{"chunk_snippet"}})
		e := out["error"].(map[string]any)
		require.Equal(t, "INVALID_FIELDS", e["code"])
		require.Contains(t, e["message"], "'scores' mode")
		require.Equal(t, []any{"chunk_id", "rank", "hybrid_score", "chunk_chars"}, e["allowed_fields"])

		out, _ = call(tools.ToolSemanticSearch, map[string]any{"query": "password", "response_mode": "bogus"})
		require.Contains(t, out["error"].(map[string]any)["message"], "ids_only, metadata, preview, full, scores")
	})
}

func toMap(t *testing.T, v any) map[string]any {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	return m
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func validate(t *testing.T, schema, doc []byte) {
	t.Helper()
	s, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource("s.json", s))
	compiled, err := c.Compile("s.json")
	require.NoError(t, err)
	d, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	require.NoError(t, err)
	require.NoError(t, compiled.Validate(d), "answer must validate: %s", doc)
}
