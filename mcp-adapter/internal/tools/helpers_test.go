package tools_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/stacktest"

	"github.com/bmcis/knowledge/mcp-adapter/internal/backend"
	"github.com/bmcis/knowledge/mcp-adapter/internal/cursor"
	"github.com/bmcis/knowledge/mcp-adapter/internal/projection"
	"github.com/bmcis/knowledge/mcp-adapter/internal/signals"
	"github.com/bmcis/knowledge/mcp-adapter/internal/testfake"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tools"
	"github.com/bmcis/knowledge/mcp-adapter/internal/warnings"
)

type harness struct {
	t       testing.TB
	env     *testfake.Env    // stand-in backends (nil against the real stack)
	stack   *stacktest.Stack // the real stack (nil with stand-ins)
	clients *backend.Clients
	srv     *server.MCPServer
	cli     *client.Client
	schemas map[string]*jsonschema.Schema
	key     string
	// index is the answer cache's index watcher (nil: none).
	index tools.IndexEpoch
}

// waitIndexCurrent waits until the answer cache's index watcher is
// current, so that the next call may use the cache.
func (h *harness) waitIndexCurrent() {
	h.t.Helper()
	require.NotNil(h.t, h.index, "no index watcher: the answer cache is off")
	require.Eventually(h.t, func() bool { _, _, ok := h.index.Epoch(); return ok }, 10*time.Second, 5*time.Millisecond,
		"the index watcher never became current")
}

type harnessOpt func(*tools.Options)

func withThresholds(th warnings.Thresholds) harnessOpt {
	return func(o *tools.Options) { o.Thresholds = th }
}

func withKey(k string) harnessOpt {
	return func(o *tools.Options) { o.Key = func(context.Context) string { return k } }
}

// newHarness drives the tools against the in-process stand-ins of the
// services (internal/testfake), for the cases a real service cannot be made
// to produce on demand.
func newHarness(t testing.TB, opts ...harnessOpt) *harness {
	return newHarnessWithClient(t, nil, opts...)
}

func newHarnessWithClient(t testing.TB, clientOpts []client.ClientOption, opts ...harnessOpt) *harness {
	t.Helper()
	env := testfake.Start(t)
	o := tools.Options{
		Clients:             env.Clients,
		Key:                 func(context.Context) string { return testfake.KeyGood },
		KeyHint:             "Set BMCIS_API_KEY.",
		Thresholds:          warnings.Thresholds{MaxTokens: 15000, WarnRatio: 0.8, LowQuality: 0.5, CacheMissSlow: time.Minute},
		DefaultResponseMode: projection.Metadata,
		Desktop:             true,
		Signals: signals.Config{
			CategoryWeights:   map[string]float64{"security": 0.9, "authentication": 0.9},
			DefaultWeight:     0.7,
			HalfLife:          180 * 24 * time.Hour,
			IncludeConfidence: true,
			Now:               func() time.Time { return testfake.Epoch },
		},
	}
	h := startHarness(t, o, clientOpts, opts...)
	h.env = env
	h.clients = env.Clients
	return h
}

// realClients are the gRPC clients the harness's tools use.
func (h *harness) realClients() *backend.Clients { return h.clients }

// startHarness builds the MCP server from o (plus opts) and connects an
// in-process mcp-go client to it.
func startHarness(t testing.TB, o tools.Options, clientOpts []client.ClientOption, opts ...harnessOpt) *harness {
	t.Helper()
	codec, err := cursor.New([]byte("test-cursor-secret-0123456789"))
	require.NoError(t, err)
	o.Cursors = codec
	o.ValidateOutput = true
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, f := range opts {
		f(&o)
	}
	srv := tools.New(o)
	var cli *client.Client
	if clientOpts != nil {
		cli, err = client.NewInProcessClientWithOptions(srv, clientOpts...)
	} else {
		cli, err = client.NewInProcessClient(srv)
	}
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, cli.Start(ctx))
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "test", Version: "1"}
	_, err = cli.Initialize(ctx, init)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })

	h := &harness{t: t, srv: srv, cli: cli, schemas: map[string]*jsonschema.Schema{}}
	for _, name := range []string{tools.ToolSemanticSearch, tools.ToolFindVendorInfo, tools.ToolGetChunks} {
		h.schemas[name] = compileSchema(t, tools.OutputSchema(name))
	}
	return h
}

