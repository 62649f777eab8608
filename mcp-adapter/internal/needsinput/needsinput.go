// Package needsinput builds the needsInput:v1 payloads that ask the caller
// for a missing or ambiguous parameter, and asks the user directly through
// MCP elicitation when the client declared that capability.
package needsinput

import (
	"context"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/bmcis/knowledge/mcp-adapter/internal/envelope"
	"github.com/bmcis/knowledge/platform/limits"
)

// maxOptions bounds the options offered.
const maxOptions = 10

func payload(msg, field, reason string, values []string, describe func(string) string) *envelope.NeedsInput {
	values = dedupe(values)
	if len(values) > maxOptions {
		values = values[:maxOptions]
	}
	ni := &envelope.NeedsInput{
		Kind:    envelope.NeedsInputKind,
		Type:    "elicitation",
		Message: msg,
		NeedsInput: envelope.NeedsInputAsk{
			Fields:      []string{field},
			Reason:      reason,
			Suggestions: map[string][]string{field: values},
		},
		Options: make([]envelope.Option, 0, len(values)),
	}
	for _, v := range values {
		ni.Options = append(ni.Options, envelope.Option{Label: v, Value: v, Description: describe(v), Field: field})
	}
	return ni
}

// EmptyQuery asks for a search query; topics (the indexed categories, say)
// become suggestions.
func EmptyQuery(topics []string) *envelope.NeedsInput {
	return payload("What would you like to search for? Please provide a search query.",
		"query", "A search query is required to find relevant documents.", topics,
		func(v string) string { return "Search the " + v + " documents" })
}

// AmbiguousVendor asks which of several matching vendors was meant.
func AmbiguousVendor(name string, candidates []string) *envelope.NeedsInput {
	return payload("Several vendors match '"+name+"'. Which one do you mean?",
		"vendor_name", "The vendor name is ambiguous.", candidates,
		func(v string) string { return "Vendor: " + v })
}

// VendorNotFound asks for a vendor name, offering close matches.
func VendorNotFound(name string, suggestions []string) *envelope.NeedsInput {
	msg := "No vendor is named '" + name + "'."
	if len(suggestions) > 0 {
		msg += " Did you mean one of these?"
	} else {
		msg += " Please provide the exact vendor name."
	}
	return payload(msg, "vendor_name", "Vendor '"+name+"' was not found.", suggestions,
		func(v string) string { return "Vendor: " + v })
}

// Topic turns a category name into a readable search suggestion.
func Topic(category string) string {
	return strings.Join(strings.FieldsFunc(category, func(r rune) bool { return r == '-' || r == '_' || r == '/' }), " ")
}

func dedupe(values []string) []string {
	out := make([]string, 0, len(values))
	seen := map[string]bool{}
	for _, v := range values {
		v = strings.TrimSpace(v)
		if v == "" || seen[strings.ToLower(v)] {
			continue
		}
		seen[strings.ToLower(v)] = true
		out = append(out, v)
	}
	return out
}

// Offered returns the option of ni that value names (ignoring case and
// surrounding space), spelled as offered; when ni offered no option, any
// value. A form answer keeps to the enum it was given, but a client may
// make up the answer it sends with a retry, so callers check it.
func Offered(ni *envelope.NeedsInput, value string) (string, bool) {
	value = strings.TrimSpace(value)
	if len(ni.Options) == 0 {
		return value, true
	}
	for _, o := range ni.Options {
		if strings.EqualFold(o.Value, value) {
			return o.Value, true
		}
	}
	return "", false
}

// Outcome is the result of Ask.
type Outcome int

// Outcomes.
const (
	// Unsupported: the client cannot be asked; answer with the payload.
	Unsupported Outcome = iota
	// Answered: the user supplied a value.
	Answered
	// Declined: the user declined or cancelled; answer with the payload.
	Declined
	// Pending: return the input-required result; the client retries with
	// the answer.
	Pending
)

// Timeout bounds how long a server-initiated question may wait for the user.
var Timeout = 5 * time.Minute

func requestID(field string) string { return "bmcis_" + field }

// Params returns the form elicitation asking for the payload's field.
func Params(ni *envelope.NeedsInput) mcp.ElicitationParams {
	field := ni.NeedsInput.Fields[0]
	prop := map[string]any{"type": "string", "title": title(field), "description": ni.NeedsInput.Reason}
	if vals := ni.NeedsInput.Suggestions[field]; len(vals) > 0 && field != "query" {
		prop["enum"] = vals
	}
	if field == "query" {
		prop["minLength"] = limits.SearchQuery.Min
		prop["maxLength"] = limits.SearchQuery.Max
		if topics := ni.NeedsInput.Suggestions[field]; len(topics) > 0 {
			prop["description"] = ni.NeedsInput.Reason + " Indexed topics include: " + strings.Join(topics, ", ") + "."
		}
	}
	return mcp.ElicitationParams{
		Mode:    mcp.ElicitationModeForm,
		Message: ni.Message,
		RequestedSchema: map[string]any{
			"type":       "object",
			"properties": map[string]any{field: prop},
			"required":   []string{field},
		},
	}
}

func title(field string) string {
	switch field {
	case "query":
		return "Search query"
	case "vendor_name":
		return "Vendor name"
	}
	return field
}

// Ask obtains the payload's field from the user when the client can be
// asked. A retried modern request carries the answer in its input
// responses; a modern request without one gets an input-required result
// back (pending); an older client that declared elicitation is asked now.
func Ask(ctx context.Context, req mcp.CallToolRequest, ni *envelope.NeedsInput) (string, Outcome, *mcp.CallToolResult) {
	field := ni.NeedsInput.Fields[0]
	id := requestID(field)
	if res := server.ElicitationResponse(req.Params.InputResponses, id); res != nil {
		return answer(res, field)
	}
	if !supportsElicitation(ctx) {
		return "", Unsupported, nil
	}
	params := Params(ni)
	if server.IsModernRequest(ctx) {
		return "", Pending, server.NewInputRequestBuilder("").Elicit(id, params).ToolResult()
	}
	srv := server.ServerFromContext(ctx)
	if srv == nil {
		return "", Unsupported, nil
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	res, err := srv.RequestElicitation(ctx, mcp.ElicitationRequest{
		Request: mcp.Request{Method: string(mcp.MethodElicitationCreate)},
		Params:  params,
	})
	if err != nil || res == nil {
		return "", Unsupported, nil
	}
	return answer(res, field)
}

func answer(res *mcp.ElicitationResult, field string) (string, Outcome, *mcp.CallToolResult) {
	if res.Action != mcp.ElicitationResponseActionAccept {
		return "", Declined, nil
	}
	content, _ := res.Content.(map[string]any)
	v, _ := content[field].(string)
	if v = strings.TrimSpace(v); v == "" {
		return "", Declined, nil
	}
	return v, Answered, nil
}

// supportsElicitation reports whether the client declared the elicitation
// capability: per request from protocol 2026-07-28 on, at initialization
// before.
func supportsElicitation(ctx context.Context) bool {
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.Modern {
		return info.ClientCapabilities != nil && info.ClientCapabilities.Elicitation != nil
	}
	session := server.ClientSessionFromContext(ctx)
	withInfo, ok := session.(server.SessionWithClientInfo)
	if !ok {
		return false
	}
	if _, ok := session.(server.SessionWithElicitation); !ok {
		return false
	}
	return withInfo.GetClientCapabilities().Elicitation != nil
}
