package tools

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"

	"github.com/bmcis/knowledge/mcp-adapter/internal/answercache"
	"github.com/bmcis/knowledge/mcp-adapter/internal/apierr"
	"github.com/bmcis/knowledge/mcp-adapter/internal/cursor"
	"github.com/bmcis/knowledge/mcp-adapter/internal/envelope"
	"github.com/bmcis/knowledge/mcp-adapter/internal/needsinput"
	"github.com/bmcis/knowledge/mcp-adapter/internal/projection"
	"github.com/bmcis/knowledge/mcp-adapter/internal/render"
	"github.com/bmcis/knowledge/mcp-adapter/internal/respond"
	"github.com/bmcis/knowledge/mcp-adapter/internal/signals"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tokens"
	"github.com/bmcis/knowledge/mcp-adapter/internal/warnings"
	"github.com/bmcis/knowledge/platform/limits"
)

type searchParams struct {
	query      string
	pageSize   int
	sizeGiven  bool
	deprecated bool // top_k and page_size both given
	cursor     string
	mode       projection.Mode
	modeGiven  bool
	fields     []string
	format     render.Format
}

func (s *Server) parseSearch(raw any) (searchParams, *apierr.Error) {
	a := newArgs(raw, "query", "top_k", "page_size", "cursor", "response_mode", "fields", "format")
	p := searchParams{pageSize: limits.DefaultPageSize}
	p.format = s.parseFormat(a)
	p.query = strings.TrimSpace(a.str("query"))
	topK, hasTopK := a.integer("top_k", limits.SearchPageSize.Min, limits.SearchPageSize.Max)
	size, hasSize := a.integer("page_size", limits.SearchPageSize.Min, limits.SearchPageSize.Max)
	switch {
	case hasSize:
		p.pageSize, p.sizeGiven = size, true
		p.deprecated = hasTopK || a.has("top_k")
	case hasTopK:
		p.pageSize, p.sizeGiven = topK, true
	}
	p.cursor = strings.TrimSpace(a.str("cursor"))
	p.mode, p.modeGiven = s.parseMode(a, s.opts.DefaultResponseMode)
	p.fields = a.strings("fields")
	if a.err != nil {
		return p, a.err
	}
	if n := utf8.RuneCountInString(p.query); n > limits.SearchQuery.Max {
		return p, apierr.NewQueryTooLong(n, limits.SearchQuery.Max)
	}
	return p, nil
}

func (s *Server) parseFormat(a *args) render.Format {
	f, ok := render.ParseFormat(a.str("format"), s.opts.DefaultFormat)
	if !ok {
		a.fail("format", "must be one of "+strings.Join(render.Names(), ", "), "")
		return s.opts.DefaultFormat
	}
	return f
}

func (s *Server) parseMode(a *args, def projection.Mode) (projection.Mode, bool) {
	raw := a.str("response_mode")
	m, ok := projection.ParseMode(raw, def)
	if !ok {
		a.fail("response_mode", "must be one of "+projection.OneOf(), "")
		return def, false
	}
	return m, strings.TrimSpace(raw) != ""
}

func (s *Server) semanticSearch(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	p, perr := s.parseSearch(req.GetArguments())
	ctx, call := s.newCall(ctx, ToolSemanticSearch, p.format)
	noteOf(ctx).query = p.query
	res := s.search(ctx, req, call, p, perr)
	s.logDone(ctx, call, res)
	return res, nil
}

