package tools

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bmcis/knowledge/mcp-adapter/internal/apierr"
	"github.com/bmcis/knowledge/mcp-adapter/internal/backend"
	"github.com/bmcis/knowledge/mcp-adapter/internal/cursor"
	"github.com/bmcis/knowledge/mcp-adapter/internal/envelope"
	"github.com/bmcis/knowledge/mcp-adapter/internal/model"
	"github.com/bmcis/knowledge/mcp-adapter/internal/needsinput"
	"github.com/bmcis/knowledge/mcp-adapter/internal/projection"
	"github.com/bmcis/knowledge/mcp-adapter/internal/render"
	"github.com/bmcis/knowledge/mcp-adapter/internal/respond"
	"github.com/bmcis/knowledge/mcp-adapter/internal/warnings"
	"github.com/bmcis/knowledge/platform/limits"
)

type vendorParams struct {
	name          string
	mode          projection.Mode
	relationships bool
	format        render.Format
}

func (s *Server) parseVendor(raw any) (vendorParams, *apierr.Error) {
	a := newArgs(raw, "vendor_name", "response_mode", "include_relationships", "format")
	p := vendorParams{}
	p.format = s.parseFormat(a)
	p.name = strings.TrimSpace(a.str("vendor_name"))
	p.mode, _ = s.parseMode(a, s.opts.DefaultResponseMode)
	p.relationships = a.boolean("include_relationships", true)
	if a.err != nil {
		return p, a.err
	}
	return p, checkVendorName(p.name)
}

// vendorNameRule says how long vendor_name may be.
func vendorNameRule() string {
	return fmt.Sprintf("must be %d-%d characters", limits.VendorName.Min, limits.VendorName.Max)
}

// checkVendorName validates a vendor name, however it came: vendor_name or
// an elicitation answer.
func checkVendorName(name string) *apierr.Error {
	if n := utf8.RuneCountInString(name); !limits.VendorName.Allows(n) {
		return apierr.NewInvalidParams("vendor_name", vendorNameRule(),
			"Give the vendor's name; use semantic_search to find exact vendor names.")
	}
	return nil
}

// checkAnsweredVendor validates the vendor name answering ni and returns it
// as offered. On the stateless transport the client sends the answer with
// its retry, so it may hold anything: only one of the offered candidates
// is taken (free text only when none was offered).
func checkAnsweredVendor(ni *envelope.NeedsInput, value string) (string, *apierr.Error) {
	if e := checkVendorName(value); e != nil {
		return "", e
	}
	choice, ok := needsinput.Offered(ni, value)
	if !ok {
		return "", apierr.NewInvalidParams("vendor_name",
			"answer must be one of the offered candidates: "+strings.Join(ni.NeedsInput.Suggestions["vendor_name"], ", "),
			"Answer with one of the offered names, or call find_vendor_info again with another vendor_name.")
	}
	return choice, nil
}

func (s *Server) findVendorInfo(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	p, perr := s.parseVendor(req.GetArguments())
	ctx, call := s.newCall(ctx, ToolFindVendorInfo, p.format)
	noteOf(ctx).query = p.name
	res := s.vendor(ctx, req, call, p, perr, true)
	s.logDone(ctx, call, res)
	return res, nil
}

