package embedding

import (
	"fmt"
	"time"

	"github.com/bmcis/knowledge/services/search/internal/embed"
)

// The retrain rule. The builtin model is retrained in the background when
// the corpus has outgrown it, by either measure:
//
//   - growth: the replica holds at least RetrainGrowth times the chunks the
//     model was fitted on (only while that sample is below the training
//     cap, MaxTrainDocs: beyond it a retrain would fit the same size). With
//     growth 2 retraining is geometric, so the total training work stays
//     within twice the last training's;
//   - coverage: under RetrainCoverage of the indexed terms that a model can
//     learn are known to it. Learnable: at most MaxDFRatio of the chunks
//     (the model's upper vocabulary bound) and frequent enough that a
//     retrain's sample (min(chunks, MaxTrainDocs), spread like a random
//     sample of chunks: embed.Sample) would be expected to hold the term
//     in 2*MinDF chunks, so a fresh model knows nearly all of them (a
//     term expected 4 times is held twice or more about 9 times in 10)
//     and a retrain nearly never leaves the rule firing. A model that does not
//     know a chunk's words embeds it from the few it knows, or as zero.
//
// A replica never retrains twice at the same chunk count (Scheduler).
//
// Defaults: growth 2, coverage 0.8 (BMCIS_BUILTIN_RETRAIN_GROWTH,
// BMCIS_BUILTIN_RETRAIN_COVERAGE; growth 0 and coverage 0 turn each off).
const (
	DefaultRetrainGrowth   = 2.0
	DefaultRetrainCoverage = 0.8
)

// TermSource is the replica's indexed vocabulary (index.Index).
type TermSource interface {
	EachTerm(fn func(term string, df int))
	LiveChunks() int
}

// Freshness describes how well the active model fits the indexed corpus.
type Freshness struct {
	// TrainedAt is when the active model was registered (zero: no model).
	TrainedAt time.Time
	// TrainedOn is the chunks the builtin model was fitted on (0 unknown).
	TrainedOn int
	// Chunks is the replica's live chunk count.
	Chunks int
	// Coverage is the share of learnable indexed terms the model knows
	// (1 for remote providers, which have no corpus vocabulary).
	Coverage float64
	// Pending says the rule asks for a retrain; Reason says which part.
	Pending bool
	Reason  string
	// Running says a retrain is under way on this replica.
	Running bool
	// ModelRow is the active model's row the assessment was made against.
	ModelRow int64
}

// Assess applies the retrain rule to the active model and the replica's
// indexed terms. Only the builtin provider retrains.
func (m *Manager) Assess(src TermSource) Freshness {
	a := m.Current()
	f := Freshness{Chunks: src.LiveChunks(), Coverage: 1}
	if a == nil {
		return f
	}
	f.TrainedAt, f.ModelRow = a.TrainedAt, a.Row
	b := a.Builtin
	if b == nil {
		return f
	}
	f.TrainedOn = b.TrainedOn()
	cfg := m.cfg.Builtin
	minDF := max(cfg.MinDF, 1)
	maxDF := int(cfg.MaxDFRatio * float64(f.Chunks))
	sampleCap := cfg.MaxTrainDocs
	if sampleCap <= 0 {
		sampleCap = embed.DefaultBuiltinConfig().MaxTrainDocs
	}
	// A term in df chunks is expected df*sample/chunks times in a sample.
	learnable := float64(2*minDF) * float64(f.Chunks) / float64(max(1, min(f.Chunks, sampleCap)))
	known, total := 0, 0
	src.EachTerm(func(term string, df int) {
		if float64(df) < learnable || (cfg.MaxDFRatio > 0 && df > max(maxDF, minDF)) {
			return
		}
		total++
		if b.Knows(term) {
			known++
		}
	})
	if total > 0 {
		f.Coverage = float64(known) / float64(total)
	}
	if f.Chunks < m.cfg.MinTrainChunks {
		return f
	}
	switch {
	case m.cfg.RetrainGrowth > 0 && f.TrainedOn > 0 && f.TrainedOn < sampleCap &&
		float64(f.Chunks) >= m.cfg.RetrainGrowth*float64(f.TrainedOn):
		f.Pending = true
		f.Reason = fmt.Sprintf("corpus grew to %d chunks from the %d the model was trained on", f.Chunks, f.TrainedOn)
	case m.cfg.RetrainCoverage > 0 && total > 0 && f.Coverage < m.cfg.RetrainCoverage:
		f.Pending = true
		f.Reason = fmt.Sprintf("the model knows %.0f%% of the indexed terms", 100*f.Coverage)
	}
	return f
}
