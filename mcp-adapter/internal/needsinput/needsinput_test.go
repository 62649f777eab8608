package needsinput_test

import (
	"context"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/mcp-adapter/internal/envelope"
	"github.com/bmcis/knowledge/mcp-adapter/internal/needsinput"
)

func TestPayloads(t *testing.T) {
	ni := needsinput.AmbiguousVendor("acme", []string{"Acme Corp", "ACME Inc", "acme corp", " "})
	require.Equal(t, envelope.NeedsInputKind, ni.Kind)
	require.Equal(t, "elicitation", ni.Type)
	require.Equal(t, []string{"vendor_name"}, ni.NeedsInput.Fields)
	require.Equal(t, []string{"Acme Corp", "ACME Inc"}, ni.NeedsInput.Suggestions["vendor_name"], "blank and case duplicates dropped")
	require.Len(t, ni.Options, 2)
	require.Equal(t, envelope.Option{Label: "Acme Corp", Value: "Acme Corp", Description: "Vendor: Acme Corp", Field: "vendor_name"}, ni.Options[0])

	ni = needsinput.VendorNotFound("Xyz", nil)
	require.Empty(t, ni.Options)
	require.NotNil(t, ni.Options)
	require.Contains(t, ni.Message, "exact vendor name")

	ni = needsinput.EmptyQuery([]string{needsinput.Topic("cloud-providers"), needsinput.Topic("data_platforms")})
	require.Equal(t, []string{"cloud providers", "data platforms"}, ni.NeedsInput.Suggestions["query"])
	require.Equal(t, []string{"query"}, ni.NeedsInput.Fields)
}

func TestParams(t *testing.T) {
	p := needsinput.Params(needsinput.AmbiguousVendor("a", []string{"A1", "A2"}))
	require.NoError(t, p.Validate())
	prop := p.RequestedSchema.(map[string]any)["properties"].(map[string]any)["vendor_name"].(map[string]any)
	require.Equal(t, []string{"A1", "A2"}, prop["enum"])
	p = needsinput.Params(needsinput.EmptyQuery([]string{"x"}))
	prop = p.RequestedSchema.(map[string]any)["properties"].(map[string]any)["query"].(map[string]any)
	require.Nil(t, prop["enum"], "a query is free text; topics are only suggestions")
	require.Equal(t, 500, prop["maxLength"])
}

func TestAskWithoutCapability(t *testing.T) {
	v, outcome, res := needsinput.Ask(context.Background(), mcp.CallToolRequest{}, needsinput.EmptyQuery(nil))
	require.Equal(t, needsinput.Unsupported, outcome)
	require.Empty(t, v)
	require.Nil(t, res)
}

func TestOffered(t *testing.T) {
	ambiguous := needsinput.AmbiguousVendor("acme", []string{"Acme Corp", "ACME Inc"})
	free := needsinput.VendorNotFound("Xyz", nil)
	for _, tc := range []struct {
		name   string
		ni     *envelope.NeedsInput
		answer string
		want   string
		ok     bool
	}{
		{"offered", ambiguous, "Acme Corp", "Acme Corp", true},
		{"offered in other case and spacing", ambiguous, "  acme inc ", "ACME Inc", true},
		{"not offered", ambiguous, "Megacorp", "", false},
		{"prefix of an offered name", ambiguous, "Acme", "", false},
		{"nothing offered: free text", free, " Xyz Ltd ", "Xyz Ltd", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := needsinput.Offered(tc.ni, tc.answer)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.want, got)
		})
	}
}