func (s *Server) vendor(ctx context.Context, req mcp.CallToolRequest, call *respond.Call, p vendorParams, perr *apierr.Error, mayAsk bool) *mcp.CallToolResult {
	call.View.Mode = string(p.mode)
	fetch := func(ctx context.Context, name string) (model.Vendor, error) {
		if perr != nil {
			return model.Vendor{}, nil
		}
		maxE, maxR := projection.VendorCaps(p.mode)
		return s.clients.GetVendor(ctx, backend.VendorRequest{
			Name: name, MaxEntities: maxE, MaxRelationships: maxR, IncludeRelationships: p.relationships,
			MaxEvidence: projection.Of(p.mode).Caps.Evidence,
		})
	}
	v, info, aerr, berr := guarded(ctx, s, call.Operation, func(ctx context.Context) (model.Vendor, error) {
		return fetch(ctx, p.name)
	})
	call.BackendDone = s.opts.Now()
	if aerr != nil {
		return s.resp.Failure(call, aerr)
	}
	if perr != nil {
		return s.resp.Failure(call, perr)
	}
	// Every later read is made for this key: inside its category scope.
	ctx = info.scoped(ctx)

	var resolved []envelope.Warning
	if berr != nil {
		var names []string
		var offer func(names []string) respond.Offer
		if nf, ok := backend.IsNotFound(berr); ok {
			names = nf.Suggestions
			if len(names) == 0 {
				names, _ = s.clients.SuggestVendors(ctx, p.name, 5)
			}
			names, offer = s.addMentionedVendors(ctx, p.name, names), notFoundOffer(p.name)
		} else if amb, ok := backend.IsAmbiguous(berr); ok {
			names, offer = amb.Candidates, ambiguousOffer(p.name)
		} else {
			return s.resp.Failure(call, apierr.FromBackend(apierr.VendorGraph, berr))
		}
		e, ni, extra := s.resp.FitOffer(call, len(names), offer(names))
		if !mayAsk {
			return s.resp.FailureWith(call, e, ni, extra...)
		}
		value, outcome, pending := needsinput.Ask(ctx, req, ni)
		switch outcome {
		case needsinput.Pending:
			return pending
		case needsinput.Answered:
			if value, e = checkAnsweredVendor(ni, value); e != nil {
				return s.resp.Failure(call, e)
			}
			p.name = value
			resolved = append(resolved, warnings.NewResolvedByElicitation("vendor_name", value))
			v, berr = fetch(ctx, value)
			call.BackendDone = s.opts.Now()
			if berr != nil {
				// Asked once already: answer with what the second name got.
				return s.vendorFailure(call, value, berr, resolved)
			}
		default:
			return s.resp.FailureWith(call, e, ni, extra...)
		}
	}

	for _, e := range v.Evidence {
		noteDocument(ctx, e.ChunkID, e.DocumentID)
	}
	call.CacheHit = v.CacheHit
	call.CacheKey = fmt.Sprintf("vendor:%s:%s:%t", p.mode, cursor.Normalize(p.name), p.relationships)
	call.View.Title = "Vendor: " + v.VendorName

	env := call.NewEnvelope()
	base := resolved
	base = append(base, info.warnings()...)
	content := newVendorContent(s, v, p, base)
	return s.resp.Success(call, env, content)
}

// maxMentionedSuggestions bounds the vendors added to a not-found answer's
// suggestions from the documents.
const maxMentionedSuggestions = 3

// mentionsOnly is the read mask of that search: the mentions, no text.
var mentionsOnly = []string{"results.mentions"}

// addMentionedVendors adds to suggestions the vendors that the chunks best
// matching name's words mention: the documents may know the vendor by a
// name the graph lacks ("our payroll provider"). Best effort, inside the
// key's read scope: a search that fails adds nothing.
func (s *Server) addMentionedVendors(ctx context.Context, name string, suggestions []string) []string {
	page, _, err := s.clients.SearchPage(ctx, name, 0, 10, mentionsOnly)
	if err != nil {
		return suggestions
	}
	added := 0
	for _, h := range page.GetResults() {
		for _, m := range h.GetMentions() {
			if m.GetIsVendor() && added < maxMentionedSuggestions && !slices.Contains(suggestions, m.GetName()) {
				suggestions = append(suggestions, m.GetName())
				added++
			}
		}
	}
	return suggestions
}

func (s *Server) vendorFailure(call *respond.Call, name string, err error, extra []envelope.Warning) *mcp.CallToolResult {
	var offer respond.Offer
	var n int
	if nf, ok := backend.IsNotFound(err); ok {
		offer, n = notFoundOffer(name)(nf.Suggestions), len(nf.Suggestions)
	} else if amb, ok := backend.IsAmbiguous(err); ok {
		offer, n = ambiguousOffer(name)(amb.Candidates), len(amb.Candidates)
	} else {
		return s.resp.Failure(call, apierr.FromBackend(apierr.VendorGraph, err))
	}
	e, ni, warns := s.resp.FitOffer(call, n, offer, extra...)
	return s.resp.FailureWith(call, e, ni, warns...)
}

// notFoundOffer and ambiguousOffer are a vendor error's answers offering
// the first k of the names (respond.FitOffer picks k).
func notFoundOffer(name string) func([]string) respond.Offer {
	return func(names []string) respond.Offer {
		return func(k int) (*apierr.Error, *envelope.NeedsInput) {
			return apierr.NewVendorNotFound(name, names[:k]), needsinput.VendorNotFound(name, names[:k])
		}
	}
}

