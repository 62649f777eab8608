package embed

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/bmcis/knowledge/services/search/internal/analysis"
	"github.com/stretchr/testify/require"
)

// topicCorpus builds documents from three disjoint topic vocabularies so
// that a working LSA model must place same-topic texts close together.
func topicCorpus(n int, seed uint64) []string {
	topics := [][]string{
		{"tumor", "cancer", "chemotherapy", "oncology", "metastasis", "carcinoma", "radiation", "biopsy"},
		{"neuron", "synapse", "cortex", "dopamine", "axon", "hippocampus", "glia", "dendrite"},
		{"bacteria", "antibiotic", "infection", "pathogen", "resistance", "microbe", "vaccine", "virulence"},
	}
	rng := rand.New(rand.NewPCG(seed, 99))
	docs := make([]string, n)
	for i := range docs {
		words := topics[i%3]
		var b bytes.Buffer
		for w := 0; w < 30; w++ {
			fmt.Fprintf(&b, "%s ", words[rng.IntN(len(words))])
		}
		b.WriteString("study results patients")
		docs[i] = b.String()
	}
	return docs
}

func trainSmall(t testing.TB, docs []string, mod func(*BuiltinConfig)) *Builtin {
	t.Helper()
	cfg := DefaultBuiltinConfig()
	cfg.Dims = 8
	if mod != nil {
		mod(&cfg)
	}
	m, err := TrainBuiltin(context.Background(), analysis.NewEnglish(), docs, cfg)
	require.NoError(t, err)
	return m
}

func TestBuiltinSeparatesTopics(t *testing.T) {
	for _, w := range []Weighting{WeightTFIDF, WeightLogEntropy} {
		t.Run(fmt.Sprintf("weighting=%d", w), func(t *testing.T) {
			m := trainSmall(t, topicCorpus(90, 1), func(c *BuiltinConfig) { c.Weighting = w; c.Dims = 3 })
			require.Equal(t, 3, m.Dimensions())
			vecs, err := m.Embed(context.Background(), []string{
				"cancer tumor chemotherapy", "metastasis of carcinoma",
				"dopamine neuron synapse", "bacteria antibiotic resistance",
			})
			require.NoError(t, err)
			for _, v := range vecs {
				require.Len(t, v, 3)
				require.InDelta(t, 1, Dot(v, v), 1e-5)
			}
			same := Dot(vecs[0], vecs[1])
			require.Greater(t, same, Dot(vecs[0], vecs[2])+0.3)
			require.Greater(t, same, Dot(vecs[0], vecs[3])+0.3)
		})
	}
}

func TestBuiltinUnknownTextIsZero(t *testing.T) {
	m := trainSmall(t, topicCorpus(30, 1), nil)
	v, err := m.Embed(context.Background(), []string{"zzzz qqqq", ""})
	require.NoError(t, err)
	for _, x := range v[0] {
		require.Zero(t, x)
	}
	require.Len(t, v[1], 8)
}

func TestBuiltinDeterministicAndRoundTrip(t *testing.T) {
	docs := topicCorpus(200, 2) // >64 texts exercises the parallel path
	a := trainSmall(t, docs, nil)
	b := trainSmall(t, docs, nil)
	ab, err := a.MarshalBinary()
	require.NoError(t, err)
	bb, err := b.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, ab, bb, "same corpus + seed must give the same bytes")
	require.Equal(t, a.ModelID(), b.ModelID())
	require.Regexp(t, `^builtin:lsa-v1:8:[0-9a-f]{12}$`, a.ModelID())

	c, err := UnmarshalBuiltin(ab)
	require.NoError(t, err)
	cb, err := c.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, ab, cb)
	require.Equal(t, a.ModelID(), c.ModelID())
	va, err := a.Embed(context.Background(), docs)
	require.NoError(t, err)
	vc, err := c.Embed(context.Background(), docs)
	require.NoError(t, err)
	require.Equal(t, va, vc)

	other := trainSmall(t, topicCorpus(200, 3), nil)
	require.NotEqual(t, a.ModelID(), other.ModelID(), "a different corpus is a different model")
}

func TestUnmarshalBuiltinRejectsBadInput(t *testing.T) {
	m := trainSmall(t, topicCorpus(30, 1), nil)
	good, err := m.MarshalBinary()
	require.NoError(t, err)
	with := func(at int, v byte) []byte { b := bytes.Clone(good); b[at] = v; return b }
	tests := []struct {
		name string
		data []byte
		want string
		is   error // the sentinel that tells upgrade from retrain, when set
	}{
		{"empty", nil, "not a builtin", nil},
		{"bad magic", []byte("NOTAMODELxxxxxxxxxxxxxxxx"), "not a builtin", nil},
		{"truncated", good[:len(good)-10], "truncated", nil},
		{"trailing", append(bytes.Clone(good), 0), "trailing", nil},
		{"newer format", with(8, 99), "format version 99", ErrNewerModel},
		{"newer model version", with(12, 99), "model version 99", ErrNewerModel},
		{"older model version", with(12, 0), "retrain", ErrOlderModel},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := UnmarshalBuiltin(tc.data)
			require.ErrorContains(t, err, tc.want)
			if tc.is != nil {
				require.ErrorIs(t, err, tc.is)
			}
		})
	}
}

func TestTrainBuiltinValidates(t *testing.T) {
	_, err := TrainBuiltin(context.Background(), nil, []string{"a", "b"}, BuiltinConfig{})
	require.Error(t, err)
	_, err = TrainBuiltin(context.Background(), analysis.NewEnglish(), []string{"one"}, BuiltinConfig{})
	require.ErrorContains(t, err, "at least 2")
	_, err = TrainBuiltin(context.Background(), analysis.NewEnglish(), []string{"alpha", "beta"}, BuiltinConfig{})
	require.ErrorContains(t, err, "vocabulary too small")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = TrainBuiltin(ctx, analysis.NewEnglish(), topicCorpus(30, 1), BuiltinConfig{Dims: 4})
	require.ErrorIs(t, err, context.Canceled)
}

