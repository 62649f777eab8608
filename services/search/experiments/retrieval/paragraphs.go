package retrieval

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"
	"unicode"

	"github.com/bmcis/knowledge/services/search/internal/embed"
	"github.com/bmcis/knowledge/services/search/internal/eval"
)

// ParagraphOptions configure the paragraph-query set built from a BEIR
// split (BuildParagraphs).
type ParagraphOptions struct {
	// MinChars and MaxChars bound a passage's length in bytes (300 and
	// 500 when zero): what a user pastes as a paragraph.
	MinChars, MaxChars int
	// Seed picks the passage of each source document; the choice for one
	// document depends on the seed and its id only, never on the others.
	Seed uint64
	// OverlapWords is the shingle length (in words) that counts as the
	// passage appearing verbatim in another document (12 when zero).
	OverlapWords int
}

func (o ParagraphOptions) withDefaults() ParagraphOptions {
	if o.MinChars <= 0 {
		o.MinChars = 300
	}
	if o.MaxChars <= 0 {
		o.MaxChars = 500
	}
	if o.OverlapWords <= 0 {
		o.OverlapWords = 12
	}
	return o
}

// ParagraphSet is a query set of passages: a Dataset over the same corpus,
// and for every query the documents its results must not contain.
type ParagraphSet struct {
	*eval.Dataset
	// Exclude maps a query id to the documents removed from its results
	// before fusion (the passage's source and any document holding a
	// verbatim span of it): the retrievers answer as if they were absent
	// from the collection.
	Exclude map[string]map[string]bool
	// Source maps a query id to the document its passage was cut from.
	Source map[string]string
	// DroppedJudged counts judgements removed because the judged document
	// holds a verbatim span of the passage; DroppedQueries counts source
	// documents left without a query (no passage in range, or no
	// judgement left).
	DroppedJudged, DroppedQueries int
}

// BuildParagraphs turns the judged documents of ds into paragraph-long
// queries. Two documents are on the same topic when one query (a SciFact
// claim) judges both relevant. Every judged document with at least one
// such neighbour gives one query: a passage of its text (whole sentences
// when some run of them fits the length range, else words cut at the
// range), judged by its neighbours at the grade the shared query gave
// them (the highest if several). The source document itself is never
// judged and is excluded from the results, as is any document sharing a
// run of OverlapWords words with the passage; such a document is also
// dropped from the judgements, so no judged document contains the query
// text. Query ids are "p" + the source id.
func BuildParagraphs(ds *eval.Dataset, opts ParagraphOptions) (*ParagraphSet, error) {
	opts = opts.withDefaults()
	if opts.MinChars > opts.MaxChars {
		return nil, fmt.Errorf("paragraph length range %d..%d is empty", opts.MinChars, opts.MaxChars)
	}
	docs := make(map[string]*eval.Document, len(ds.Corpus))
	for i := range ds.Corpus {
		docs[ds.Corpus[i].ID] = &ds.Corpus[i]
	}
	// Neighbours: documents judged relevant to a query that also judges
	// the source relevant, at the best grade that query gave them.
	neighbours := map[string]map[string]int{}
	for _, rels := range ds.Qrels {
		for src, g := range rels {
			if g <= 0 {
				continue
			}
			for other, og := range rels {
				if other == src || og <= 0 {
					continue
				}
				if neighbours[src] == nil {
					neighbours[src] = map[string]int{}
				}
				neighbours[src][other] = max(neighbours[src][other], og)
			}
		}
	}
	sources := make([]string, 0, len(neighbours))
	for id := range neighbours {
		if _, ok := docs[id]; ok {
			sources = append(sources, id)
		}
	}
	slices.Sort(sources)

	shingles := newShingleIndex(ds.Corpus, opts.OverlapWords)
	out := &ParagraphSet{
		Dataset: &eval.Dataset{Corpus: ds.Corpus, Qrels: eval.Qrels{}},
		Exclude: map[string]map[string]bool{},
		Source:  map[string]string{},
	}
	for _, src := range sources {
		passage, ok := pickPassage(docs[src].Text, opts, src)
		if !ok {
			out.DroppedQueries++
			continue
		}
		exclude := shingles.holdersOf(passage)
		exclude[src] = true
		rels := map[string]int{}
		for id, g := range neighbours[src] {
			if exclude[id] {
				out.DroppedJudged++
				continue
			}
			rels[id] = g
		}
		if len(rels) == 0 {
			out.DroppedQueries++
			continue
		}
		qid := "p" + src
		out.Queries = append(out.Queries, eval.Query{ID: qid, Text: passage})
		out.Qrels[qid] = rels
		out.Exclude[qid] = exclude
		out.Source[qid] = src
	}
	return out, nil
}

// pickPassage draws one passage of text within the length range, or
// reports that none fits.
func pickPassage(text string, opts ParagraphOptions, docID string) (string, bool) {
	sents := embed.SplitSentences(strings.TrimSpace(text))
	for i := range sents {
		sents[i] = strings.TrimSpace(sents[i])
	}
	var whole, cut []string
	for i := range sents {
		// The longest run of whole sentences from i that fits.
		run, best := "", ""
		for j := i; j < len(sents); j++ {
			run = joinSpace(run, sents[j])
			if len(run) > opts.MaxChars {
				break
			}
			if len(run) >= opts.MinChars {
				best = run
			}
		}
		if best != "" {
			whole = append(whole, best)
			continue
		}
		// No run of whole sentences fits: words from sentence i up to the
		// maximum length.
		p := ""
		for _, w := range strings.Fields(strings.Join(sents[i:], " ")) {
			next := joinSpace(p, w)
			if len(next) > opts.MaxChars {
				break
			}
			p = next
		}
		if len(p) >= opts.MinChars {
			cut = append(cut, p)
		}
	}
	pool := whole
	if len(pool) == 0 {
		pool = cut
	}
	if len(pool) == 0 {
		return "", false
	}
	h := fnv.New64a()
	h.Write([]byte(docID))
	rng := rand.New(rand.NewPCG(opts.Seed, h.Sum64()))
	return pool[rng.IntN(len(pool))], true
}

func joinSpace(a, b string) string {
	if a == "" {
		return b
	}
	return a + " " + b
}

// shingleIndex finds the documents that share a run of n words (lower
// case, letters and digits only) with a text.
type shingleIndex struct {
	n       int
	holders map[uint64][]string
}

func newShingleIndex(corpus []eval.Document, n int) *shingleIndex {
	ix := &shingleIndex{n: n, holders: map[uint64][]string{}}
	for _, d := range corpus {
		seen := map[uint64]bool{}
		for _, s := range shingleHashes(d.Title+" "+d.Text, n) {
			if !seen[s] {
				seen[s] = true
				ix.holders[s] = append(ix.holders[s], d.ID)
			}
		}
	}
	return ix
}

func (ix *shingleIndex) holdersOf(text string) map[string]bool {
	out := map[string]bool{}
	for _, s := range shingleHashes(text, ix.n) {
		for _, id := range ix.holders[s] {
			out[id] = true
		}
	}
	return out
}

func shingleHashes(text string, n int) []uint64 {
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	var out []uint64
	for i := 0; i+n <= len(words); i++ {
		h := fnv.New64a()
		for _, w := range words[i : i+n] {
			h.Write([]byte(w))
			h.Write([]byte{0})
		}
		out = append(out, h.Sum64())
	}
	return out
}