func (s *Server) search(ctx context.Context, req mcp.CallToolRequest, call *respond.Call, p searchParams, perr *apierr.Error) *mcp.CallToolResult {
	if perr != nil {
		// Parameter errors are answered only to callers auth allows.
		if _, _, aerr, _ := guarded[struct{}](ctx, s, call.Operation, nil); aerr != nil {
			return s.resp.Failure(call, aerr)
		}
		return s.resp.Failure(call, perr)
	}

	var resolved []envelope.Warning
	var pre *authInfo // set when auth already allowed this call
	if p.query == "" {
		_, info, aerr, _ := guarded[struct{}](ctx, s, call.Operation, nil)
		if aerr != nil {
			return s.resp.Failure(call, aerr)
		}
		pre = &info
		topics, _ := s.clients.Categories(info.scoped(ctx))
		for i, t := range topics {
			topics[i] = needsinput.Topic(t)
		}
		ni := needsinput.EmptyQuery(topics)
		value, outcome, pending := needsinput.Ask(ctx, req, ni)
		switch outcome {
		case needsinput.Pending:
			return pending
		case needsinput.Answered:
			p.query = value
			noteOf(ctx).query = value
			if n := utf8.RuneCountInString(value); n > limits.SearchQuery.Max {
				return s.resp.Failure(call, apierr.NewQueryTooLong(n, limits.SearchQuery.Max))
			}
			resolved = append(resolved, warnings.NewResolvedByElicitation("query", value))
		default:
			e := apierr.NewInvalidParams("query", "must not be empty", "Provide a search query: a question or a few keywords.")
			return s.resp.FailureWith(call, e, ni)
		}
	}

	queryHash := cursor.QueryHash(p.query)
	offset := 0
	if p.cursor != "" {
		c, err := s.opts.Cursors.Decode(p.cursor, queryHash)
		if err != nil {
			if pre == nil {
				if _, _, aerr, _ := guarded[struct{}](ctx, s, call.Operation, nil); aerr != nil {
					return s.resp.Failure(call, aerr)
				}
			}
			return s.resp.Failure(call, apierr.NewInvalidCursor(err.Error()))
		}
		offset = c.Offset
		if !p.sizeGiven {
			p.pageSize = c.PageSize
		}
		if m, ok := projection.ParseMode(c.ResponseMode, p.mode); ok && !p.modeGiven {
			p.mode = m
		}
	}
	call.View.Mode = string(p.mode)
	call.View.Title = fmt.Sprintf("Search results for %q", p.query)
	call.View.ChunkLinks = chunkLinks

	fields, ferr := projection.Select(projection.SearchFields(p.mode), p.fields, p.mode)

	read := s.searchReads(p.mode, fields)
	call.CacheKey = fmt.Sprintf("search:%s:%s:%d:%d", p.mode, queryHash, offset, p.pageSize)
	// fetch returns its own duration: a call guarded starts early may still
	// run after guarded has refused it, so it writes nothing of the caller's.
	// It answers from the answer cache when it can (kept), in the read scope
	// it runs in; key is where to keep a new answer.
	type timedPage struct {
		page *searchv1.SearchResponse
		took time.Duration
		// version is the index version search computed the page at.
		version string
		kept    *keptAnswer
		slot    *answerSlot
	}
	fetch := func(ctx context.Context, useKept bool) (timedPage, error) {
		if ferr != nil {
			return timedPage{page: &searchv1.SearchResponse{}}, nil
		}
		var slot *answerSlot
		if useKept {
			var kept *keptAnswer
			if kept, slot = s.lookupAnswer(ctx, call.Operation, func(k *answercache.KeyBuilder) {
				k.String(p.query).Int(int64(offset)).Int(int64(p.pageSize)).String(string(p.mode)).
					Strings(fields).Bool(len(p.fields) == 0).String(string(p.format)).Bool(p.deprecated)
			}); kept != nil {
				return timedPage{kept: kept, slot: slot}, nil
			}
		}
		start := time.Now()
		pg, version, err := s.clients.SearchPage(ctx, p.query, offset, p.pageSize, read)
		return timedPage{page: pg, took: time.Since(start), version: version, slot: slot}, err
	}
	var (
		got  timedPage
		info authInfo
		aerr *apierr.Error
		berr error
	)
	if pre != nil {
		// An elicited query's answer says so: not kept.
		info = *pre
		got, berr = fetch(info.scoped(ctx), false)
	} else {
		got, info, aerr, berr = guardedAnswer(ctx, s, call.Operation, fetch, func(p timedPage) bool { return p.kept != nil })
	}
	page, backendTime := got.page, got.took
	call.BackendDone = s.opts.Now()
	if aerr != nil {
		return s.resp.Failure(call, aerr)
	}
	if got.kept != nil {
		return s.replayAnswer(ctx, call, got.kept)
	}
	if ferr != nil {
		return s.resp.Failure(call, ferr)
	}
	if berr != nil {
		return s.resp.Failure(call, apierr.FromBackend(apierr.Search, berr))
	}

	for _, h := range page.GetResults() {
		noteResult(ctx, h.GetChunk().GetChunkId(), h.GetChunk().GetDocumentId())
	}
	call.CacheHit = page.GetCacheHit()
	call.DatabaseTimeMS = page.GetDatabaseTimeMs()

	env := call.NewEnvelope()
	base := resolved
	if p.deprecated {
		base = append(base, warnings.NewDeprecatedParameter("top_k", "page_size"))
	}
	base = append(base, info.warnings()...)
	// Warnings about this one call (its check, its backend time) are not
	// for a later call: such answers are not kept.
	keep := len(info.warnings()) == 0
	if !page.GetCacheHit() && s.opts.Thresholds.CacheMissSlow > 0 && backendTime > s.opts.Thresholds.CacheMissSlow {
		base = append(base, warnings.NewCacheMissSlow(backendTime))
		keep = false
	}
	if w, ok := lowQuality(page, offset, s.opts.Thresholds.LowQuality); ok {
		base = append(base, w)
	}

	content := &searchContent{
		s: s, p: p, page: page, offset: offset, queryHash: queryHash, fields: fields,
		withSignals: s.opts.Desktop && projection.Of(p.mode).Signals && len(p.fields) == 0,
		base:        base,
	}
	content.project()
	res := s.resp.Success(call, env, content)
	if keep {
		s.keepAnswer(ctx, got.slot, got.version, call)
	}
	return res
}

