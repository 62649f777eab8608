package embed

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAppendGrams(t *testing.T) {
	for _, tc := range []struct {
		word string
		n    int
		want []string
	}{
		{"cell", 4, []string{"#<cel", "#cell", "#ell>"}},
		{"cell", 3, []string{"#<ce", "#cel", "#ell", "#ll>"}},
		{"cells", 5, []string{"#<cell", "#cells", "#ells>"}},
		{"cell", 5, nil}, // shorter than n: its own row only
		{"abc", 4, nil},  // shorter than n: its own row only
		{"café", 4, []string{"#<caf", "#café", "#afé>"}},
		{"il6", 2, []string{"#<i", "#il", "#l6", "#6>"}},
	} {
		t.Run(fmt.Sprintf("%s/%d", tc.word, tc.n), func(t *testing.T) {
			var got []string
			appendGrams(nil, tc.word, tc.n, func(g []byte) { got = append(got, string(g)) })
			require.Equal(t, tc.want, got)
		})
	}
}

// morphCorpus is structuredCorpus with word families: each topic's body
// words share stems' pieces ("methylation", "demethylase", ...), so
// n-grams carry the topic.
func morphCorpus(perTopic int, seed uint64) []string {
	return titledCorpus([]corpusTopic{
		{[]string{"epigenetics", "chromatin"}, []string{"methylation", "demethylase", "methyltransferase", "acetylation", "deacetylase", "histone", "methylome", "acetyltransferase"}},
		{[]string{"cardiology", "heart"}, []string{"cardiomyocyte", "cardiomyopathy", "myocardium", "cardiotoxicity", "pericardium", "cardiogenic", "myocyte", "cardiovascular"}},
		{[]string{"microbiology", "germ"}, []string{"bacteria", "antibiotic", "infection", "pathogen", "resistance", "microbe", "vaccine", "virulence"}},
	}, perTopic, rand.New(rand.NewPCG(seed, 11)))
}

func subwordContrastive() ContrastiveConfig {
	c := smallContrastive()
	c.Subwords = SubwordConfig{N: 4, Max: 5000, Scale: 2}
	return c
}

// Hand-checked: a word no training text holds ("hypermethylated",
// "cardiomyocytes"' rarer cousin "myocarditis") has no row of its own, so
// without sub-words it embeds to nothing; with them it lands among the
// texts spelled like it.
func TestSubwordsPlaceUnseenWords(t *testing.T) {
	docs := morphCorpus(20, 1)
	lsa := trainSmall(t, docs, func(c *BuiltinConfig) { c.Contrastive = ContrastiveConfig{} })
	plain, err := FineTuneContrastive(context.Background(), lsa, docs, smallContrastive())
	require.NoError(t, err)
	sub, err := FineTuneContrastive(context.Background(), lsa, docs, subwordContrastive())
	require.NoError(t, err)

	n, rows := sub.Subwords()
	require.Equal(t, 4, n)
	require.Positive(t, rows)
	require.Equal(t, plain.VocabSize(), sub.VocabSize(), "n-gram rows are not words")
	require.False(t, sub.Knows("#meth"), "an n-gram is not a known word")

	bodies := make([]string, len(docs))
	for i, d := range docs {
		_, bodies[i], _ = strings.Cut(d, "\n")
	}
	vecs, err := sub.Embed(context.Background(), bodies)
	require.NoError(t, err)
	for topic, word := range map[int]string{0: "hypermethylated", 1: "myocarditis"} {
		for _, term := range sub.Analyzer().Terms(word) {
			require.False(t, sub.Knows(term), "%q must be unseen", term)
		}
		pv, err := plain.Embed(context.Background(), []string{word})
		require.NoError(t, err)
		require.Zero(t, Dot(pv[0], pv[0]), "without sub-words an unseen word embeds to nothing")

		q, err := sub.Embed(context.Background(), []string{word})
		require.NoError(t, err)
		worstOwn, bestOther := float32(2), float32(-2)
		for i, v := range vecs {
			s := Dot(q[0], v)
			if i%3 == topic {
				worstOwn = min(worstOwn, s)
			} else {
				bestOther = max(bestOther, s)
			}
		}
		t.Logf("%s: worst own-topic body %.3f, best other %.3f", word, worstOwn, bestOther)
		require.Greater(t, worstOwn, bestOther, "%s: every body of its topic ranks above every other body", word)
	}
}

