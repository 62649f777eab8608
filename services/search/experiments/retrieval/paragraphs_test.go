package retrieval

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/services/search/internal/bm25"
	"github.com/bmcis/knowledge/services/search/internal/embed"
	"github.com/bmcis/knowledge/services/search/internal/eval"
	"github.com/bmcis/knowledge/services/search/internal/fusion"
)

// sentence makes a sentence of about n bytes whose words belong to tag
// alone ("Tag tag0 tag1 ... tagK."), so documents share no words unless
// one copies another's text.
func sentence(tag string, n int) string {
	var b strings.Builder
	b.WriteString(strings.ToUpper(tag[:1]) + tag[1:])
	for i := 0; b.Len() < n-1; i++ {
		fmt.Fprintf(&b, " %s%d", tag, i)
	}
	return b.String() + "."
}

// tinyParagraphCorpus is a hand-made corpus whose paragraph set is worked
// out by hand in TestBuildParagraphs.
func tinyParagraphCorpus() *eval.Dataset {
	// "a": two sentences, the first 300..500 bytes and both together over
	// 500, the second under 300: the only passage is the first sentence.
	a := sentence("alpha", 320) + " " + sentence("alphb", 250)
	// "b": one 900-byte sentence: no whole sentence fits, so the passage
	// is its words up to 500 bytes.
	b := sentence("bravo", 900)
	// "c": shorter than any passage; it can be judged but gives no query.
	c := sentence("charlie", 200)
	// "e" and "f" are the same text: every passage of one is verbatim in
	// the other, their only neighbour.
	e := sentence("echo", 330) + " " + sentence("echp", 330)
	// "h" holds all of "g"; "i" is on their topic with its own words.
	g := sentence("golf", 350) + " " + sentence("golg", 200)
	i := sentence("india", 400) + " " + sentence("indib", 380)
	return &eval.Dataset{
		Corpus: []eval.Document{
			{ID: "a", Title: "A", Text: a},
			{ID: "b", Title: "B", Text: b},
			{ID: "c", Title: "C", Text: c},
			{ID: "d", Title: "D", Text: sentence("delta", 400)},
			{ID: "e", Title: "E", Text: e},
			{ID: "f", Title: "F", Text: e},
			{ID: "g", Title: "G", Text: g},
			{ID: "h", Title: "H", Text: g + " " + sentence("hotel", 200)},
			{ID: "i", Title: "I", Text: i},
		},
		Qrels: eval.Qrels{
			"q1": {"a": 1, "b": 1},
			"q2": {"a": 1, "c": 2},
			"q3": {"d": 1},
			"q4": {"e": 1, "f": 1},
			"q5": {"g": 1, "h": 1, "i": 1},
		},
	}
}

func TestBuildParagraphs(t *testing.T) {
	ds := tinyParagraphCorpus()
	text := map[string]string{}
	for _, d := range ds.Corpus {
		text[d.ID] = d.Text
	}
	set, err := BuildParagraphs(ds, ParagraphOptions{Seed: 1})
	require.NoError(t, err)

	// Worked out by hand: "a" is judged for q1 with "b" and for q2 with
	// "c" (grade 2); "c" is too short to give a query; "d" has no
	// neighbour; "e" and "f" lose their only neighbour to the verbatim
	// check; "g" and "h" each lose the other but keep "i".
	require.Equal(t, eval.Qrels{
		"pa": {"b": 1, "c": 2},
		"pb": {"a": 1},
		"pg": {"i": 1},
		"ph": {"i": 1},
		"pi": {"g": 1, "h": 1},
	}, set.Qrels)
	require.Equal(t, map[string]map[string]bool{
		"pa": {"a": true},
		"pb": {"b": true},
		"pg": {"g": true, "h": true},
		"ph": {"g": true, "h": true},
		"pi": {"i": true},
	}, set.Exclude)
	require.Equal(t, 3, set.DroppedQueries, "c (too short), e and f (no judgement left)")
	require.Equal(t, 4, set.DroppedJudged, "e<->f and g<->h")

	passages := map[string]string{}
	for _, q := range set.Queries {
		passages[q.ID] = q.Text
		src := set.Source[q.ID]
		require.Equal(t, "p"+src, q.ID)
		require.GreaterOrEqual(t, len(q.Text), 300, q.ID)
		require.LessOrEqual(t, len(q.Text), 500, q.ID)
		require.Contains(t, text[src], q.Text, "a passage is a span of its source")
		require.True(t, set.Exclude[q.ID][src], "the source is excluded")
		require.NotContains(t, set.Qrels[q.ID], src, "the source is never judged")
		for judged := range set.Qrels[q.ID] {
			require.NotContains(t, text[judged], q.Text, "%s: judged %s holds the query", q.ID, judged)
		}
	}
	require.Len(t, passages, 5)
	require.Equal(t, embed.SplitSentences(text["a"])[0], passages["pa"], "a's only passage is its first sentence")
	// b's passage: the longest run of its words within 500 bytes.
	words := strings.Fields(text["b"])
	want := ""
	for _, w := range words {
		if len(joinSpace(want, w)) > 500 {
			break
		}
		want = joinSpace(want, w)
	}
	require.Equal(t, want, passages["pb"])

	// The seed picks among a document's passages; the same seed, the same
	// set.
	again, err := BuildParagraphs(ds, ParagraphOptions{Seed: 1})
	require.NoError(t, err)
	require.Equal(t, set.Queries, again.Queries)
	seen := map[string]bool{}
	for seed := uint64(1); seed <= 20; seed++ {
		s, err := BuildParagraphs(ds, ParagraphOptions{Seed: seed})
		require.NoError(t, err)
		for _, q := range s.Queries {
			if q.ID == "pi" {
				seen[q.Text] = true
			}
		}
	}
	// i's sentences are 400 and 380 bytes: either one alone.
	require.Equal(t, map[string]bool{
		embed.SplitSentences(text["i"])[0]: true,
		embed.SplitSentences(text["i"])[1]: true,
	}, seen)

	_, err = BuildParagraphs(ds, ParagraphOptions{MinChars: 600, MaxChars: 500})
	require.Error(t, err)
}

