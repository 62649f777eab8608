package respond

import (
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bmcis/knowledge/mcp-adapter/internal/apierr"
	"github.com/bmcis/knowledge/mcp-adapter/internal/envelope"
	"github.com/bmcis/knowledge/mcp-adapter/internal/render"
	"github.com/bmcis/knowledge/mcp-adapter/internal/warnings"
)

// Frozen is a finished success answer kept to be answered again
// (tools' answer cache): the fitted envelope less its per-call fields
// (request id, timestamp, timings), its results already encoded and, for
// the markdown format, the markdown, its links and token counts. It
// describes itself as a cached answer (cache_hit true, no database time),
// which is what a replay is. Read-only once made: replays share it.
type Frozen struct {
	env     envelope.Envelope
	view    render.View
	format  render.Format
	results []byte
	// The markdown format's text block, links and counts.
	markdown        string
	links           []render.Link
	tokensUsed      int
	tokensEstimated int
	// The JSON formats' parts every replay writes the same.
	kept *render.Kept
}

// freezeHeadroom is how far under the warning threshold an answer must be
// to be kept: a replay's request id and timings are other numbers than the
// kept answer's, and in the JSON formats their tokens count, so a replay
// must not come close to where TOKEN_LIMIT_WARNING would be due.
const freezeHeadroom = 64

// Freeze keeps the call's final answer for Replay, when it is one that can
// be answered again as it is: a success (not partial, no error), not shaped
// by the token budget, well under the warning threshold. The caller keeps
// out answers with warnings of its own about this one call (its check,
// its backend time).
func (r *Responder) Freeze(call *Call) (*Frozen, bool) {
	if !r.Freezable(call) {
		return nil, false
	}
	env := call.Final
	f := &Frozen{env: *env, view: call.View, format: call.Format}
	f.env.Metadata.Timestamp, f.env.Metadata.RequestID = "", ""
	f.env.ExecutionContext = envelope.ExecutionContext{CacheHit: true}
	results, err := envelope.EncodeResults(f.env.Results)
	if err != nil {
		return nil, false
	}
	f.results = results
	if f.format != render.Markdown {
		if f.kept, err = render.Keep(&f.env, f.view, f.format, f.results); err != nil {
			return nil, false
		}
	}
	if f.format == render.Markdown {
		// The markdown names no per-call field but cache_hit ("cached"),
		// true in every replay: it is written once, here.
		probe := f.env
		b, d := render.EstimateDraft(&probe, f.view, f.format)
		probe.ExecutionContext.TokensEstimated = b.Total()
		out, err := render.RenderDraft(&probe, f.view, f.format, d)
		if err != nil || len(out.Blocks) != 1 {
			return nil, false
		}
		f.markdown, f.links, f.tokensUsed, f.tokensEstimated = out.Blocks[0], out.Links, out.TokensUsed, b.Total()
	}
	return f, true
}

// Freezable reports, without freezing it, whether the call's final answer
// is one Freeze would keep as far as the answer itself tells (Freeze may
// still fail to encode it).
func (r *Responder) Freezable(call *Call) bool {
	env := call.Final
	return env != nil && env.Error == nil && env.NeedsInput == nil && env.Metadata.Status == envelope.StatusSuccess &&
		env.ExecutionContext.TokenBreakdown == nil && !hasWarning(env, warnings.TokenLimitWarning) &&
		env.ExecutionContext.TokensUsed <= r.Thresholds.WarnAt()-freezeHeadroom
}

// Size estimates the bytes f holds: its encoded results and markdown, and
// as much again for the result objects they were encoded from.
func (f *Frozen) Size() int { return 2*len(f.results) + len(f.markdown) + 1024 }

// Results is how many results the answer returned.
func (f *Frozen) Results() int { return len(f.env.Results) }

// Replay answers call with f, stamped with the call's own request id,
// timestamp and timings. In the markdown format nothing but those is
// written again; the JSON formats, whose text carries them and counts
// their tokens, are filled and rendered as any answer is, estimating and
// counting again only the parts around the per-call fields (render.Kept).
func (r *Responder) Replay(call *Call, f *Frozen) *mcp.CallToolResult {
	env := f.env
	env.Metadata.Timestamp = envelope.Timestamp(call.Started)
	env.Metadata.RequestID = call.RequestID
	env.ExecutionContext.RequestID = call.RequestID
	call.CacheHit, call.DatabaseTimeMS = true, 0
	call.View, call.Format = f.view, f.format
	if f.format != render.Markdown {
		d := r.fillWith(call, &env, func() (envelope.TokenBreakdown, render.Draft) {
			return f.kept.Estimate(&env), f.kept.Draft()
		})
		out, err := r.render(call, &env, d)
		if err != nil {
			return r.Failure(call, apierr.NewServiceUnavailable("mcp-adapter", "the answer could not be encoded", true))
		}
		return render.ToolResult(out, &env)
	}
	env.ExecutionContext.TokensEstimated = f.tokensEstimated
	env.ExecutionContext.TokensUsed = f.tokensUsed
	stamp(call, &env)
	j, err := envelope.EncodeWith(&env, f.results)
	if err != nil {
		return r.Failure(call, apierr.NewServiceUnavailable("mcp-adapter", "the answer could not be encoded", true))
	}
	out := &render.Output{Blocks: []string{f.markdown}, JSON: j, Links: f.links, TokensUsed: f.tokensUsed}
	return render.ToolResult(out, &env)
}
