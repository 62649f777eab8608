package tools_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/stacktest"

	"github.com/bmcis/knowledge/mcp-adapter/internal/apierr"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tools"
)

// seen records, across the package's tests, what kinds of answers were
// produced and validated against the output schemas.
var seen = struct {
	sync.Mutex
	codes    map[string]bool
	statuses map[string]bool
	needs    bool
}{codes: map[string]bool{}, statuses: map[string]bool{}}

func recordSeen(tool string, env map[string]any) {
	seen.Lock()
	defer seen.Unlock()
	seen.statuses[tool+"/"+env["_metadata"].(map[string]any)["status"].(string)] = true
	if e, ok := env["error"].(map[string]any); ok {
		seen.codes[e["code"].(string)] = true
	}
	if _, ok := env["needs_input"]; ok {
		seen.needs = true
	}
}

// TestMain checks, after a full run, that every error code, the
// needsInput answers and every status of every tool went through the
// schema validation in decode.
func TestMain(m *testing.M) {
	code := stacktest.MainCode(m)
	if f := flag.Lookup("test.run"); code == 0 && f != nil && f.Value.String() == "" {
		var missing []string
		for _, c := range apierr.AllCodes {
			if !seen.codes[string(c)] {
				missing = append(missing, string(c))
			}
		}
		for _, tool := range []string{tools.ToolSemanticSearch, tools.ToolFindVendorInfo, tools.ToolGetChunks} {
			for _, st := range []string{"success", "partial", "error"} {
				if !seen.statuses[tool+"/"+st] {
					missing = append(missing, tool+"/"+st)
				}
			}
		}
		if !seen.needs {
			missing = append(missing, "needs_input")
		}
		if len(missing) > 0 {
			sort.Strings(missing)
			fmt.Fprintf(os.Stderr, "answers never produced and schema-checked: %v\n", missing)
			code = 1
		}
	}
	os.Exit(code)
}

// The output schemas use only keywords that read the same in draft-07
// (what many MCP clients' validators default to) and 2020-12.
func TestOutputSchemasCompileInDraft7And2020(t *testing.T) {
	for _, name := range []string{tools.ToolSemanticSearch, tools.ToolFindVendorInfo, tools.ToolGetChunks} {
		for _, draft := range []*jsonschema.Draft{jsonschema.Draft7, jsonschema.Draft2020} {
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(tools.OutputSchema(name)))
			require.NoError(t, err)
			c := jsonschema.NewCompiler()
			c.DefaultDraft(draft)
			c.AssertFormat()
			require.NoError(t, c.AddResource("s.json", doc))
			_, err = c.Compile("s.json")
			require.NoError(t, err, "%s in %v", name, draft)
			require.NotContains(t, string(tools.OutputSchema(name)), `"$ref"`)
			require.NotContains(t, string(tools.OutputSchema(name)), `"format"`)
		}
	}
}
