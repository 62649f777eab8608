// Package schematest validates the gateway's dashboard responses against the
// JSON Schemas written from the dashboard API reference. Only tests import it.
package schematest

import (
	"bytes"
	_ "embed"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

//go:embed dashboard.schema.json
var schemaJSON []byte

const schemaURL = "https://bmcis.invalid/schemas/dashboard.schema.json"

// Definitions a response can be validated against.
const (
	Health  = "health"
	Servers = "serversResponse"
	Tools   = "toolsResponse"
	Config  = "configResponse"
	Stats   = "statsResponse"
	Error   = "error"
)

var (
	once     sync.Once
	compiler *jsonschema.Compiler
	initErr  error
	mu       sync.Mutex
	cache    = map[string]*jsonschema.Schema{}
)

func schema(def string) (*jsonschema.Schema, error) {
	once.Do(func() {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
		if err != nil {
			initErr = err
			return
		}
		compiler = jsonschema.NewCompiler()
		initErr = compiler.AddResource(schemaURL, doc)
	})
	if initErr != nil {
		return nil, initErr
	}
	mu.Lock()
	defer mu.Unlock()
	if s, ok := cache[def]; ok {
		return s, nil
	}
	s, err := compiler.Compile(schemaURL + "#/$defs/" + def)
	if err != nil {
		return nil, err
	}
	cache[def] = s
	return s, nil
}

// Validate fails the test unless body is valid JSON matching definition def.
func Validate(t testing.TB, def string, body []byte) {
	t.Helper()
	s, err := schema(def)
	if err != nil {
		t.Fatalf("compile schema %s: %v", def, err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("%s: body is not JSON: %v\n%s", def, err, body)
	}
	if err := s.Validate(v); err != nil {
		t.Fatalf("%s: body does not match the schema: %v\n%s", def, err, body)
	}
}