// lowQualityReads are what lowQuality reads of a result (paths of
// searchv1.SearchResult).
var lowQualityReads = []string{"similarity_score", "matched_terms"}

// searchReads is the read mask of a search shown with fields in mode m:
// what the fields, the quality warning and (for a mode with desktop
// signals) the signals read, and the chunks' and documents' ids for the
// audit entry.
func (s *Server) searchReads(m projection.Mode, fields []string) []string {
	if !s.opts.Desktop || !projection.Of(m).Signals {
		return withAuditReads(projection.SearchReads(fields, lowQualityReads...), searchAuditReads)
	}
	reads := append(projection.SearchReads(fields, append(slices.Clone(lowQualityReads), signals.Reads...)...), signals.QueryReads...)
	return withAuditReads(reads, searchAuditReads)
}

// lowQuality reports LOW_QUALITY_RESULTS on the first page only (offset
// 0): when it is empty, or when its top result is weak on both absolute
// signals, i.e. its similarity_score (cosine, not rank-based) is below the
// threshold and it covers less than that share of the query terms (BM25
// matched terms of the top hit / distinct query terms; 0 when BM25 did not
// return it). hybrid_score is rank-based (the top of any non-empty ranking
// scores high, deep ranks always low), so it says nothing about quality.
// Later pages never warn: their quality was judged on the first.
func lowQuality(page *searchv1.SearchResponse, offset int, threshold float64) (envelope.Warning, bool) {
	if offset != 0 {
		return envelope.Warning{}, false
	}
	if len(page.GetResults()) == 0 {
		return warnings.NewNoResults(), true
	}
	top := page.GetResults()[0]
	coverage := termCoverage(top, page.GetQueryTerms())
	if top.GetSimilarityScore() < threshold && coverage < threshold {
		return warnings.NewLowQualityResults(top.GetSimilarityScore(), coverage, threshold), true
	}
	return envelope.Warning{}, false
}

// termCoverage is the share of the distinct query terms the hit matched
// (0 when there are no query terms; a hit BM25 did not return matched none).
func termCoverage(h *searchv1.SearchResult, queryTerms []string) float64 {
	terms := map[string]bool{}
	for _, t := range queryTerms {
		terms[t] = true
	}
	if len(terms) == 0 {
		return 0
	}
	matched := 0
	for t := range terms {
		if slices.Contains(h.GetMatchedTerms(), t) {
			matched++
		}
	}
	return float64(matched) / float64(len(terms))
}

// searchContent is a page of search results that can be cut short.
type searchContent struct {
	s           *Server
	p           searchParams
	page        *searchv1.SearchResponse
	offset      int
	queryHash   string
	fields      []string
	withSignals bool
	base        []envelope.Warning

	objects []envelope.Object
}

// project builds every result object of the page once.
func (c *searchContent) project() {
	c.objects = make([]envelope.Object, len(c.page.GetResults()))
	var extra [][]envelope.Field
	if c.withSignals {
		extra = c.s.opts.Signals.Annotate(c.signalPage(c.page.GetResults()))
	}
	for i, h := range c.page.GetResults() {
		o := projection.Hit(h, c.fields)
		if extra != nil {
			o = append(o, extra[i]...)
		}
		c.objects[i] = o
	}
}

func (c *searchContent) signalPage(hits []*searchv1.SearchResult) signals.Page {
	return signals.Page{
		Hits:           hits,
		TotalAvailable: int(c.page.GetTotalAvailable()),
		QueryTerms:     c.page.GetQueryTerms(),
		QueryVendors:   c.page.GetQueryVendors(),
	}
}

