package cl100k

import (
	"bufio"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
	"github.com/stretchr/testify/require"
)

func referenceEncoder(t testing.TB) *tiktoken.Tiktoken {
	t.Helper()
	tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader())
	enc, err := tiktoken.GetEncoding("cl100k_base")
	require.NoError(t, err)
	return enc
}

func mustTok(t testing.TB) *Tokenizer {
	t.Helper()
	tok, err := Load()
	require.NoError(t, err)
	return tok
}

var tokenizerCases = []string{
	"",
	"hello world",
	"Hello, World! It's a test; we'll see what's what. They've I'm you'd",
	"IT'S WE'LL THEY'RE 'Sup 'll'd",
	"  leading and trailing spaces   ",
	"tabs\tand\nnewlines\n\n\nmany\r\nwindows\r\n",
	"numbers 1 12 123 1234 12345 3.14159 1,000,000 2019-2020",
	"punctuation!!! ... ?!? (parens) [brackets] {braces} <tags> --- ***",
	"code: func main() {\n\tfmt.Println(\"hi\")\n}\n",
	"unicode: naïve café résumé Ωμέγα TNF-α β-cells 東京タワー 한국어",
	"emoji 😀👍🏽 and symbols ™ © ® ° ± × ÷",
	"mixed\u00a0nbsp\u2003em space\u2028line sep",
	"trailing newline spaces \n   \n  x",
	"   \n",
	" \n\n  \t\n",
	"<|endoftext|> special as text",
	"a'b c'S d'RE e'x",
	"${var} $$ ## @@ ~~ `` '' \"\"",
	"superscripts ²³ fractions ½ roman Ⅻ",
	"\x80invalid\xffbytes",
	" ", "  ", "\n", " \n ", "a  b", "a \t b", "x\r\ny", "a\n\n\n   b",
	"it's they're I'LL we've he'd I'm 'sorry",
	"1234567 12 1 0.8751", "naïve café — déjà vu, 東京は晴れ。 Привет мир", "e\u0301 combining",
	`{"_metadata":{"status":"success"},"results":[{"chunk_id":1,"hybrid_score":0.5}]}`,
	"\"escaped \\\"json\\\" text\\nwith newline\"",
	"\u00a0nbsp\u2003em\u3000ideographic", "\u0085next line", "\xffa\xfe\xfd b",
}

func TestTokenizerMatchesTiktoken(t *testing.T) {
	ref := referenceEncoder(t)
	tok := mustTok(t)
	for _, s := range tokenizerCases {
		want := ref.EncodeOrdinary(s)
		require.Equal(t, want, tok.Encode(s), "%q", s)
		require.Equal(t, len(want), tok.Count(s), "%q", s)
	}
}

func TestTokenizerMatchesTiktokenFuzz(t *testing.T) {
	ref := referenceEncoder(t)
	tok := mustTok(t)
	alphabet := []rune("aZ09 \t\n\r'.,!-_()é東😀\u00a0sStTlLdDreve:;\"{}[]/\\\u0301\u2028")
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 3000; i++ {
		n := rng.IntN(40)
		var b strings.Builder
		for j := 0; j < n; j++ {
			b.WriteRune(alphabet[rng.IntN(len(alphabet))])
		}
		s := b.String()
		require.Equal(t, ref.EncodeOrdinary(s), tok.Encode(s), "%q", s)
	}
}

func TestPiecesSumToCount(t *testing.T) {
	tok := mustTok(t)
	for _, s := range tokenizerCases {
		sum, last := 0, 0
		tok.Pieces(s, func(start, end, n int) {
			require.Equal(t, last, start, "pieces are contiguous")
			last = end
			sum += n
		})
		if strings.ToValidUTF8(s, "") == s {
			require.Equal(t, len(s), last)
		}
		require.Equal(t, tok.Count(s), sum)
	}
}