func TestSubwordModelFormat(t *testing.T) {
	docs := morphCorpus(30, 2) // 90 texts: the parallel paths run
	lsa := trainSmall(t, docs, func(c *BuiltinConfig) { c.Contrastive = ContrastiveConfig{} })
	cfg := subwordContrastive()
	cfg.Epochs = 3
	a, ab := fineTuneTwice(t, lsa, docs, cfg)
	require.Equal(t, uint32(4), binary.LittleEndian.Uint32(ab[len(magic):]), "sub-words are format 4")

	back, err := UnmarshalBuiltin(ab)
	require.NoError(t, err)
	require.Equal(t, a.ModelID(), back.ModelID())
	n, rows := back.Subwords()
	an, arows := a.Subwords()
	require.Equal(t, [2]int{an, arows}, [2]int{n, rows})
	texts := []string{docs[0], "hypermethylated myocarditis", "no known word at all"}
	va, err := a.Embed(context.Background(), texts)
	require.NoError(t, err)
	vb, err := back.Embed(context.Background(), texts)
	require.NoError(t, err)
	require.Equal(t, va, vb, "a stored model embeds exactly as the trained one")

	// Without sub-words a model is written as format 3, as before, so the
	// previous release still reads it.
	plain, err := FineTuneContrastive(context.Background(), lsa, docs, smallContrastive())
	require.NoError(t, err)
	pb, err := plain.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, uint32(3), binary.LittleEndian.Uint32(pb[len(magic):]))

	// Damaged headers are refused, not misread.
	head := len(magic) + 4*3 + 3 + 4 + 1 + 4 + 4 // up to the sub-word fields
	for name, damage := range map[string]func(d []byte){
		"n-gram length 1":      func(d []byte) { binary.LittleEndian.PutUint32(d[head:], 1) },
		"n-gram length 99":     func(d []byte) { binary.LittleEndian.PutUint32(d[head:], 99) },
		"more words than rows": func(d []byte) { binary.LittleEndian.PutUint32(d[head+4:], 1<<30) },
		"an n-gram among the words": func(d []byte) {
			binary.LittleEndian.PutUint32(d[head+4:], binary.LittleEndian.Uint32(d[head+4:])+1)
		},
	} {
		t.Run(name, func(t *testing.T) {
			d := bytes.Clone(ab)
			damage(d)
			_, err := UnmarshalBuiltin(d)
			require.Error(t, err)
		})
	}
}

func TestSubwordsValidate(t *testing.T) {
	docs := morphCorpus(5, 3)
	lsa := trainSmall(t, docs, func(c *BuiltinConfig) { c.Contrastive = ContrastiveConfig{} })
	for name, sc := range map[string]SubwordConfig{
		"n 1":     {N: 1, Max: 10, Scale: 1},
		"n 9":     {N: 9, Max: 10, Scale: 1},
		"max 0":   {N: 4, Max: 0, Scale: 1},
		"scale 0": {N: 4, Max: 10, Scale: 0},
	} {
		t.Run(name, func(t *testing.T) {
			c := smallContrastive()
			c.Subwords = sc
			_, err := FineTuneContrastive(context.Background(), lsa, docs, c)
			require.ErrorContains(t, err, "sub-words")
		})
	}
	sub, err := FineTuneContrastive(context.Background(), lsa, docs, subwordContrastive())
	require.NoError(t, err)
	_, err = FineTuneContrastive(context.Background(), sub, docs, subwordContrastive())
	require.ErrorContains(t, err, "already has")
}

// Texts too few to share an n-gram (each kept n-gram must be in two
// texts and at most half of them) give no n-gram rows: the model stays
// format 3, which the previous release reads.
func TestSubwordsNoneKeptStaysFormat3(t *testing.T) {
	docs := morphCorpus(20, 4)[:2]
	lsa := trainSmall(t, docs, func(c *BuiltinConfig) { c.Contrastive = ContrastiveConfig{} })
	m, err := FineTuneContrastive(context.Background(), lsa, docs, subwordContrastive())
	require.NoError(t, err)
	n, rows := m.Subwords()
	require.Zero(t, n)
	require.Zero(t, rows)
	b, err := m.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, uint32(3), binary.LittleEndian.Uint32(b[len(magic):]))
}