// TestRunExcludingDropsSource checks the harness side of self-match
// removal on the tiny corpus: a passage's own document, BM25's best match
// for it, is absent from its results.
func TestRunExcludingDropsSource(t *testing.T) {
	ds := tinyParagraphCorpus()
	set, err := BuildParagraphs(ds, ParagraphOptions{Seed: 1})
	require.NoError(t, err)
	cfg := DefaultConfig()
	cfg.Embed.Dims = 0 // BM25 only: a model does not train on nine texts
	ctx := context.Background()
	p, err := Build(ctx, set.Dataset, cfg)
	require.NoError(t, err)

	plain, err := p.Run(ctx, set.Dataset, cfg.Fusion)
	require.NoError(t, err)
	excluded, err := p.RunExcluding(ctx, set.Dataset, cfg.Fusion, set.Exclude)
	require.NoError(t, err)
	for _, q := range set.Queries {
		src := set.Source[q.ID]
		require.Equal(t, src, plain.BM25Run[q.ID][0], "without exclusion the source ranks first")
		for _, doc := range excluded.BM25Run[q.ID] {
			require.False(t, set.Exclude[q.ID][doc], "%s: excluded %s returned", q.ID, doc)
		}
	}
	// "pg": everything but g and h, the only documents sharing its words,
	// scores 0 and is not returned.
	require.Empty(t, excluded.BM25Run["pg"])
}

// paragraphSeeds are the passage draws the paragraph figures average.
var paragraphSeeds = []uint64{1, 2, 3}

// loadParagraphSets builds the paragraph sets of paragraphSeeds from the
// SciFact training split.
func loadParagraphSets(t *testing.T, ds *eval.Dataset) []*ParagraphSet {
	t.Helper()
	var sets []*ParagraphSet
	for _, seed := range paragraphSeeds {
		set, err := BuildParagraphs(ds, ParagraphOptions{Seed: seed})
		require.NoError(t, err)
		chars := 0
		for _, q := range set.Queries {
			chars += len(q.Text)
		}
		t.Logf("paragraph set seed %d: %d queries (mean %d bytes), %d judgements, %d judgements and %d sources dropped",
			seed, len(set.Queries), chars/max(1, len(set.Queries)), countJudged(set.Qrels), set.DroppedJudged, set.DroppedQueries)
		sets = append(sets, set)
	}
	return sets
}

func countJudged(q eval.Qrels) int {
	n := 0
	for _, rels := range q {
		n += len(rels)
	}
	return n
}

// runParagraphs measures p on every set with fusion f and returns the
// per-seed results and their mean.
func runParagraphs(t *testing.T, p *Pipeline, sets []*ParagraphSet, f Fusion) ([]Result, Result) {
	t.Helper()
	var rs []Result
	var mean Result
	for i, set := range sets {
		r, err := p.RunExcluding(context.Background(), set.Dataset, f, set.Exclude)
		require.NoError(t, err)
		r.Config = fmt.Sprintf("%s paragraphs seed %d", r.Config, paragraphSeeds[i])
		rs = append(rs, r)
		for _, m := range []struct{ dst, src *eval.Metrics }{{&mean.BM25, &r.BM25}, {&mean.Vector, &r.Vector}, {&mean.Hybrid, &r.Hybrid}} {
			m.dst.NDCG10 += m.src.NDCG10 / float64(len(sets))
			m.dst.Recall100 += m.src.Recall100 / float64(len(sets))
			m.dst.Queries += m.src.Queries
		}
	}
	mean.Config, mean.Chunks = rs[0].Config[:len(rs[0].Config)-len(" seed 1")]+" mean", rs[0].Chunks
	return rs, mean
}