func scifactDir() string {
	if d := os.Getenv("BMCIS_SCIFACT_DIR"); d != "" {
		return d
	}
	// Default: <repo>/../shared/data/scifact, from this package directory.
	return filepath.Join("..", "..", "..", "shared", "data", "scifact")
}

// TestTokenizerMatchesTiktokenOnSciFact compares full encodings on real
// scientific text (Greek letters, units, numbers) when the data is present.
func TestTokenizerMatchesTiktokenOnSciFact(t *testing.T) {
	texts := loadSciFactTexts(t, 1<<30)
	ref := referenceEncoder(t)
	tok := mustTok(t)
	for _, s := range texts {
		require.Equal(t, ref.EncodeOrdinary(s), tok.Encode(s), "%q", s)
	}
}

func loadSciFactTexts(t testing.TB, limit int) []string {
	f, err := os.Open(filepath.Join(scifactDir(), "corpus.jsonl"))
	if err != nil {
		t.Skipf("SciFact corpus not available: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	var texts []string
	for sc.Scan() && len(texts) < limit {
		var d struct{ Title, Text string }
		require.NoError(t, json.Unmarshal(sc.Bytes(), &d))
		texts = append(texts, d.Title+"\n\n"+d.Text)
	}
	return texts
}

// BenchmarkCount counts 1,000 SciFact abstracts with this tokenizer and
// with tiktoken-go, the reason it exists.
func BenchmarkCount(b *testing.B) {
	texts := loadSciFactTexts(b, 1000)
	tok := mustTok(b)
	ref := referenceEncoder(b)
	size := 0
	for _, s := range texts {
		size += len(s)
	}
	for _, c := range []struct {
		name  string
		count func(string) int
	}{
		{"cl100k", tok.Count},
		{"tiktoken-go", func(s string) int { return len(ref.EncodeOrdinary(s)) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			tokens := 0
			for b.Loop() {
				tokens = 0
				for _, s := range texts {
					tokens += c.count(s)
				}
			}
			b.ReportMetric(float64(tokens)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

// Long pieces (a run of letters with no space or punctuation) merge with a
// heap: the same tokens as tiktoken's scan, which costs the square of the
// piece's length (a 1 MB run pinned a core for hours).
func TestLongPiecesMatchTiktoken(t *testing.T) {
	ref := referenceEncoder(t)
	tok := mustTok(t)
	rng := rand.New(rand.NewPCG(5, 6))
	cases := []string{
		strings.Repeat("a", 5000),
		strings.Repeat("知识库搜索服务", 300),
		strings.Repeat("ACGTTGCAAGCT", 400),
		"x" + strings.Repeat("ab", 700) + "y",
	}
	for _, alphabet := range []string{"ab", "abcdefghij", "etaoinshrdlu", "éèêüöäßø", "東京タワー한국어"} {
		letters := []rune(alphabet)
		for range 8 {
			var b strings.Builder
			for range 128 + rng.IntN(1500) {
				b.WriteRune(letters[rng.IntN(len(letters))])
			}
			cases = append(cases, b.String())
		}
	}
	for _, s := range cases {
		want := ref.EncodeOrdinary(s)
		require.Equal(t, want, tok.Encode(s), "%.60q…", s)
		require.Equal(t, len(want), tok.Count(s), "%.60q…", s)
	}
	// A piece of a megabyte is counted (with the scan this did not end), in
	// parts of maxPiece bytes: Encode and Count agree, and a part is
	// encoded as tiktoken encodes it alone.
	big := strings.Repeat("abcdefghijklmnopqrstuvwxyz", 1<<20/26)
	ids := tok.Encode(big)
	require.Len(t, ids, tok.Count(big))
	require.Equal(t, ref.EncodeOrdinary(big[:maxPiece-maxPiece%26]), tok.Encode(big[:maxPiece-maxPiece%26]))
	require.Equal(t, ref.EncodeOrdinary(big[:maxPiece]), ids[:len(ref.EncodeOrdinary(big[:maxPiece]))])
}
