// Package respond assembles a tool's answer: it fits the envelope into the
// token budget (trimming results when needed), attaches the token
// warnings, fills execution_context, and renders the content blocks.
package respond

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bmcis/knowledge/mcp-adapter/internal/apierr"
	"github.com/bmcis/knowledge/mcp-adapter/internal/envelope"
	"github.com/bmcis/knowledge/mcp-adapter/internal/render"
	"github.com/bmcis/knowledge/mcp-adapter/internal/warnings"
)

// Call describes the tool call being answered.
type Call struct {
	Operation string
	RequestID string
	Started   time.Time
	Format    render.Format
	View      render.View
	// CacheHit, DatabaseTimeMS and CacheKey come from the backend.
	CacheHit       bool
	DatabaseTimeMS float64
	CacheKey       string
	// BackendDone is when the backend answered; formatting_time_ms runs
	// from there to the final encoding.
	BackendDone time.Time
	// Final is the envelope last rendered: what the caller was answered
	// (the audit trail reads its chunk ids and error code from it).
	Final *envelope.Envelope
}

// NewEnvelope starts an envelope for the call with status success.
func (c *Call) NewEnvelope() *envelope.Envelope {
	return &envelope.Envelope{
		Metadata: envelope.Metadata{
			Operation: c.Operation,
			Version:   envelope.Version,
			Timestamp: envelope.Timestamp(c.Started),
			RequestID: c.RequestID,
			Status:    envelope.StatusSuccess,
		},
		Results:  []envelope.Object{},
		Warnings: []envelope.Warning{},
		ExecutionContext: envelope.ExecutionContext{
			RequestID: c.RequestID,
		},
	}
}

// Content is what can be trimmed from an answer to fit the budget.
type Content interface {
	// Units is how many droppable units (results; for a vendor, its
	// entities then relationships) the full answer has.
	Units() int
	// MinUnits is the fewest units a useful answer has; fitting fewer is
	// TOKEN_LIMIT_EXCEEDED.
	MinUnits() int
	// Keep rebuilds env's results (and pagination, status and the
	// PARTIAL_RESULTS warning) for the first k units.
	Keep(env *envelope.Envelope, k int)
	// Exceeded suggests, from measured sizes, what would fit when not even
	// MinUnits units do.
	Exceeded(needed, limit int) string
	// NearLimit suggests how to get a smaller answer.
	NearLimit() string
}

// Responder renders answers under the configured thresholds.
type Responder struct {
	Thresholds warnings.Thresholds
}

// Success fits env into the budget and renders it.
func (r *Responder) Success(call *Call, env *envelope.Envelope, content Content) *mcp.CallToolResult {
	limit := r.Thresholds.MaxTokens
	units := content.Units()
	k := units
	// near is the TOKEN_LIMIT_WARNING once one is due. Keep rebuilds the
	// warnings from the content's own, so near is put back after every
	// Keep: the answer must fit with it.
	var near *envelope.Warning
	keep := func(n int) {
		content.Keep(env, n)
		if near != nil {
			env.Warnings = append(env.Warnings, *near)
		}
	}
	keep(k)
	target := limit
	var out *render.Output
	measuredMin := false
	// warnable turns false when only the warning's own words would put an
	// answer with nothing left to trim over the budget: it goes without.
	warnable := true
	for attempt := 0; ; attempt++ {
		// d is the markdown of the last fill, which render uses: env must
		// not change between the two.
		d := r.fill(call, env, true)
		// Once the smallest answer was measured to fit, estimates no longer
		// decide: only a real count over the limit does (below).
		if units > 0 && k > 0 && !measuredMin && env.ExecutionContext.TokensEstimated > target {
			k, d = r.maxFit(call, env, keep, k, target)
		}
		if units > 0 && k < content.MinUnits() {
			// Estimates run a little high as often as low: the smallest
			// useful answer is refused only once its real count is over.
			if measuredMin {
				return r.exceeded(call, env, content)
			}
			measuredMin = true
			k = content.MinUnits()
			keep(k)
			d = r.fill(call, env, true)
		}
		var err error
		out, err = r.render(call, env, d)
		if err != nil {
			return r.Failure(call, apierr.NewServiceUnavailable("mcp-adapter", "the answer could not be encoded", true))
		}
		used := out.TokensUsed
		if used <= limit {
			if attempt < 8 {
				// The warning states the final count: it is (re)written
				// until the answer carrying it has the count it states, and
				// dropped if trimming brought the answer under the threshold.
				switch {
				case used > r.Thresholds.WarnAt() && warnable:
					w := warnings.NewTokenLimitWarning(used, limit, content.NearLimit())
					if near == nil || near.Message != w.Message {
						near = &w
						keep(k)
						continue
					}
				case near != nil:
					near = nil
					keep(k)
					continue
				}
			}
			break
		}
		if units == 0 || k <= content.MinUnits() {
			if near != nil {
				near, warnable = nil, false
				keep(k)
				continue
			}
			// Nothing left to trim: an answer over the budget is refused,
			// never sent.
			return r.exceeded(call, env, content)
		}
		// The estimate was low: tighten the target by the observed error
		// and make sure at least one unit goes.
		target = int(float64(target)*float64(limit)/float64(used)) - 1
		k--
		keep(k)
	}
	return render.ToolResult(out, env)
}

