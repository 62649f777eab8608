package render

import (
	"bytes"

	"github.com/bmcis/knowledge/mcp-adapter/internal/envelope"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tokens"
)

// Kept is what renders of one answer in a JSON format share when only its
// per-call fields change (request id, timestamp, timings: a kept answer
// replayed, respond.Replay): the estimate of everything but the JSON
// block's metadata part, the markdown of "both" with its links and count,
// the encoded results, and the parts of the JSON block around the per-call
// fields with their token counts, so that a render counts only the rest.
// Read-only once made: renders share it.
type Kept struct {
	estimate envelope.TokenBreakdown // without the JSON metadata part
	draft    Draft
}

// fixedPart is a span of the JSON block that every render of a kept answer
// writes the same, and its cl100k count.
type fixedPart struct {
	text   []byte
	tokens int
}

// Keep prepares the renders of env in format f (JSON or Both) that change
// only its per-call fields; results is EncodeResults(env.Results).
func Keep(env *envelope.Envelope, view View, f Format, results []byte) (*Kept, error) {
	b, d := estimate(env, view, f, true)
	b.Metadata -= envelope.EstimateJSONMetadata(env)
	k := &Kept{estimate: b, draft: d}
	k.draft.results = results
	if f == Both {
		k.draft.mdTokens, k.draft.mdCounted = tokens.CountLines(d.md), true
	}
	j, err := envelope.EncodeWith(env, results)
	if err != nil {
		return nil, err
	}
	// The per-call fields are in _metadata (first) and execution_context:
	// the spans from "results" to "execution_context" and from "warnings"
	// to the end are the same in every render. Each starts and ends at a
	// member name after `,"`, a cut no token crosses (tokens.Cut); a span
	// not found so is not kept, and is counted with the rest.
	spans := [][2]string{{`,"results":`, `,"execution_context":`}, {`,"warnings":`, ""}}
	from := 0
	for _, sp := range spans {
		i := bytes.Index(j[from:], []byte(sp[0]))
		if i < 0 {
			break
		}
		start, end := from+i+2, len(j)
		if sp[1] != "" {
			e := bytes.Index(j[start:], []byte(sp[1]))
			if e < 0 {
				break
			}
			end = start + e + 2
		}
		if !tokens.Cut(j, start) || (end < len(j) && !tokens.Cut(j, end)) {
			break
		}
		text := j[start:end]
		k.draft.fixed = append(k.draft.fixed, fixedPart{text: text, tokens: tokens.Count(string(text))})
		from = end
	}
	return k, nil
}

// Estimate is the estimate of env, the kept answer with its per-call
// fields: the kept parts and its metadata part.
func (k *Kept) Estimate(env *envelope.Envelope) envelope.TokenBreakdown {
	b := k.estimate
	b.Metadata += envelope.EstimateJSONMetadata(env)
	return b
}

// Draft is the draft for RenderDraft of env, the kept answer with its
// per-call fields.
func (k *Kept) Draft() Draft { return k.draft }

// countJSON is tokens.Count(j) using the fixed parts d holds: each is
// looked for in order, and counted as kept where found at cuts (tokens.Cut)
// of j; the text between is counted. A part not found so leaves the rest
// to be counted as it is.
func (d *Draft) countJSON(j []byte) int {
	n, from := 0, 0
	for _, p := range d.fixed {
		i := bytes.Index(j[from:], p.text)
		if i < 0 {
			break
		}
		start, end := from+i, from+i+len(p.text)
		if !tokens.Cut(j, start) || (end < len(j) && !tokens.Cut(j, end)) {
			break
		}
		n += tokens.Count(string(j[from:start])) + p.tokens
		from = end
	}
	return n + tokens.Count(string(j[from:]))
}