func compileSchema(t testing.TB, raw []byte) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource("output.json", doc))
	s, err := c.Compile("output.json")
	require.NoError(t, err)
	return s
}

// answer is a decoded tool answer.
type answer struct {
	res    *mcp.CallToolResult
	env    map[string]any // from structuredContent
	blocks []string
	// links are the resource_link blocks, which follow the text blocks.
	links []mcp.ResourceLink
}

func (h *harness) call(tool string, args map[string]any) answer {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	res, err := h.cli.CallTool(ctx, req)
	require.NoError(h.t, err)
	return h.decode(tool, res)
}

func (h *harness) decode(tool string, res *mcp.CallToolResult) answer {
	h.t.Helper()
	a := answer{res: res}
	if res.StructuredContent == nil {
		h.t.Logf("no structured content: %+v", res)
	}
	for _, c := range res.Content {
		if l, ok := c.(mcp.ResourceLink); ok {
			a.links = append(a.links, l)
			continue
		}
		require.Empty(h.t, a.links, "resource links come after the text")
		tc, ok := c.(mcp.TextContent)
		require.True(h.t, ok, "content must be text or resource links")
		a.blocks = append(a.blocks, tc.Text)
	}
	raw, err := json.Marshal(res.StructuredContent)
	require.NoError(h.t, err)
	if rm, ok := res.StructuredContent.(json.RawMessage); ok {
		raw = rm
	}
	require.NoError(h.t, json.Unmarshal(raw, &a.env), "structuredContent must be a JSON object")
	// Every answer validates against the tool's output schema.
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	require.NoError(h.t, err)
	require.NoError(h.t, h.schemas[tool].Validate(doc), "answer must validate: %s", truncate(string(raw)))
	recordSeen(tool, a.env)
	status := a.env["_metadata"].(map[string]any)["status"]
	require.Equal(h.t, status == "error", res.IsError, "isError must match status error")
	return a
}

func truncate(s string) string {
	if len(s) > 2000 {
		return s[:2000] + "..."
	}
	return s
}

func (a answer) status() string { return a.env["_metadata"].(map[string]any)["status"].(string) }

func (a answer) results() []map[string]any {
	list := a.env["results"].([]any)
	out := make([]map[string]any, len(list))
	for i, r := range list {
		out[i] = r.(map[string]any)
	}
	return out
}

func (a answer) errCode() string {
	e, ok := a.env["error"].(map[string]any)
	if !ok {
		return ""
	}
	return e["code"].(string)
}

func (a answer) errObj() map[string]any { return a.env["error"].(map[string]any) }

func (a answer) pagination() map[string]any {
	p, _ := a.env["pagination"].(map[string]any)
	return p
}

func (a answer) execution() map[string]any { return a.env["execution_context"].(map[string]any) }

func (a answer) warningCodes() []string {
	var out []string
	for _, w := range a.env["warnings"].([]any) {
		out = append(out, w.(map[string]any)["code"].(string))
	}
	return out
}

func (a answer) jsonBlock() map[string]any {
	last := a.blocks[len(a.blocks)-1]
	var m map[string]any
	if err := json.Unmarshal([]byte(last), &m); err != nil {
		return nil
	}
	return m
}

// present is want without the fields a result leaves out when empty
// (projection's OmitEmpty) and r does not have; one it has must not be empty.
func present(t *testing.T, want []string, r map[string]any) []string {
	t.Helper()
	out := make([]string, 0, len(want))
	for _, name := range want {
		f, _ := projection.Lookup(name)
		v, ok := r[name]
		if f.OmitEmpty {
			if !ok {
				continue
			}
			require.NotEmpty(t, v, "%s is left out when empty, not sent empty", name)
		}
		out = append(out, name)
	}
	return out
}

func keysOf(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func hasPrefixAny(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