// maxFit finds, by bisection on estimates, the largest k <= hi whose
// envelope fits target. env is left built (by keep) for that k, and filled:
// the draft is its markdown.
func (r *Responder) maxFit(call *Call, env *envelope.Envelope, keep func(int), hi, target int) (int, render.Draft) {
	lo := 0 // lo always fits or is the floor
	for lo < hi {
		mid := (lo + hi + 1) / 2
		keep(mid)
		r.fill(call, env, false)
		if env.ExecutionContext.TokensEstimated <= target {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	keep(lo)
	return lo, r.fill(call, env, true)
}

// exceeded answers TOKEN_LIMIT_EXCEEDED with the measured size of the
// smallest useful answer (with no units, of the answer without results).
func (r *Responder) exceeded(call *Call, env *envelope.Envelope, content Content) *mcp.CallToolResult {
	limit := r.Thresholds.MaxTokens
	content.Keep(env, content.MinUnits())
	d := r.fill(call, env, true)
	needed := env.ExecutionContext.TokensEstimated
	if out, err := r.render(call, env, d); err == nil {
		needed = out.TokensUsed
	}
	suggestion := content.Exceeded(needed, limit)
	e := apierr.NewTokenLimitExceeded(needed, limit, suggestion)
	res := r.failureEnvelope(call, e)
	res.Warnings = append(res.Warnings, warnings.NewTokenLimitExceeded(needed, limit, suggestion))
	return r.finishError(call, res)
}

// Failure answers with an error envelope.
func (r *Responder) Failure(call *Call, e *apierr.Error) *mcp.CallToolResult {
	return r.finishError(call, r.failureEnvelope(call, e))
}

// FailureWith answers with an error envelope that also asks for input.
func (r *Responder) FailureWith(call *Call, e *apierr.Error, ni *envelope.NeedsInput, extra ...envelope.Warning) *mcp.CallToolResult {
	env := r.failureEnvelope(call, e)
	env.NeedsInput = ni
	env.Warnings = append(env.Warnings, extra...)
	return r.finishError(call, env)
}

// Offer builds an error answer that offers the first k of some names to
// choose from (a vendor's candidates or close matches).
type Offer func(k int) (*apierr.Error, *envelope.NeedsInput)

// FitOffer holds an error answer offering n names to the token budget. The
// names come from the data and may be long, and an answer repeats them
// (message, suggestions, details, needs_input): it offers the most names
// whose answer, extra warnings included, fits, and says how many were left
// out. The answer offering none is bounded by the request and always sent.
// It returns the answer's parts for FailureWith, and the needs_input for an
// elicitation, which must not offer more than the answer does.
func (r *Responder) FitOffer(call *Call, n int, offer Offer, extra ...envelope.Warning) (*apierr.Error, *envelope.NeedsInput, []envelope.Warning) {
	build := func(k int) (*apierr.Error, *envelope.NeedsInput, []envelope.Warning) {
		e, ni := offer(k)
		warns := slices.Clone(extra)
		if k < n {
			warns = append(warns, warnings.NewPartialResults(
				fmt.Sprintf("Only %d of %d matching names fit the token budget (%d tokens).", k, n, r.Thresholds.MaxTokens),
				"Give a more specific name."))
		}
		return e, ni, warns
	}
	fits := func(k int) bool {
		e, ni, warns := build(k)
		env := r.failureEnvelope(call, e)
		env.NeedsInput, env.Warnings = ni, append(env.Warnings, warns...)
		d := r.fill(call, env, true)
		out, err := r.render(call, env, d)
		return err == nil && out.TokensUsed <= r.Thresholds.MaxTokens
	}
	if fits(n) {
		return build(n)
	}
	// Real counts, by bisection: an error path, and n is small (the
	// backends offer at most a dozen names).
	lo, hi := 0, n-1 // lo fits or is the floor
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return build(lo)
}

func (r *Responder) failureEnvelope(call *Call, e *apierr.Error) *envelope.Envelope {
	env := call.NewEnvelope()
	env.Metadata.Status = envelope.StatusError
	msg := e.StatusMessage
	if msg == "" {
		msg = e.Message
	}
	env.Metadata.Message = &msg
	env.Error = e.Envelope()
	return env
}

func (r *Responder) finishError(call *Call, env *envelope.Envelope) *mcp.CallToolResult {
	d := r.fill(call, env, true)
	out, err := r.render(call, env, d)
	if err != nil {
		// An error envelope holds only strings and numbers; encoding it
		// cannot fail. Keep a plain answer as the last resort.
		return mcp.NewToolResultError(fmt.Sprintf("%s: %s", env.Error.Code, env.Error.Message))
	}
	return render.ToolResult(out, env)
}

// fill sets the execution context from the call and the current estimate.
// With draft, the walk that estimated the markdown also writes it, for the
// render of env unchanged since; without, it only estimates.
func (r *Responder) fill(call *Call, env *envelope.Envelope, draft bool) render.Draft {
	return r.fillWith(call, env, func() (envelope.TokenBreakdown, render.Draft) {
		if draft {
			return render.EstimateDraft(env, call.View, call.Format)
		}
		return render.Estimate(env, call.View, call.Format), render.Draft{}
	})
}

// fillWith is fill with the estimate (and draft) of env made by estimate,
// called once the execution context is set but for its estimate.
func (r *Responder) fillWith(call *Call, env *envelope.Envelope, estimate func() (envelope.TokenBreakdown, render.Draft)) render.Draft {
	if env.Warnings == nil {
		env.Warnings = []envelope.Warning{}
	}
	if env.Results == nil {
		env.Results = []envelope.Object{}
	}
	ec := &env.ExecutionContext
	ec.RequestID = call.RequestID
	ec.CacheHit = call.CacheHit
	// Extended metrics only where they say something: the database time
	// when the database was read, the token breakdown when the budget
	// shaped the answer (trimmed, or near or over the limit). The cache key
	// tells a model nothing; it goes to the log (tools.logDone).
	ec.DatabaseTimeMS = fewerDigits(call.DatabaseTimeMS)
	ec.TokenBreakdown = nil
	budget := env.Metadata.Status == envelope.StatusPartial ||
		hasWarning(env, warnings.TokenLimitWarning) || hasWarning(env, warnings.TokenLimitExceeded)
	if budget {
		ec.TokenBreakdown = &envelope.TokenBreakdown{} // priced by the estimate
	}
	b, d := estimate()
	if budget {
		ec.TokenBreakdown = &b
	}
	ec.TokensEstimated = b.Total()
	return d
}

// render renders env; d is the draft of the fill right before, env
// unchanged since.
func (r *Responder) render(call *Call, env *envelope.Envelope, d render.Draft) (*render.Output, error) {
	stamp(call, env)
	return render.RenderDraft(env, call.View, call.Format, d)
}

// stamp makes env the call's final envelope and writes its timings, right
// before it is encoded.
func stamp(call *Call, env *envelope.Envelope) {
	call.Final = env
	now := time.Now()
	ec := &env.ExecutionContext
	ec.ExecutionTimeMS = math.Max(fewerDigits(ms(now.Sub(call.Started))), 0.1)
	formatStart := call.BackendDone
	if formatStart.IsZero() {
		formatStart = call.Started
	}
	// Formatting time is reported when it is worth looking at.
	ec.FormattingTimeMS = 0
	if f := ms(now.Sub(formatStart)); f >= slowFormattingMS {
		ec.FormattingTimeMS = fewerDigits(f)
	}
}

// slowFormattingMS is the formatting time from which execution_context
// reports it: below it, formatting is not where the time went.
const slowFormattingMS = 10

func ms(d time.Duration) float64 { return round2(float64(d.Microseconds()) / 1000) }

func hasWarning(env *envelope.Envelope, code string) bool {
	for _, w := range env.Warnings {
		if w.Code == code {
			return true
		}
	}
	return false
}

func round2(f float64) float64 { return math.Round(f*100) / 100 }

// fewerDigits rounds a time in milliseconds to whole milliseconds, or to a
// tenth below 1 ms: the digits past that say nothing to a reader and cost
// tokens on every answer ("1.05" is 2 tokens more than "1").
func fewerDigits(ms float64) float64 {
	if ms < 1 {
		return math.Round(ms*10) / 10
	}
	return math.Round(ms)
}
