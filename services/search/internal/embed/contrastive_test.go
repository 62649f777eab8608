package embed

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// structuredCorpus is "title\nbody" chunks in three topics. A title uses
// its topic's title words ("cardiology", "heart"...), the body three
// sentences of its topic's body words: the title <-> body pairs are what
// fine-tuning should pull together.
func structuredCorpus(perTopic int, seed uint64) []string {
	return titledCorpus([]corpusTopic{
		{[]string{"cardiology", "heart", "cardiac", "vascular"}, []string{"artery", "infarction", "stent", "cholesterol", "statin", "arrhythmia", "ventricle", "pressure"}},
		{[]string{"neurology", "brain", "neural", "cognitive"}, []string{"neuron", "synapse", "cortex", "dopamine", "axon", "hippocampus", "glia", "dendrite"}},
		{[]string{"microbiology", "germ", "microbial", "infectious"}, []string{"bacteria", "antibiotic", "infection", "pathogen", "resistance", "microbe", "vaccine", "virulence"}},
	}, perTopic, rand.New(rand.NewPCG(seed, 5)))
}

// corpusTopic is a topic's title words and body words.
type corpusTopic struct{ title, body []string }

// titledCorpus writes perTopic chunks per topic, in turn: two title words
// and "review", then three sentences of seven body words.
func titledCorpus(topics []corpusTopic, perTopic int, rng *rand.Rand) []string {
	var docs []string
	for i := 0; i < perTopic; i++ {
		for _, tp := range topics {
			var b strings.Builder
			fmt.Fprintf(&b, "%s %s review\n", tp.title[rng.IntN(len(tp.title))], tp.title[rng.IntN(len(tp.title))])
			for s := 0; s < 3; s++ {
				b.WriteString("The")
				for w := 0; w < 7; w++ {
					fmt.Fprintf(&b, " %s", tp.body[rng.IntN(len(tp.body))])
				}
				b.WriteString(" in patients. ")
			}
			docs = append(docs, strings.TrimSpace(b.String()))
		}
	}
	return docs
}

func smallContrastive() ContrastiveConfig {
	return ContrastiveConfig{Epochs: 30, BatchSize: 16, LearningRate: 0.05, Temperature: 0.3,
		Cloze: true, Title: true, Neighbours: true, ClozeKeep: 0.1, Seed: 3}
}

func cosine(t *testing.T, m *Builtin, a, b string) float32 {
	t.Helper()
	v, err := m.Embed(context.Background(), []string{a, b})
	require.NoError(t, err)
	return Dot(v[0], v[1])
}

// Hand-checked on the structured corpus: a chunk's title and body (a title
// pair) and one of its sentences and the rest (a cloze pair) end closer
// than plain LSA put them, and a title word still finds its topic's
// bodies, which never contain it, first.
func TestContrastivePullsStructurePairsTogether(t *testing.T) {
	docs := structuredCorpus(20, 1)
	lsa := trainSmall(t, docs, func(c *BuiltinConfig) { c.Contrastive = ContrastiveConfig{} })
	tuned, err := FineTuneContrastive(context.Background(), lsa, docs, smallContrastive())
	require.NoError(t, err)
	require.NotEqual(t, lsa.ModelID(), tuned.ModelID())

	title, body, _ := strings.Cut(docs[0], "\n")
	before, after := cosine(t, lsa, title, body), cosine(t, tuned, title, body)
	t.Logf("title <-> body: %.3f before, %.3f after", before, after)
	require.Greater(t, after, before+0.05, "title <-> body: %.3f before, %.3f after", before, after)

	sentences := SplitSentences(body)
	require.Len(t, sentences, 3)
	rest := title + "\n" + sentences[1] + " " + sentences[2]
	before, after = cosine(t, lsa, sentences[0], rest), cosine(t, tuned, sentences[0], rest)
	t.Logf("sentence <-> rest of chunk: %.3f before, %.3f after", before, after)
	require.Greater(t, after, before, "sentence <-> rest of chunk: %.3f before, %.3f after", before, after)

	bodies := make([]string, len(docs))
	for i, d := range docs {
		_, bodies[i], _ = strings.Cut(d, "\n")
	}
	vecs, err := tuned.Embed(context.Background(), bodies)
	require.NoError(t, err)
	q, err := tuned.Embed(context.Background(), []string{"cardiology"})
	require.NoError(t, err)
	best, bestS := -1, float32(-2)
	worstCardio := float32(2)
	bestOther := float32(-2)
	for i, v := range vecs {
		s := Dot(q[0], v)
		if s > bestS {
			best, bestS = i, s
		}
		if i%3 == 0 {
			worstCardio = min(worstCardio, s)
		} else {
			bestOther = max(bestOther, s)
		}
	}
	require.Zero(t, best%3, "nearest body to 'cardiology' is %q", bodies[best])
	require.Greater(t, worstCardio, bestOther, "every cardiology body ranks above every other body")
}

