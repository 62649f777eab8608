package tools_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/ratelimit"

	"github.com/bmcis/knowledge/mcp-adapter/internal/apierr"
	"github.com/bmcis/knowledge/mcp-adapter/internal/envelope"
	"github.com/bmcis/knowledge/mcp-adapter/internal/render"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tools"
)

// TestThrowawayTier adds a "week" tier to the one tier list and shows the
// adapter's `remaining`, its output schema and its markdown pick it up,
// with the contract's minute/hour/day keys unchanged.
func TestThrowawayTier(t *testing.T) {
	saved := ratelimit.Tiers
	ratelimit.Tiers = append(append([]ratelimit.Tier(nil), saved...), ratelimit.Tier{Name: "week", Window: 7 * 24 * time.Hour, Default: 50_000})
	t.Cleanup(func() { ratelimit.Tiers = saved })

	rem := envelope.NewRemaining([]envelope.TierCount{{Tier: "minute"}, {Tier: "hour", Value: 450}, {Tier: "day", Value: 8500}, {Tier: "week", Value: 7}})
	e := apierr.NewRateLimit(rem, 35).Envelope()
	b, err := json.Marshal(e.Remaining)
	require.NoError(t, err)
	require.Equal(t, `{"minute":0,"hour":450,"day":8500,"week":7}`, string(b), "tier order, contract keys first")

	var out map[string]any
	require.NoError(t, json.Unmarshal(tools.OutputSchema(tools.ToolSemanticSearch), &out))
	errSchema := findProperty(out, "error")
	require.NotNil(t, errSchema)
	remSchema := findProperty(errSchema, "remaining")
	require.Contains(t, remSchema["required"], "week", "the schema lists every tier")
	c := jsonschema.NewCompiler()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(mustJSON(t, remSchema)))
	require.NoError(t, err)
	require.NoError(t, c.AddResource("remaining.json", doc))
	sch, err := c.Compile("remaining.json")
	require.NoError(t, err)
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	require.NoError(t, err)
	require.NoError(t, sch.Validate(inst))

	md := render.MarkdownText(&envelope.Envelope{
		Metadata: envelope.Metadata{Operation: tools.ToolSemanticSearch, Status: envelope.StatusError},
		Error:    e,
	}, render.View{})
	require.Contains(t, md, "Remaining: 0 this minute, 450 this hour, 8500 this day, 7 this week.")
}

// findProperty returns the schema of property name of an object schema,
// looking through anyOf/oneOf branches (a nullable member).
func findProperty(s map[string]any, name string) map[string]any {
	if props, ok := s["properties"].(map[string]any); ok {
		if p, ok := props[name].(map[string]any); ok {
			if _, has := p["properties"]; has {
				return p
			}
			for _, k := range []string{"anyOf", "oneOf"} {
				if alts, ok := p[k].([]any); ok {
					for _, a := range alts {
						if m, ok := a.(map[string]any); ok && m["properties"] != nil {
							return m
						}
					}
				}
			}
			return p
		}
	}
	return nil
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}