// TestSciFactParagraphs measures the shipped pipeline on paragraph-long
// queries (BuildParagraphs over the SciFact training split) beside the
// claims themselves:
//
//	BMCIS_EVAL_PARA=1 go test ./experiments/retrieval -run 'TestSciFactParagraphs$' -v
func TestSciFactParagraphs(t *testing.T) {
	if os.Getenv("BMCIS_EVAL_PARA") == "" {
		t.Skip("set BMCIS_EVAL_PARA=1")
	}
	ds := loadSciFact(t)
	sets := loadParagraphSets(t, ds)
	ctx := context.Background()
	cfg := DefaultConfig()
	p, err := Build(ctx, ds, cfg)
	require.NoError(t, err)
	claims, err := p.Run(ctx, ds, cfg.Fusion)
	require.NoError(t, err)
	claims.Config = "default claims"
	rs, mean := runParagraphs(t, p, sets, cfg.Fusion)
	t.Logf("\n%s", FormatResults(append([]Result{claims}, append(rs, mean)...)))
	for i, r := range rs {
		d, se := eval.PairedNDCG10(r.HybridRun, r.BM25Run, sets[i].Qrels)
		t.Logf("seed %d: hybrid - BM25 nDCG@10 %+.4f ± %.4f (paired, %d queries)", paragraphSeeds[i], d, se, len(sets[i].Queries))
	}
	// Issue 33's targets on paragraphs (measured 2026-11-27: BM25 0.4839,
	// vector 0.5187, hybrid 0.5257) and the claims' figures held.
	require.GreaterOrEqual(t, mean.Hybrid.NDCG10, mean.BM25.NDCG10+0.03)
	require.GreaterOrEqual(t, mean.Vector.NDCG10, mean.BM25.NDCG10)
	require.GreaterOrEqual(t, claims.Hybrid.NDCG10, 0.7239-0.002)
	require.GreaterOrEqual(t, claims.Hybrid.Recall100, 0.9584-0.002)
}

// TestParagraphFusionSweep measures the convex fusion's BM25 share on the
// paragraph sets and on the claims, from one build, with the distribution
// of analyzed query lengths a length-dependent share would key on:
//
//	BMCIS_EVAL_PARA=sweep go test ./experiments/retrieval -run 'TestParagraphFusionSweep$' -v
func TestParagraphFusionSweep(t *testing.T) {
	if os.Getenv("BMCIS_EVAL_PARA") != "sweep" {
		t.Skip("set BMCIS_EVAL_PARA=sweep")
	}
	ds := loadSciFact(t)
	sets := loadParagraphSets(t, ds)
	ctx := context.Background()
	cfg := DefaultConfig()
	p, err := Build(ctx, ds, cfg)
	require.NoError(t, err)
	lengths := func(qs []eval.Query) string {
		var n []int
		for _, q := range qs {
			n = append(n, len(p.analyzer.Terms(q.Text)))
		}
		slices.Sort(n)
		return fmt.Sprintf("min %d, p10 %d, median %d, p90 %d, max %d", n[0], n[len(n)/10], n[len(n)/2], n[len(n)*9/10], n[len(n)-1])
	}
	t.Logf("analyzed terms: claims %s; paragraphs (seed 1) %s", lengths(ds.Queries), lengths(sets[0].Queries))
	var table []Result
	for _, alpha := range []float64{0.2, 0.3, 0.4, 0.5, 0.6, 0.7} {
		f := cfg.Fusion
		f.RRF.Alpha = alpha
		claims, err := p.Run(ctx, ds, f)
		require.NoError(t, err)
		claims.Config = fmt.Sprintf("share %.2f claims", alpha)
		_, mean := runParagraphs(t, p, sets, f)
		mean.Config = fmt.Sprintf("share %.2f paragraphs mean", alpha)
		table = append(table, claims, mean)
	}
	t.Logf("\n%s", FormatResults(table))
}

