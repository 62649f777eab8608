// Package retrievaleval measures retrieval quality on BEIR-format data sets: a
// loader for corpus/queries/qrels and the standard trec_eval metrics
// (nDCG@k with graded gains, Recall@k), computed at document level.
package retrievaleval

import (
	"math"
	"sort"
)

// Qrels maps query id -> document id -> graded relevance.
type Qrels map[string]map[string]int

// Run maps query id -> ranked document ids, best first. Ids may repeat when
// several chunks of one document were retrieved; metrics dedupe them.
type Run map[string][]string

// Dedupe keeps the first occurrence of every id: a document counts at the
// rank of its best chunk, as document-level evaluation requires.
func Dedupe(ranked []string) []string {
	seen := make(map[string]struct{}, len(ranked))
	out := make([]string, 0, len(ranked))
	for _, id := range ranked {
		if _, ok := seen[id]; ok {
			continue
		}
		seen[id] = struct{}{}
		out = append(out, id)
	}
	return out
}

// NDCG is trec_eval's ndcg_cut: DCG = sum_{i=1..k} rel_i / log2(i+1) with
// linear graded gains, normalised by the DCG of the ideal ordering of all
// judged documents. ranked must already be deduplicated. A query with no
// positive judgement scores 0.
func NDCG(ranked []string, rels map[string]int, k int) float64 {
	dcg := 0.0
	for i, id := range ranked {
		if i >= k {
			break
		}
		if g := rels[id]; g > 0 {
			dcg += float64(g) / math.Log2(float64(i+2))
		}
	}
	gains := make([]int, 0, len(rels))
	for _, g := range rels {
		if g > 0 {
			gains = append(gains, g)
		}
	}
	sort.Sort(sort.Reverse(sort.IntSlice(gains)))
	idcg := 0.0
	for i, g := range gains {
		if i >= k {
			break
		}
		idcg += float64(g) / math.Log2(float64(i+2))
	}
	if idcg == 0 {
		return 0
	}
	return dcg / idcg
}

// Recall is the fraction of relevant (gain > 0) documents found in the top k
// of a deduplicated ranking.
func Recall(ranked []string, rels map[string]int, k int) float64 {
	total := 0
	for _, g := range rels {
		if g > 0 {
			total++
		}
	}
	if total == 0 {
		return 0
	}
	found := 0
	for i, id := range ranked {
		if i >= k {
			break
		}
		if rels[id] > 0 {
			found++
		}
	}
	return float64(found) / float64(total)
}

// Metrics are the means over judged queries.
type Metrics struct {
	NDCG10    float64
	Recall100 float64
	Queries   int
}

// Evaluate averages nDCG@10 and Recall@100 over every query in qrels, as
// BEIR does: a judged query missing from the run scores 0, unjudged queries
// in the run are ignored.
func Evaluate(run Run, qrels Qrels) Metrics {
	var m Metrics
	for qid, rels := range qrels {
		ranked := Dedupe(run[qid])
		m.NDCG10 += NDCG(ranked, rels, 10)
		m.Recall100 += Recall(ranked, rels, 100)
		m.Queries++
	}
	if m.Queries > 0 {
		m.NDCG10 /= float64(m.Queries)
		m.Recall100 /= float64(m.Queries)
	}
	return m
}

// PairedNDCG10 compares two runs query by query: the mean difference of
// nDCG@10 (a - b) over the judged queries and its standard error
// (standard deviation of the per-query differences / sqrt(n)).
func PairedNDCG10(a, b Run, qrels Qrels) (diff, stderr float64) {
	var ds []float64
	for qid, rels := range qrels {
		ds = append(ds, NDCG(Dedupe(a[qid]), rels, 10)-NDCG(Dedupe(b[qid]), rels, 10))
	}
	n := float64(len(ds))
	if n < 2 {
		return 0, 0
	}
	for _, d := range ds {
		diff += d
	}
	diff /= n
	var ss float64
	for _, d := range ds {
		ss += (d - diff) * (d - diff)
	}
	return diff, math.Sqrt(ss/(n-1)) / math.Sqrt(n)
}