// fineTuneTwice fine-tunes lsa twice with cfg and checks the two models
// are the same bytes; it returns the model and its bytes.
func fineTuneTwice(t *testing.T, lsa *Builtin, docs []string, cfg ContrastiveConfig) (*Builtin, []byte) {
	t.Helper()
	a, err := FineTuneContrastive(context.Background(), lsa, docs, cfg)
	require.NoError(t, err)
	b, err := FineTuneContrastive(context.Background(), lsa, docs, cfg)
	require.NoError(t, err)
	ab, err := a.MarshalBinary()
	require.NoError(t, err)
	bb, err := b.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, ab, bb, "same model, texts and seed: same bytes")
	return a, ab
}

func TestContrastiveDeterministicAndOff(t *testing.T) {
	docs := structuredCorpus(30, 2) // 90 texts: the parallel paths run
	lsa := trainSmall(t, docs, func(c *BuiltinConfig) { c.Contrastive = ContrastiveConfig{} })
	cfg := smallContrastive()
	cfg.Epochs = 3
	a, ab := fineTuneTwice(t, lsa, docs, cfg)
	require.False(t, lsa.FineTuned())
	require.True(t, a.FineTuned())
	back, err := UnmarshalBuiltin(ab)
	require.NoError(t, err)
	require.True(t, back.FineTuned(), "stored models say they were fine-tuned")

	// Through TrainBuiltin (the default configuration fine-tunes) it is the
	// same as fine-tuning the plain LSA model by hand.
	viaTrain := trainSmall(t, docs, func(c *BuiltinConfig) { c.Contrastive = cfg })
	require.Equal(t, a.ModelID(), viaTrain.ModelID())

	off := cfg
	off.Epochs = 0
	same, err := FineTuneContrastive(context.Background(), lsa, docs, off)
	require.NoError(t, err)
	require.Same(t, lsa, same, "epochs 0 is plain LSA")

	// Texts with no title and one sentence yield no pairs: plain LSA.
	flat := topicCorpus(30, 1)
	flatLSA := trainSmall(t, flat, func(c *BuiltinConfig) { c.Contrastive = ContrastiveConfig{} })
	kept, err := FineTuneContrastive(context.Background(), flatLSA, flat, cfg)
	require.NoError(t, err)
	require.Same(t, flatLSA, kept)
}

func TestContrastiveValidates(t *testing.T) {
	docs := structuredCorpus(5, 3)
	lsa := trainSmall(t, docs, func(c *BuiltinConfig) { c.Contrastive = ContrastiveConfig{} })
	for name, mod := range map[string]func(*ContrastiveConfig){
		"batch":       func(c *ContrastiveConfig) { c.BatchSize = 1 },
		"temperature": func(c *ContrastiveConfig) { c.Temperature = 0 },
		"rate":        func(c *ContrastiveConfig) { c.LearningRate = -1 },
	} {
		t.Run(name, func(t *testing.T) {
			c := smallContrastive()
			mod(&c)
			_, err := FineTuneContrastive(context.Background(), lsa, docs, c)
			require.ErrorContains(t, err, "must be positive")
		})
	}
	_, err := FineTuneContrastive(context.Background(), nil, docs, smallContrastive())
	require.Error(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = FineTuneContrastive(ctx, lsa, docs, smallContrastive())
	require.ErrorIs(t, err, context.Canceled)
}

func TestSplitSentences(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"One two. Three four.", []string{"One two.", "Three four."}},
		{"Levels rose (e.g. il-6) in mice. 42 died! Why? No.", []string{"Levels rose (e.g. il-6) in mice.", "42 died!", "Why?", "No."}},
		{"no end", []string{"no end"}},
		{"", nil},
	} {
		require.Equal(t, tc.want, SplitSentences(tc.in), tc.in)
	}
}

