// Package syntheticdocs generates a deterministic synthetic corpus for benchmarks:
// markdown documents with nested headings and paragraphs whose words follow
// a Zipf distribution over a pseudo-word vocabulary, plus queries drawn
// from the same vocabulary. The same seed always gives the same corpus.
package syntheticdocs

import (
	"fmt"
	"math/rand/v2"
	"strings"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
)

var syllables = []string{"ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi", "pe", "sa", "do", "fu", "gi", "ho", "ju", "be",
	"ri", "mo", "na", "te", "xu", "ly", "qe", "wa"}

// Generator makes documents and queries.
type Generator struct {
	seed  uint64
	vocab []string
	// Categories are the document categories, the last one rare (1 in 50
	// documents) so filtered searches can be measured on a selective filter.
	Categories []string
}

// New returns a generator with a vocabulary of vocab words.
func New(seed uint64, vocab int) *Generator {
	g := &Generator{seed: seed, Categories: []string{"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "rare"}}
	g.vocab = make([]string, vocab)
	for i := range g.vocab {
		g.vocab[i] = word(i + len(syllables))
	}
	// Shuffle so frequency rank is unrelated to word shape.
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	r.Shuffle(len(g.vocab), func(i, j int) { g.vocab[i], g.vocab[j] = g.vocab[j], g.vocab[i] })
	return g
}

func word(n int) string {
	var b strings.Builder
	for n > 0 {
		b.WriteString(syllables[n%len(syllables)])
		n /= len(syllables)
	}
	return b.String()
}

func (g *Generator) rng(kind, i uint64) (*rand.Rand, *rand.Zipf) {
	r := rand.New(rand.NewPCG(g.seed^(kind<<56), i))
	return r, rand.NewZipf(r, 1.07, 2, uint64(len(g.vocab)-1))
}

func (g *Generator) words(r *rand.Rand, z *rand.Zipf, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = g.vocab[z.Uint64()]
	}
	return out
}

func sentence(ws []string) string {
	s := strings.Join(ws, " ")
	return strings.ToUpper(s[:1]) + s[1:] + "."
}

// Document returns document i.
func (g *Generator) Document(i int) *searchv1.Document {
	r, z := g.rng(1, uint64(i))
	cat := g.Categories[i%(len(g.Categories)-1)]
	if i%50 == 49 {
		cat = g.Categories[len(g.Categories)-1]
	}
	title := strings.Join(g.words(r, z, 3), " ")
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", title)
	sections := 3 + r.IntN(5)
	for s := 0; s < sections; s++ {
		fmt.Fprintf(&b, "## %s\n\n", sentence(g.words(r, z, 2+r.IntN(3))))
		subs := r.IntN(3)
		for k := 0; k <= subs; k++ {
			if k > 0 {
				fmt.Fprintf(&b, "### %s\n\n", sentence(g.words(r, z, 2+r.IntN(2))))
			}
			paras := 1 + r.IntN(3)
			for p := 0; p < paras; p++ {
				sents := 3 + r.IntN(5)
				for q := 0; q < sents; q++ {
					if q > 0 {
						b.WriteByte(' ')
					}
					b.WriteString(sentence(g.words(r, z, 6+r.IntN(12))))
				}
				b.WriteString("\n\n")
			}
		}
	}
	id := fmt.Sprintf("bench/%s/doc-%06d.md", cat, i)
	return &searchv1.Document{ExternalId: id, SourceFile: id, Category: cat, Title: title,
		Content: []byte(b.String()), Format: searchv1.ContentFormat_CONTENT_FORMAT_MARKDOWN}
}

// Query returns query i: two to four words of mid frequency (the most
// frequent 30 words act like stop words and are skipped).
func (g *Generator) Query(i int) string {
	r, z := g.rng(2, uint64(i))
	n := 2 + r.IntN(3)
	var ws []string
	for len(ws) < n {
		k := z.Uint64()
		if k < 30 {
			continue
		}
		ws = append(ws, g.vocab[k])
	}
	return strings.Join(ws, " ")
}
