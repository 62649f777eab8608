package embed

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"
)

// Sub-word rows (fastText-like character n-grams) give the bag of terms
// what the analyzer's stems cannot: "methylation" and "hypermethylation",
// "cardiomyocyte" and "cardiomyopathy" share rows, and a query word the
// vocabulary lacks (seen in one chunk only, or never) still lands near the
// words it is spelled like. A text's vector sums, for every analyzed word,
// the word's own row (when the vocabulary has it) and the rows of its
// character n-grams (none for a word shorter than n), each weighted like a term (local tf weight times its
// global weight). The n-gram rows start at zero and are learned by the
// contrastive fine-tuning only, so a model without fine-tuning is plain
// LSA. Measured on SciFact in the eval package's NOTES.md ("Sixth round").

// SubwordConfig selects the character n-grams a model gets rows for.
type SubwordConfig struct {
	// N is the n-gram length in runes, over the word wrapped in '<' and
	// '>' (0: no sub-word rows).
	N int
	// Max caps the n-gram rows: the n-grams in the most training texts
	// (at least two, at most half of them) are kept.
	Max int
	// Scale multiplies an n-gram's log-entropy weight: the word's own row
	// counts once, its n-grams together about length-n+3 times that.
	Scale float32
}

// gramPrefix marks n-gram rows in the vocabulary. The analyzer never emits
// it (terms are letters and digits), so a word and a gram never collide.
const gramPrefix = '#'

// MaxSubwordN is the longest n-gram a model may have rows for.
const MaxSubwordN = 8

// appendGrams calls fn with each n-gram of "<word>" as "#" + gram, in a
// buffer reused between calls (fn must not keep it). Words shorter than n
// runes give none.
func appendGrams(buf []byte, word string, n int, fn func(gram []byte)) []byte {
	if n <= 0 || utf8.RuneCountInString(word) < n {
		return buf
	}
	// Byte offsets of each rune start of "<word>", plus the end.
	var starts [64]int
	offs := starts[:0]
	wrapped := len(word) + 2
	offs = append(offs, 0)
	for i := range word {
		offs = append(offs, i+1)
	}
	offs = append(offs, wrapped-1, wrapped)
	for j := 0; j+n < len(offs); j++ {
		buf = buf[:0]
		buf = append(buf, gramPrefix)
		for k := offs[j]; k < offs[j+n]; k++ {
			switch {
			case k == 0:
				buf = append(buf, '<')
			case k == wrapped-1:
				buf = append(buf, '>')
			default:
				buf = append(buf, word[k-1])
			}
		}
		fn(buf)
	}
	return buf
}

// appendIndexes appends the vocabulary rows of analyzed terms (with
// repeats, so tf is kept): each known word's row, and with sub-words every
// known n-gram of every word, known or not.
func (m *Builtin) appendIndexes(dst []int32, terms []string) []int32 {
	var buf []byte
	for _, t := range terms {
		i, known := m.termIdx[t]
		if known {
			dst = append(dst, i)
		}
		if m.subN == 0 {
			continue
		}
		if known {
			dst = append(dst, m.gramIdx[m.gramPtr[i]:m.gramPtr[i+1]]...)
			continue
		}
		buf = appendGrams(buf, t, m.subN, func(g []byte) {
			if j, ok := m.termIdx[string(g)]; ok {
				dst = append(dst, j)
			}
		})
	}
	return dst
}

// indexGrams precomputes each word row's n-gram rows, so embedding a known
// word costs no string work.
func (m *Builtin) indexGrams() {
	m.gramPtr, m.gramIdx = nil, nil
	if m.subN == 0 {
		return
	}
	m.gramPtr = make([]int32, m.words+1)
	var buf []byte
	for i, w := range m.terms[:m.words] {
		buf = appendGrams(buf, w, m.subN, func(g []byte) {
			if j, ok := m.termIdx[string(g)]; ok {
				m.gramIdx = append(m.gramIdx, j)
			}
		})
		m.gramPtr[i+1] = int32(len(m.gramIdx))
	}
}