// BenchmarkBuiltinQueryEmbed measures one query's embedding (the target is
// under 1 ms, reported as query-µs); speed is measured here, not asserted by
// a unit test.
//
//	cd services/search && go test ./internal/embed -run '^$' -bench BuiltinQueryEmbed
func BenchmarkBuiltinQueryEmbed(b *testing.B) {
	m := trainSmall(b, topicCorpus(300, 4), func(c *BuiltinConfig) { c.Dims = 64 })
	q := []string{"does chemotherapy reduce tumor metastasis in cancer patients"}
	b.ResetTimer()
	t0 := time.Now()
	for b.Loop() {
		_, err := m.Embed(context.Background(), q)
		require.NoError(b, err)
	}
	b.ReportMetric(float64(time.Since(t0).Microseconds())/float64(b.N), "query-µs")
}

func TestNormalizeAndDot(t *testing.T) {
	v := []float32{3, 4, 0, 0, 0}
	Normalize(v)
	require.InDelta(t, 0.6, v[0], 1e-6)
	require.InDelta(t, 1, Dot(v, v), 1e-6)
	z := []float32{0, 0}
	Normalize(z)
	require.Equal(t, []float32{0, 0}, z)
}

// Feedback by hand: q = (1, 0), two feedback vectors (0, 1), weight 2:
// q + 2*(0, 1) = (1, 2), normalized (0.4472, 0.8944).
func TestFeedbackHandComputed(t *testing.T) {
	q := []float32{1, 0}
	got := Feedback(q, [][]float32{{0, 1}, {0, 1}}, 2)
	require.InDelta(t, 0.4472136, got[0], 1e-6)
	require.InDelta(t, 0.8944272, got[1], 1e-6)
	require.Equal(t, []float32{1, 0}, q, "the query vector is not modified")
	require.Equal(t, []float32{1, 0}, Feedback(q, nil, 2), "no feedback, no change")
}

// The chosen method on a small corpus: a one-word query's nearest
// neighbours are its topic's documents, and feedback from one document of
// another topic (what the top BM25 hit would give) pulls that topic's
// documents in as neighbours.
func TestBuiltinNeighboursAndFeedback(t *testing.T) {
	docs := topicCorpus(60, 7)
	m := trainSmall(t, docs, nil)
	ctx := context.Background()
	vecs, err := m.Embed(ctx, docs)
	require.NoError(t, err)
	nearest := func(q []float32, k int) []int {
		idx := make([]int, len(vecs))
		for i := range idx {
			idx[i] = i
		}
		sort.Slice(idx, func(a, b int) bool { return Dot(vecs[idx[a]], q) > Dot(vecs[idx[b]], q) })
		return idx[:k]
	}
	qv, err := m.Embed(ctx, []string{"dopamine"})
	require.NoError(t, err)
	for _, i := range nearest(qv[0], 10) {
		require.Equal(t, 1, i%3, "doc %d (%q...) is not a neuroscience text", i, docs[i][:20])
	}
	// Feedback from document 0 (oncology) with weight 2 outweighs the query.
	moved := Feedback(qv[0], [][]float32{vecs[0]}, 2)
	for _, i := range nearest(moved, 5) {
		require.Equal(t, 0, i%3, "doc %d is not an oncology text", i)
	}
}

func TestTrainedOnRoundTripAndFormat1(t *testing.T) {
	docs := topicCorpus(30, 3)
	m := trainSmall(t, docs, nil)
	require.Equal(t, 30, m.TrainedOn())
	require.True(t, m.Knows("dopamin"), "stemmed vocabulary")
	require.False(t, m.Knows("kubernetes"))
	data, err := m.MarshalBinary()
	require.NoError(t, err)
	back, err := UnmarshalBuiltin(data)
	require.NoError(t, err)
	require.Equal(t, 30, back.TrainedOn())
	require.Equal(t, m.ModelID(), back.ModelID())

	// A format-1 model (stored before the count existed) still loads, with
	// the count unknown, and embeds the same.
	head := len(magic) + 4*3 + 3 + 4 + 1
	v1 := append(append([]byte(nil), data[:head]...), data[head+8:]...)
	binary.LittleEndian.PutUint32(v1[len(magic):], 1)
	old, err := UnmarshalBuiltin(v1)
	require.NoError(t, err)
	require.Zero(t, old.TrainedOn())
	a, _ := m.Embed(context.Background(), []string{"dopamine synapse"})
	b, _ := old.Embed(context.Background(), []string{"dopamine synapse"})
	require.Equal(t, a, b)

	// A format-2 model (before the fine-tuning epochs were recorded) loads
	// as plain LSA, which every model of that format is.
	v2 := append(append([]byte(nil), data[:head+4]...), data[head+8:]...)
	binary.LittleEndian.PutUint32(v2[len(magic):], 2)
	old2, err := UnmarshalBuiltin(v2)
	require.NoError(t, err)
	require.Equal(t, 30, old2.TrainedOn())
	require.False(t, old2.FineTuned())
	c, _ := old2.Embed(context.Background(), []string{"dopamine synapse"})
	require.Equal(t, a, c)

	v4 := append([]byte(nil), data...)
	binary.LittleEndian.PutUint32(v4[len(magic):], formatVersion+1)
	_, err = UnmarshalBuiltin(v4)
	require.ErrorContains(t, err, "not supported")
}