func ambiguousOffer(name string) func([]string) respond.Offer {
	return func(names []string) respond.Offer {
		return func(k int) (*apierr.Error, *envelope.NeedsInput) {
			return apierr.NewVendorAmbiguous(name, names[:k]), needsinput.AmbiguousVendor(name, names[:k])
		}
	}
}

// vendorContent is a vendor answer whose lists can be cut short: units are
// the listed entities (or entity ids) first, then the relationships (or
// relationship ids), so relationships go first when trimming.
type vendorContent struct {
	s    *Server
	v    model.Vendor
	p    vendorParams
	base []envelope.Warning

	entities, relationships int // listed before trimming
	capped                  bool
}

func newVendorContent(s *Server, v model.Vendor, p vendorParams, base []envelope.Warning) *vendorContent {
	c := &vendorContent{s: s, v: v, p: p, base: base}
	c.entities, c.relationships = projection.VendorUnits(v, p.mode, p.relationships)
	if projection.Of(p.mode).CapsPartial {
		c.capped = v.EntitiesTruncated || (p.relationships && v.RelationshipsTruncated)
	}
	return c
}

func (c *vendorContent) Units() int    { return c.entities + c.relationships }
func (c *vendorContent) MinUnits() int { return 0 }

func (c *vendorContent) Keep(env *envelope.Envelope, k int) {
	keepE := min(k, c.entities)
	keepR := min(k-keepE, c.relationships)
	v := projection.VendorKeep(c.v, c.p.mode, keepE, keepR)
	result := projection.Vendor(v, c.p.mode, c.p.relationships)
	env.Results = []envelope.Object{result}
	env.Pagination = nil
	env.Warnings = slices.Clone(c.base)
	env.Metadata.Status = envelope.StatusSuccess
	env.Metadata.Message = nil
	st := c.v.Statistics
	switch {
	case k < c.Units():
		env.Metadata.Status = envelope.StatusPartial
		msg := "Vendor lists trimmed to fit the token limit"
		env.Metadata.Message = &msg
		env.Warnings = append(env.Warnings, warnings.NewPartialResults(
			fmt.Sprintf("Listed %d of %d entities and %d of %d relationships to stay within the %d-token limit",
				keepE, c.entities, keepR, c.relationships, c.s.opts.Thresholds.MaxTokens),
			"Use 'preview' mode, or include_relationships=false, for a smaller answer."))
	case c.capped:
		env.Metadata.Status = envelope.StatusPartial
		msg := "Vendor graph larger than the mode's caps"
		env.Metadata.Message = &msg
		maxE, maxR := projection.VendorCaps(c.p.mode)
		env.Warnings = append(env.Warnings, warnings.NewPartialResults(
			fmt.Sprintf("The vendor's neighbourhood has %d entities and %d relationships; '%s' mode lists at most %d and %d",
				st.EntityCount, st.RelationshipCount, c.p.mode, maxE, maxR),
			"statistics counts the whole neighbourhood; use 'metadata' mode for the overview."))
	}
	if c.v.EvidenceUnavailable {
		env.Metadata.Status = envelope.StatusPartial
		env.Warnings = append(env.Warnings, warnings.NewPartialResults(
			"The search service did not answer, so the documents that mention the vendor are missing from this answer",
			"Retry in a few seconds for the evidence; the graph part is complete."))
	}
	if c.s.opts.Desktop {
		// Entities shown as objects (with a confidence), whichever list.
		shown := 0
		for _, key := range []string{"entities", "top_entities"} {
			list, _ := result.Objects(key)
			shown += len(list)
		}
		g := "entity_type"
		env.Metadata.VisualHints = envelope.Hints(&envelope.VisualHints{
			HighlightTop:   min(shown, 3),
			GroupBy:        &g,
			ShowConfidence: shown > 0,
		})
	}
}

func (c *vendorContent) NearLimit() string {
	return projection.Of(c.p.mode).VendorAdvice
}

func (c *vendorContent) Exceeded(needed, limit int) string {
	return fmt.Sprintf("Even without entities and relationships the answer needs about %d tokens; use 'metadata' mode.", needed)
}