func (c *searchContent) Units() int    { return len(c.objects) }
func (c *searchContent) MinUnits() int { return min(1, len(c.objects)) }

func (c *searchContent) Keep(env *envelope.Envelope, k int) {
	env.Results = c.objects[:k]
	next := c.offset + k
	total := int(c.page.GetTotalAvailable())
	hasMore := next < total
	var cur *string
	if hasMore {
		s := c.s.opts.Cursors.Encode(cursor.Cursor{
			QueryHash: c.queryHash, Offset: next, ResponseMode: string(c.p.mode), PageSize: c.p.pageSize,
		})
		cur = &s
	}
	env.Pagination = &envelope.Pagination{
		Cursor: cur, PageSize: c.p.pageSize, HasMore: hasMore, TotalAvailable: total, ReturnedCount: k,
	}
	env.Warnings = slices.Clone(c.base)
	env.Metadata.Status = envelope.StatusSuccess
	env.Metadata.Message = nil
	if k < len(c.objects) {
		env.Metadata.Status = envelope.StatusPartial
		msg := fmt.Sprintf("Page trimmed to %d of %d results to fit the token limit", k, len(c.objects))
		env.Metadata.Message = &msg
		env.Warnings = append(env.Warnings, warnings.NewPartialResults(
			fmt.Sprintf("Returned %d of the %d results of this page to stay within the %d-token limit; the cursor continues at result %d",
				k, len(c.objects), c.s.opts.Thresholds.MaxTokens, next+1),
			fmt.Sprintf("Use page_size %d to get whole pages in %s mode, or a lighter response_mode.", max(k, 1), c.p.mode)))
	}
	// The page-level desktop signals go with the per-result ones: a mode
	// without signals (ids_only) gets neither.
	if c.s.opts.Desktop && projection.Of(c.p.mode).Signals {
		hits := c.page.GetResults()[:k]
		sp := c.signalPage(hits)
		vh := c.s.opts.Signals.VisualHints(sp)
		if !c.s.opts.Signals.IncludeConfidence || !c.withSignals {
			vh.ShowConfidence = false
		}
		env.Metadata.VisualHints = envelope.Hints(vh)
		env.QueryAnalysis = signals.QueryAnalysis(sp)
	}
}

// chunkLinks is how many leading results get a resource_link to
// kb://chunks/{id}: the few a progressive reader opens (docs/MCP.md).
const chunkLinks = 3

func (c *searchContent) NearLimit() string {
	return lighterAdvice(c.p.mode, c.p.pageSize)
}

func lighterAdvice(mode projection.Mode, pageSize int) string {
	if lighter, ok := projection.Lighter(mode); ok {
		return fmt.Sprintf("Use '%s' mode or reduce page_size to %d", lighter, max(pageSize/2, 1))
	}
	return fmt.Sprintf("Reduce page_size to %d", max(pageSize/2, 1))
}

// Exceeded measures, with the real tokenizer, what this page costs in each
// lighter mode and suggests the richest one that fits.
func (c *searchContent) Exceeded(needed, limit int) string {
	if len(c.page.GetResults()) == 0 {
		return fmt.Sprintf("Even without results the answer needs about %d tokens, over the %d-token limit; use 'ids_only' mode.", needed, limit)
	}
	suggestion := fmt.Sprintf("One result in '%s' mode needs about %d tokens, over the %d-token limit.", c.p.mode, needed, limit)
	overhead := max(needed-pageTokens(c.page.GetResults()[:1], projection.SearchFields(c.p.mode)), 0)
	for m, ok := projection.Lighter(c.p.mode); ok; m, ok = projection.Lighter(m) {
		cost := overhead + pageTokens(c.page.GetResults(), projection.SearchFields(m))
		if cost <= limit {
			return suggestion + fmt.Sprintf(" Use '%s' mode: this page of %d results takes about %d tokens; then read single chunks with get_chunks in 'preview' mode.",
				m, len(c.page.GetResults()), cost)
		}
	}
	return suggestion + " Use 'ids_only' mode with a smaller page_size."
}

// pageTokens counts the tokens of hits projected onto fields.
func pageTokens(hits []*searchv1.SearchResult, fields []string) int {
	objs := make([]envelope.Object, len(hits))
	for i, h := range hits {
		objs[i] = projection.Hit(h, fields)
	}
	b, err := envelope.Marshal(objs)
	if err != nil {
		return 0
	}
	return tokens.Count(string(b))
}