// withSubwords returns a copy of m with zero rows for the n-grams of
// texts that cfg selects, weighted by their log-entropy over texts (the
// same weights entropyWeights gives, computed per distinct word rather
// than per n-gram occurrence, so a 20,000-chunk sample needs no string per
// occurrence).
func (m *Builtin) withSubwords(ctx context.Context, texts []string, cfg SubwordConfig) (*Builtin, error) {
	if m.subN != 0 {
		return nil, fmt.Errorf("fine-tune builtin: the model already has %d-gram rows", m.subN)
	}
	if cfg.N < 2 || cfg.N > MaxSubwordN || cfg.Max <= 0 || cfg.Scale <= 0 {
		return nil, fmt.Errorf("fine-tune builtin: sub-words n %d, max %d, scale %g: n must be 2-%d and the others positive",
			cfg.N, cfg.Max, cfg.Scale, MaxSubwordN)
	}
	// Every text as word ids; every distinct word with its n-gram ids.
	wordID := map[string]int32{}
	var wordGrams [][]int32
	gramID := map[string]int32{}
	var gramStr []string
	docs := make([][]int32, len(texts))
	const block = 1024
	terms := make([][]string, block)
	var buf []byte
	for lo := 0; lo < len(texts); lo += block {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("fine-tune builtin: %w", err)
		}
		hi := min(lo+block, len(texts))
		parallelRange(hi-lo, func(a, b int) {
			for i := a; i < b; i++ {
				terms[i] = m.analyzer.Terms(texts[lo+i])
			}
		})
		for i := lo; i < hi; i++ {
			ids := make([]int32, len(terms[i-lo]))
			for k, t := range terms[i-lo] {
				w, ok := wordID[t]
				if !ok {
					w = int32(len(wordGrams))
					wordID[t] = w
					var gs []int32
					buf = appendGrams(buf, t, cfg.N, func(g []byte) {
						j, ok := gramID[string(g)]
						if !ok {
							j = int32(len(gramStr))
							gramID[string(g)] = j
							gramStr = append(gramStr, string(g))
						}
						gs = append(gs, j)
					})
					wordGrams = append(wordGrams, gs)
				}
				ids[k] = w
			}
			docs[i] = ids
		}
	}
	clear(terms)

	// Document frequency of each n-gram.
	df := make([]int32, len(gramStr))
	lastDoc := make([]int32, len(gramStr))
	for i := range lastDoc {
		lastDoc[i] = -1
	}
	for d, ws := range docs {
		for _, w := range ws {
			for _, g := range wordGrams[w] {
				if lastDoc[g] != int32(d) {
					lastDoc[g] = int32(d)
					df[g]++
				}
			}
		}
	}
	var kept []int32
	for g, f := range df {
		if f >= 2 && int(f) <= len(texts)/2 {
			kept = append(kept, int32(g))
		}
	}
	// The most frequent first (ties by the gram, for determinism), then the
	// kept ones in byte order: the rows' order is part of the model's bytes.
	slices.SortFunc(kept, func(x, y int32) int {
		if df[x] != df[y] {
			return int(df[y] - df[x])
		}
		return strings.Compare(gramStr[x], gramStr[y])
	})
	kept = kept[:min(len(kept), cfg.Max)]
	if len(kept) == 0 {
		// Too few texts to share an n-gram: the model stays format 3,
		// readable by the previous release.
		return m, nil
	}
	slices.SortFunc(kept, func(x, y int32) int { return strings.Compare(gramStr[x], gramStr[y]) })

	out := *m
	out.subN = cfg.N
	out.terms = slices.Clone(m.terms[:m.words])
	row := make([]int32, len(gramStr)) // n-gram id -> row - words, or -1
	for i := range row {
		row[i] = -1
	}
	for r, g := range kept {
		row[g] = int32(r)
		out.terms = append(out.terms, gramStr[g])
	}
	out.termIdx = make(map[string]int32, len(out.terms))
	for i, t := range out.terms {
		out.termIdx[t] = int32(i)
	}

	// Log-entropy weights of the kept rows, as entropyWeights computes
	// them: gf first, then sum over texts, in text order, of p ln p.
	gf := make([]float64, len(kept))
	tf := make([]int32, len(kept))
	var touched []int32
	countDoc := func(ws []int32) {
		for _, w := range ws {
			for _, g := range wordGrams[w] {
				if r := row[g]; r >= 0 {
					if tf[r] == 0 {
						touched = append(touched, r)
					}
					tf[r]++
				}
			}
		}
	}
	for _, ws := range docs {
		countDoc(ws)
		for _, r := range touched {
			gf[r] += float64(tf[r])
			tf[r] = 0
		}
		touched = touched[:0]
	}
	ent := make([]float64, len(kept))
	for _, ws := range docs {
		countDoc(ws)
		for _, r := range touched {
			p := float64(tf[r]) / gf[r]
			ent[r] += p * math.Log(p)
			tf[r] = 0
		}
		touched = touched[:0]
	}
	logN := math.Log(float64(max(len(docs), 2)))
	out.idf = slices.Clone(m.idf[:m.words])
	for r := range kept {
		out.idf = append(out.idf, float32(math.Max(1+ent[r]/logN, 1e-3))*cfg.Scale)
	}
	out.proj = append(slices.Clone(m.proj[:m.words*m.dims]), make([]float32, len(kept)*m.dims)...)
	out.indexGrams()
	return &out, nil
}
