package retrievaleval

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Hand-computed example: judged {d1:2, d2:1, d3:1}; run d4, d1, d1, d3, d5.
// After dedupe: d4, d1, d3, d5.
//
//	DCG@10  = 2/log2(3) + 1/log2(4)             = 1.761859507
//	IDCG@10 = 2/log2(2) + 1/log2(3) + 1/log2(4) = 3.130929754
//	nDCG@10 = 0.562727255
//	nDCG@2  = (2/log2(3)) / (2 + 1/log2(3))     = 0.479624933
//	Recall@100 = 2/3, Recall@2 = 1/3
func TestMetricsHandComputed(t *testing.T) {
	rels := map[string]int{"d1": 2, "d2": 1, "d3": 1}
	ranked := Dedupe([]string{"d4", "d1", "d1", "d3", "d5"})
	require.Equal(t, []string{"d4", "d1", "d3", "d5"}, ranked)

	tests := []struct {
		name string
		got  float64
		want float64
	}{
		{"ndcg@10", NDCG(ranked, rels, 10), 0.562727255},
		{"ndcg@2", NDCG(ranked, rels, 2), 0.479624933},
		{"ndcg perfect", NDCG([]string{"d1", "d2", "d3"}, rels, 10), 1},
		{"ndcg nothing relevant", NDCG([]string{"x"}, rels, 10), 0},
		{"ndcg no judgements", NDCG([]string{"x"}, map[string]int{"x": 0}, 10), 0},
		{"recall@100", Recall(ranked, rels, 100), 2.0 / 3},
		{"recall@2", Recall(ranked, rels, 2), 1.0 / 3},
		{"recall empty run", Recall(nil, rels, 100), 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.InDelta(t, tc.want, tc.got, 1e-9)
		})
	}
}

func TestEvaluateAveragesJudgedQueries(t *testing.T) {
	qrels := Qrels{
		"q1": {"d1": 2, "d2": 1, "d3": 1},
		"q2": {"d9": 1},
	}
	run := Run{
		"q1":       {"d4", "d1", "d1", "d3", "d5"},
		"unjudged": {"d9"},
		// q2 missing from the run: counts as 0.
	}
	m := Evaluate(run, qrels)
	require.Equal(t, 2, m.Queries)
	require.InDelta(t, 0.562727255/2, m.NDCG10, 1e-9)
	require.InDelta(t, (2.0/3)/2, m.Recall100, 1e-9)
}

func TestReadQrels(t *testing.T) {
	q, err := ReadQrels(strings.NewReader("query-id\tcorpus-id\tscore\n1\tA\t1\n1\tB\t2\n2\tC\t1\n"))
	require.NoError(t, err)
	require.Equal(t, Qrels{"1": {"A": 1, "B": 2}, "2": {"C": 1}}, q)

	_, err = ReadQrels(strings.NewReader("1\tA\n"))
	require.ErrorContains(t, err, "line 1")
	_, err = ReadQrels(strings.NewReader("h\th\th\n1\tA\tx\n"))
	require.ErrorContains(t, err, "line 2")
}

func TestLoadBEIR(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "qrels"), 0o755))
	write := func(name, body string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}
	write("corpus.jsonl", `{"_id":"d1","title":"T1","text":"one"}`+"\n"+`{"_id":"d2","title":"","text":"two"}`+"\n")
	write("queries.jsonl", `{"_id":"q1","text":"first"}`+"\n"+`{"_id":"q2","text":"unjudged"}`+"\n")
	write("qrels/train.tsv", "query-id\tcorpus-id\tscore\nq1\td2\t1\n")

	ds, err := LoadBEIR(dir, "train")
	require.NoError(t, err)
	require.Equal(t, []Document{{ID: "d1", Title: "T1", Text: "one"}, {ID: "d2", Text: "two"}}, ds.Corpus)
	require.Equal(t, []Query{{ID: "q1", Text: "first"}}, ds.Queries)

	_, err = LoadBEIR(filepath.Join(dir, "missing"), "train")
	require.ErrorContains(t, err, "load corpus")
	write("corpus.jsonl", "{bad json\n")
	_, err = LoadBEIR(dir, "train")
	require.ErrorContains(t, err, "corpus.jsonl:1")
}

// Two queries by hand: a ranks q1's relevant document first (nDCG 1), b
// second (1/log2(3) = 0.6309); both rank q2's first. Differences 0.3691
// and 0: mean 0.18454, standard deviation 0.26099, s.e. 0.18454.
func TestPairedNDCG10HandComputed(t *testing.T) {
	qrels := Qrels{"q1": {"d1": 1}, "q2": {"d2": 1}}
	a := Run{"q1": {"d1", "x"}, "q2": {"d2"}}
	b := Run{"q1": {"x", "d1"}, "q2": {"d2"}}
	diff, se := PairedNDCG10(a, b, qrels)
	require.InDelta(t, (1-1/math.Log2(3))/2, diff, 1e-12)
	require.InDelta(t, (1-1/math.Log2(3))/2, se, 1e-12)
	diff, se = PairedNDCG10(a, a, qrels)
	require.Zero(t, diff)
	require.Zero(t, se)
}