// TestParagraphLengthRules measures fusion shares that fall with the
// query's analyzed length (claims: 3-25 terms, paragraphs 27-71), paired
// against the shipped constant share, and BM25 with long queries pruned
// to their rarest terms (quality and time):
//
//	BMCIS_EVAL_PARA=length go test ./experiments/retrieval -run 'TestParagraphLengthRules$' -v
func TestParagraphLengthRules(t *testing.T) {
	if os.Getenv("BMCIS_EVAL_PARA") != "length" {
		t.Skip("set BMCIS_EVAL_PARA=length")
	}
	ds := loadSciFact(t)
	sets := loadParagraphSets(t, ds)
	ctx := context.Background()
	cfg := DefaultConfig()
	p, err := Build(ctx, ds, cfg)
	require.NoError(t, err)

	// share(n): from hi at n <= from terms down to lo at n >= to, linear.
	ramp := func(hi, lo float64, from, to int) func(int) float64 {
		return func(n int) float64 {
			switch {
			case n <= from:
				return hi
			case n >= to:
				return lo
			}
			return hi + (lo-hi)*float64(n-from)/float64(to-from)
		}
	}
	rules := []struct {
		name  string
		share func(int) float64
	}{
		{"constant 0.6 (shipped)", ramp(0.6, 0.6, 0, 1)},
		{"0.6 to 0.35 over 20..40 terms", ramp(0.6, 0.35, 20, 40)},
		{"0.6 to 0.3 over 25..40 terms", ramp(0.6, 0.3, 25, 40)},
		{"0.6 to 0.4 over 16..48 terms", ramp(0.6, 0.4, 16, 48)},
	}
	run := func(qs *eval.Dataset, exclude map[string]map[string]bool, share func(int) float64) eval.Run {
		cands, _, err := p.candidatesExcluding(ctx, qs, cfg.Candidates, exclude)
		require.NoError(t, err)
		out := eval.Run{}
		for _, q := range qs.Queries {
			qc := cands[q.ID]
			fused := fusion.Convex(qc.bm, qc.vecFB, share(len(p.analyzer.Terms(q.Text))), 0)
			out[q.ID] = p.docs(len(fused), func(i int) int64 { return fused[i].ChunkID })
		}
		return out
	}
	var base []eval.Run
	for ri, r := range rules {
		claimsRun := run(ds, nil, r.share)
		cm := eval.Evaluate(claimsRun, ds.Qrels)
		line := fmt.Sprintf("%-32s claims %.4f / %.4f; paragraphs", r.name, cm.NDCG10, cm.Recall100)
		var meanN, meanR float64
		for i, set := range sets {
			pr := run(set.Dataset, set.Exclude, r.share)
			m := eval.Evaluate(pr, set.Qrels)
			meanN += m.NDCG10 / float64(len(sets))
			meanR += m.Recall100 / float64(len(sets))
			if ri == 0 {
				base = append(base, pr)
				line += fmt.Sprintf(" %.4f", m.NDCG10)
				continue
			}
			d, se := eval.PairedNDCG10(pr, base[i], set.Qrels)
			line += fmt.Sprintf(" %.4f (%+.4f ± %.4f)", m.NDCG10, d, se)
		}
		t.Logf("%s; mean %.4f / %.4f", line, meanN, meanR)
	}

	// BM25 with a long query cut to its top terms by IDF.
	df := map[string]int{}
	p.Index().EachTerm(func(term string, n int) { df[term] = n })
	prune := func(terms []string, keep int) []string {
		if keep <= 0 {
			return terms
		}
		distinct := slices.Compact(slices.SortedFunc(slices.Values(slices.Clone(terms)), strings.Compare))
		if len(distinct) <= keep {
			return terms
		}
		slices.SortStableFunc(distinct, func(a, b string) int { return df[a] - df[b] })
		kept := map[string]bool{}
		for _, t := range distinct[:keep] {
			kept[t] = true
		}
		var out []string
		for _, t := range terms {
			if kept[t] {
				out = append(out, t)
			}
		}
		return out
	}
	for _, keep := range []int{0, 16, 24, 32} {
		line := fmt.Sprintf("BM25, query cut to %2d rarest terms:", keep)
		for i, set := range sets {
			out := eval.Run{}
			var spent time.Duration
			for _, q := range set.Queries {
				terms := prune(p.analyzer.Terms(q.Text), keep)
				t0 := time.Now()
				hits := p.Index().Search(terms, bm25.SearchOptions{K: cfg.Candidates + 5})
				spent += time.Since(t0)
				var docs []string
				for _, h := range hits {
					if d := p.DocOf(h.ChunkID); !set.Exclude[q.ID][d] {
						docs = append(docs, d)
					}
				}
				out[q.ID] = docs
			}
			m := eval.Evaluate(out, set.Qrels)
			line += fmt.Sprintf(" seed %d %.4f / %.4f (%v a query)", paragraphSeeds[i], m.NDCG10, m.Recall100, spent/time.Duration(len(set.Queries)))
		}
		t.Log(line)
	}
}