// Concurrent ingestion stores chunks in any order, even a document's own
// chunks: every arrival order gives the same sample in the same order, so
// the same model, byte for byte; a document's chunks stay together and in
// order; a limit keeps a subsequence of the full sample's order.
func TestSampleIgnoresArrivalOrder(t *testing.T) {
	docs := structuredCorpus(20, 4)
	var recs []sampleRec
	for i, d := range docs {
		title, body, _ := strings.Cut(d, "\n")
		id := fmt.Sprintf("doc-%02d", i)
		recs = append(recs, sampleRec{id, 0, d}, sampleRec{id, 1, title + "\n" + body + " Follow-up in patients."})
	}
	sample := func(limit int, order []sampleRec) []string {
		texts := sampleTexts(limit, order)
		want := len(order)
		if limit > 0 {
			want = min(limit, want)
		}
		require.Len(t, texts, want)
		return texts
	}
	shuffled := slices.Clone(recs)
	rand.New(rand.NewPCG(9, 9)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	require.NotEqual(t, recs, shuffled)

	a, b := sample(0, recs), sample(0, shuffled)
	require.Equal(t, a, b, "the same texts in the same order")
	var firsts []string
	for i := 0; i < len(a); i += 2 {
		firsts = append(firsts, a[i])
		require.Equal(t, a[i]+" Follow-up in patients.", a[i+1], "a document's chunks together, in order")
	}
	require.ElementsMatch(t, docs, firsts)

	cfg := smallContrastive()
	cfg.Epochs = 3
	ma := trainSmall(t, a, func(c *BuiltinConfig) { c.Contrastive = cfg })
	mb := trainSmall(t, b, func(c *BuiltinConfig) { c.Contrastive = cfg })
	ab, err := ma.MarshalBinary()
	require.NoError(t, err)
	bb, err := mb.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, ab, bb)

	// A limit of 15 texts: the same 15 whatever the order, in the full
	// sample's order.
	la, lb := sample(15, recs), sample(15, shuffled)
	require.Equal(t, la, lb)
	require.Len(t, la, 15)
	next := 0
	for _, txt := range la {
		i := slices.Index(a[next:], txt)
		require.GreaterOrEqual(t, i, 0, "%q out of the full sample's order", txt)
		next += i + 1
	}
}

// A capped sample is spread over the corpus: ids that differ only in
// their last characters are not kept in runs, and a document far larger
// than the cap gives about its share, its kept chunks grouped by block
// and in order within one.
func TestSampleIsSpread(t *testing.T) {
	s := NewSample(2000)
	for i := 0; i < 100_000; i++ {
		s.Add(fmt.Sprintf("doc-%06d", i), 0, fmt.Sprintf("doc-%06d", i))
	}
	kept := s.Texts()
	require.Len(t, kept, 2000)
	nums := make([]int, len(kept))
	for i, k := range kept {
		_, err := fmt.Sscanf(k, "doc-%06d", &nums[i])
		require.NoError(t, err)
	}
	slices.Sort(nums)
	runs := 1
	for i := 1; i < len(nums); i++ {
		if nums[i] != nums[i-1]+1 {
			runs++
		}
	}
	require.Greater(t, runs, 1900, "kept ids in runs")
	require.Greater(t, nums[len(nums)-1]-nums[0], 95_000)

	// One document of 3,200 chunks among 3,200 one-chunk documents: a
	// 640-text sample holds about half of it.
	var recs []sampleRec
	for i := 0; i < 3200; i++ {
		recs = append(recs, sampleRec{"big", i, fmt.Sprintf("big %04d", i)}, sampleRec{fmt.Sprintf("small-%04d", i), 0, "small"})
	}
	texts := sampleTexts(640, recs)
	rand.New(rand.NewPCG(5, 5)).Shuffle(len(recs), func(i, j int) { recs[i], recs[j] = recs[j], recs[i] })
	require.Equal(t, texts, sampleTexts(640, recs), "the same sample whatever the arrival order")
	big, prev := 0, -1
	blocks := map[int]bool{}
	for _, txt := range texts {
		if !strings.HasPrefix(txt, "big ") {
			prev = -1
			continue
		}
		big++
		var n int
		_, err := fmt.Sscanf(txt, "big %04d", &n)
		require.NoError(t, err)
		if prev >= 0 && prev/SampleBlock == n/SampleBlock {
			require.Greater(t, n, prev, "a block's kept chunks in order")
		} else {
			require.False(t, blocks[n/SampleBlock], "a block's kept chunks together")
			blocks[n/SampleBlock] = true
		}
		prev = n
	}
	require.InDelta(t, 320, big, 100, "the big document's share of the sample")
}

// A capped sample picks chunks, not blocks: eight documents of 31 chunks,
// each in its own words, and a limit of 64 hold chunks of every document
// (whole blocks would hold two or three), so a model trained on it knows
// every document's words, as the retrain rule expects of a fresh model.
func TestSamplePicksChunks(t *testing.T) {
	var recs []sampleRec
	for d := 0; d < 8; d++ {
		for i := 0; i < 31; i++ {
			recs = append(recs, sampleRec{fmt.Sprintf("manual-%d", d), i, fmt.Sprintf("manual-%d %02d", d, i)})
		}
	}
	perDoc := map[string]int{}
	for _, txt := range sampleTexts(64, recs) {
		perDoc[strings.Fields(txt)[0]]++
	}
	require.Len(t, perDoc, 8, "every document in the sample: %v", perDoc)
	for doc, n := range perDoc {
		require.GreaterOrEqual(t, n, 3, doc)
	}
}

// sampleRec is one chunk offered to a Sample.
type sampleRec struct {
	doc   string
	index int
	text  string
}

// sampleTexts offers recs in their order to a Sample of limit and returns
// its texts.
func sampleTexts(limit int, recs []sampleRec) []string {
	s := NewSample(limit)
	for _, r := range recs {
		s.Add(r.doc, r.index, r.text)
	}
	return s.Texts()
}
