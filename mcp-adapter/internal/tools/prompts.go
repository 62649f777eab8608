package tools

import (
	"context"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Prompt names: the product's workflows, offered to the user (slash
// commands in Claude) as ready-made instructions for the model.
const (
	PromptResearchVendor = "research_vendor"
	PromptFindAndCite    = "find_and_cite"
)

// workflow is one prompt: its title and description, its one required
// argument and the handler that writes the instructions.
type workflow struct {
	name, title, description string
	arg, argTitle, argHelp   string
	handler                  server.PromptHandlerFunc
}

var workflows = []workflow{
	{PromptResearchVendor, "Research a vendor", "What the knowledge base and the vendor graph say about one vendor, with sources.",
		"vendor_name", "Vendor", "The vendor's name or alias (completes from the vendor graph).", researchVendor},
	{PromptFindAndCite, "Find and cite", "Answer a question from the knowledge base, citing the chunks used.",
		"question", "Question", "What to find out.", findAndCite},
}

// Prompts are the workflow prompts. They need no backend: the model then
// makes the calls, each checked as usual, so the bridge serves them too.
func Prompts() []server.ServerPrompt {
	out := make([]server.ServerPrompt, len(workflows))
	for i, w := range workflows {
		out[i] = server.ServerPrompt{
			Prompt: mcp.NewPrompt(w.name,
				mcp.WithPromptTitle(w.title),
				mcp.WithPromptDescription(w.description),
				mcp.WithPromptIcons(Icon()),
				mcp.WithArgument(w.arg, mcp.RequiredArgument(), mcp.ArgumentTitle(w.argTitle), mcp.ArgumentDescription(w.argHelp)),
			),
			Handler: w.handler,
		}
	}
	return out
}

// promptArg is a required prompt argument, trimmed.
func promptArg(req mcp.GetPromptRequest, name string) (string, error) {
	v := strings.TrimSpace(req.Params.Arguments[name])
	if v == "" {
		return "", fmt.Errorf("the %s argument is required", name)
	}
	return v, nil
}

func userPrompt(description, text string) *mcp.GetPromptResult {
	return mcp.NewGetPromptResult(description, []mcp.PromptMessage{
		mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent(text)),
	})
}

func researchVendor(_ context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	name, err := promptArg(req, "vendor_name")
	if err != nil {
		return nil, err
	}
	return userPrompt("Research "+name, fmt.Sprintf(
		"Research the vendor %q with the BMCIS knowledge tools.\n"+
			"1. Call %s with vendor_name %q (metadata mode) for its entities and relationships; if the name is ambiguous, pick from the candidates or ask me.\n"+
			"2. Call %s for the vendor's name in ids_only mode, then %s with the ids of the 3 most relevant results.\n"+
			"3. Summarise what we use the vendor for, its risks and open issues. Cite every statement with its source file and kb://chunks/{chunk_id}; say what the knowledge base does not cover.",
		name, ToolFindVendorInfo, name, ToolSemanticSearch, ToolGetChunks)), nil
}

func findAndCite(_ context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	q, err := promptArg(req, "question")
	if err != nil {
		return nil, err
	}
	return userPrompt("Find and cite: "+q, fmt.Sprintf(
		"Answer from the BMCIS knowledge base: %s\n"+
			"1. Call %s with the question (metadata mode); page with the cursor only if the first page does not answer it.\n"+
			"2. Call %s with the ids of the few results that answer it (at most 3 unless needed).\n"+
			"3. Answer briefly. After each claim cite [source_file, kb://chunks/{chunk_id}]. If the chunks do not answer the question, say so instead of guessing.",
		q, ToolSemanticSearch, ToolGetChunks)), nil
}
