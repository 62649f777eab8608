package chunker

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/cl100k"
)

func newTestChunker(t testing.TB, opts Options) *Chunker {
	t.Helper()
	tok, err := cl100k.Load()
	require.NoError(t, err)
	c, err := New(tok, opts)
	require.NoError(t, err)
	return c
}

func sentences(prefix string, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "The %s sentence number %d describes a measured effect in detail. ", prefix, i)
	}
	return strings.TrimSpace(b.String())
}

var guideDoc = "# Guide\n\n" + sentences("intro", 3) + "\n\n" +
	"## Install\n\n" + sentences("install", 12) + "\n\n" +
	"```bash\n# not a heading\nmake build\n\nmake install\n```\n\n" +
	"### Linux\n\n" + sentences("linux", 4) + "\n\n" +
	"## Usage\n\n" + sentences("usage", 2) + "\n\n" +
	"Usage Details\n-------------\n\n" + sentences("details", 2) + "\n"

func TestMarkdownHeadingPaths(t *testing.T) {
	c := newTestChunker(t, Options{TargetTokens: 80, OverlapTokens: 12})
	chunks, err := c.Split(t.Context(), Markdown, "Handbook", guideDoc)
	require.NoError(t, err)
	want := map[string]string{
		"intro sentence":   "Handbook > Guide",
		"install sentence": "Handbook > Guide > Install",
		"make build":       "Handbook > Guide > Install",
		"linux sentence":   "Handbook > Guide > Install > Linux",
		"usage sentence":   "Handbook > Guide > Usage",
		"details sentence": "Handbook > Guide > Usage Details", // setext "---" is level 2
	}
	seen := map[string]bool{}
	for _, ch := range chunks {
		for marker, hdr := range want {
			// A chunk may start in a parent section and run into a child, so
			// a marker's chunk header must be the marker's path or a prefix.
			if strings.Contains(ch.ChunkText, marker) {
				require.True(t, strings.HasPrefix(hdr, ch.ContextHeader), "%q in chunk with header %q", marker, ch.ContextHeader)
				if ch.ContextHeader == hdr {
					seen[marker] = true
				}
			}
		}
	}
	for marker := range want {
		require.True(t, seen[marker], "no chunk of %q carries its own section header", marker)
	}
	require.NotContains(t, headers(chunks), "Handbook > Guide > not a heading")
}

func headers(chunks []Chunk) []string {
	var out []string
	for _, ch := range chunks {
		out = append(out, ch.ContextHeader)
	}
	return out
}

func TestHeaderTitleDedup(t *testing.T) {
	c := newTestChunker(t, DefaultOptions())
	chunks, err := c.Split(t.Context(), Markdown, "Guide", "# Guide\n\nBody text.")
	require.NoError(t, err)
	require.Len(t, chunks, 1)
	require.Equal(t, "Guide", chunks[0].ContextHeader)
	chunks, err = c.Split(t.Context(), Markdown, "", "Body only.")
	require.NoError(t, err)
	require.Equal(t, "", chunks[0].ContextHeader)
}

func TestCodeBlocksStayWhole(t *testing.T) {
	code := "```go\nfunc main() {\n" + strings.Repeat("\tfmt.Println(\"line\")\n", 30) + "}\n```"
	tilde := "~~~\n" + strings.Repeat("echo tilde fence line\n", 20) + "~~~~"
	doc := "# Code\n\n" + sentences("before", 6) + "\n\n" + code + "\n\n" + sentences("between", 3) + "\n\n" + tilde + "\n\n" + sentences("after", 6)
	c := newTestChunker(t, Options{TargetTokens: 120, OverlapTokens: 15, MaxCodeTokens: 400})
	chunks, err := c.Split(t.Context(), Markdown, "", doc)
	require.NoError(t, err)
	foundGo, foundTilde := false, false
	for _, ch := range chunks {
		if strings.Contains(ch.ChunkText, "```go") {
			require.Contains(t, ch.ChunkText, code, "go block cut")
			foundGo = true
		}
		if strings.Contains(ch.ChunkText, "~~~\n") {
			require.Contains(t, ch.ChunkText, tilde, "tilde block cut")
			foundTilde = true
		}
		require.Equal(t, 0, strings.Count(ch.ChunkText, "```")%2, "unbalanced fence in %q", ch.ChunkText)
	}
	require.True(t, foundGo)
	require.True(t, foundTilde)
}

func TestOversizedCodeBlockIsRefenced(t *testing.T) {
	var body strings.Builder
	for i := 0; i < 200; i++ {
		fmt.Fprintf(&body, "value_%d = compute(%d) + offset\n", i, i)
	}
	doc := "## Big\n\n```python\n" + body.String() + "```\n\nAfter text."
	c := newTestChunker(t, Options{TargetTokens: 100, OverlapTokens: 10, MaxCodeTokens: 200})
	chunks, err := c.Split(t.Context(), Markdown, "", doc)
	require.NoError(t, err)
	var rebuilt strings.Builder
	parts := 0
	for _, ch := range chunks {
		if !strings.HasPrefix(ch.ChunkText, "```python\n") {
			continue
		}
		parts++
		require.True(t, strings.HasSuffix(ch.ChunkText, "\n```"), "part not closed: %q", ch.ChunkText)
		require.LessOrEqual(t, ch.ChunkTokenCount, 100)
		require.Equal(t, "Big", ch.ContextHeader)
		inner := strings.TrimSuffix(strings.TrimPrefix(ch.ChunkText, "```python\n"), "\n```")
		rebuilt.WriteString(inner + "\n")
	}
	require.Greater(t, parts, 2)
	require.Equal(t, body.String(), rebuilt.String(), "parts must reassemble the block at line boundaries")
}

func TestOverlapAndSizes(t *testing.T) {
	tok, err := cl100k.Load()
	require.NoError(t, err)
	// tiktoken-go itself is the reference for the counts.
	tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader())
	ref, err := tiktoken.GetEncoding("cl100k_base")
	require.NoError(t, err)
	doc := "# Long\n\n" + sentences("alpha", 40) + "\n\n" + sentences("beta", 25) + "\n\nword " + strings.Repeat("supercalifragilistic ", 400)
	tests := []struct {
		name string
		opts Options
	}{
		{"small", Options{TargetTokens: 64, OverlapTokens: 8}},
		{"default", DefaultOptions()},
		{"no overlap", Options{TargetTokens: 128, OverlapTokens: -1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestChunker(t, tc.opts)
			opts := c.Options()
			for _, format := range []Format{Markdown, PlainText} {
				chunks, err := c.Split(t.Context(), format, "T", doc)
				require.NoError(t, err)
				require.Greater(t, len(chunks), 1)
				overlaps := 0
				for i, ch := range chunks {
					require.Equal(t, i, ch.ChunkIndex)
					require.Equal(t, len(chunks), ch.TotalChunks)
					require.Equal(t, len(ref.EncodeOrdinary(ch.ChunkText)), ch.ChunkTokenCount, "token count must be cl100k's")
					require.Equal(t, tok.Count(ch.ChunkText), ch.ChunkTokenCount)
					require.LessOrEqual(t, ch.ChunkTokenCount, opts.TargetTokens)
					require.Greater(t, ch.ChunkTokenCount, 0)
					require.LessOrEqual(t, ch.OverlapTokens, opts.OverlapTokens)
					if ch.OverlapTokens > 0 {
						overlaps++
						prev := chunks[i-1].ChunkText
						// The overlap is a suffix of the previous chunk.
						found := false
						for k := 1; k <= len(ch.ChunkText) && k <= len(prev); k++ {
							if strings.HasSuffix(prev, ch.ChunkText[:k]) && tok.Count(ch.ChunkText[:k]) == ch.OverlapTokens {
								found = true
								break
							}
						}
						require.True(t, found, "chunk %d overlap (%d tokens) is not a suffix of chunk %d:\n%q\n%q", i, ch.OverlapTokens, i-1, prev, ch.ChunkText)
					}
				}
				if opts.OverlapTokens > 0 {
					require.Greater(t, overlaps, 0)
				} else {
					require.Zero(t, overlaps)
				}
				requireCovers(t, doc, chunks)
			}
		})
	}
}

// requireCovers checks that every word of the source appears, in order, in
// the chunks (overlap may repeat words; nothing may be lost).
func requireCovers(t *testing.T, src string, chunks []Chunk) {
	t.Helper()
	var all []string
	for _, ch := range chunks {
		all = append(all, strings.Fields(ch.ChunkText)...)
	}
	k := 0
	for _, w := range strings.Fields(src) {
		for k < len(all) && all[k] != w {
			k++
		}
		require.Less(t, k, len(all), "word %q lost", w)
		k++
	}
}

func TestPlainTextAndAbstract(t *testing.T) {
	c := newTestChunker(t, Options{TargetTokens: 60, OverlapTokens: 10})
	tests := []struct {
		name   string
		format Format
		title  string
		text   string
		header string
		min    int
	}{
		{"abstract single chunk", Abstract, "A study of things", "Short abstract text.", "A study of things", 1},
		{"abstract long", Abstract, "Long study", sentences("abs", 20), "Long study", 3},
		{"plain paragraphs", PlainText, "notes.txt", "First paragraph.\n\nSecond paragraph.\n\n\n" + sentences("p", 12), "notes.txt", 2},
		{"empty", PlainText, "x", "  \n\n ", "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			chunks, err := c.Split(t.Context(), tc.format, tc.title, tc.text)
			require.NoError(t, err)
			require.GreaterOrEqual(t, len(chunks), tc.min)
			if tc.min == 0 {
				require.Empty(t, chunks)
				return
			}
			for _, ch := range chunks {
				require.Equal(t, tc.header, ch.ContextHeader)
				require.LessOrEqual(t, ch.ChunkTokenCount, 60)
			}
			requireCovers(t, tc.text, chunks)
		})
	}
}

func TestMarkdownEdgeCases(t *testing.T) {
	c := newTestChunker(t, DefaultOptions())
	tests := []struct {
		name    string
		doc     string
		headers []string
	}{
		{"unclosed fence runs to end", "# A\n\n```\ncode\n# not heading", []string{"A"}},
		{"closing hashes", "## Setup ##\n\ntext", []string{"Setup"}},
		{"hashtag is not heading", "#hashtag text", []string{""}},
		{"deep levels pop", "# A\n\n### C\n\nx\n\n## B\n\ny", []string{"A"}},
		{"crlf lines", "# A\r\n\r\ntext\r\n", []string{"A"}},
		{"inline backticks not fence", "```not a fence``` text\n\n# H\n\nbody", []string{""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			chunks, err := c.Split(t.Context(), Markdown, "", tc.doc)
			require.NoError(t, err)
			require.Equal(t, tc.headers, headers(chunks))
		})
	}
	// With a tiny target the sections separate and the path pops correctly.
	small := newTestChunker(t, Options{TargetTokens: 40, OverlapTokens: 5})
	chunks, err := small.Split(t.Context(), Markdown, "", "# A\n\n### C\n\n"+sentences("c", 3)+"\n\n## B\n\n"+sentences("b", 3))
	require.NoError(t, err)
	require.Contains(t, headers(chunks), "A > C")
	require.Contains(t, headers(chunks), "A > B")
}

func TestNewValidates(t *testing.T) {
	_, err := New(nil, DefaultOptions())
	require.Error(t, err)
	tok, err := cl100k.Load()
	require.NoError(t, err)
	_, err = New(tok, Options{TargetTokens: 100, OverlapTokens: 60})
	require.ErrorContains(t, err, "overlap")
	_, err = New(tok, Options{TargetTokens: 100, OverlapTokens: 10, MaxCodeTokens: 50})
	require.ErrorContains(t, err, "max code")
	c := newTestChunker(t, DefaultOptions())
	_, err = c.Split(t.Context(), Format(99), "", "x")
	require.Error(t, err)
}

func TestSentenceStarts(t *testing.T) {
	s := "First one. Second one! e.g. not split. (Third) here.\nNext line"
	var got []string
	starts := sentenceStarts(s, 0, len(s))
	for i, p := range starts {
		e := len(s)
		if i+1 < len(starts) {
			e = starts[i+1]
		}
		got = append(got, strings.TrimSpace(s[p:e]))
	}
	require.Equal(t, []string{"First one.", "Second one! e.g. not split.", "(Third) here.", "Next line"}, got)
}

func TestTitleHeadingNotRepeated(t *testing.T) {
	c, err := NewDefault()
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := c.Split(t.Context(), Markdown, "Threat Modelling Guide", "# Threat Modelling Guide\n\nIntro text.\n\n## When\n\nBody text.\n")
	if err != nil {
		t.Fatal(err)
	}
	var headers []string
	for _, ch := range chunks {
		headers = append(headers, ch.ContextHeader)
	}
	for _, h := range headers {
		if strings.Contains(h, "Threat Modelling Guide > Threat Modelling Guide") {
			t.Fatalf("title repeated in context header: %q", headers)
		}
	}
	if got := chunks[0].ContextHeader; got != "Threat Modelling Guide" {
		t.Fatalf("first header %q", got)
	}
}

// A pre-tokenizer piece longer than a chunk (a run of letters with no
// space or punctuation: CJK text without punctuation, a DNA sequence, text
// extracted without spaces) is cut inside the piece. Cutting only between
// pieces recursed on the same range with a shrinking limit that stopped
// shrinking at 7, until the stack overflowed and took the process down.
func TestOversizedPieceIsCut(t *testing.T) {
	tok, err := cl100k.Load()
	require.NoError(t, err)
	docs := map[string]string{
		"CJK without punctuation": strings.Repeat("知识库搜索服务", 60),
		"letters only":            strings.Repeat("a", 3000),
		"DNA sequence":            "Sequence: " + strings.Repeat("ACGTTGCAAGCT", 120) + ". The end.",
	}
	for name, doc := range docs {
		for _, opts := range []Options{{TargetTokens: 16, OverlapTokens: -1}, {TargetTokens: 64, OverlapTokens: 8}, DefaultOptions()} {
			t.Run(fmt.Sprintf("%s/%d", name, opts.TargetTokens), func(t *testing.T) {
				c := newTestChunker(t, opts)
				for _, format := range []Format{Markdown, PlainText} {
					chunks, err := c.Split(t.Context(), format, "T", doc)
					require.NoError(t, err)
					require.NotEmpty(t, chunks)
					covered := 0
					for _, ch := range chunks {
						require.LessOrEqual(t, ch.ChunkTokenCount, c.Options().TargetTokens)
						require.Equal(t, tok.Count(ch.ChunkText), ch.ChunkTokenCount)
						require.Contains(t, doc, ch.ChunkText)
						covered += len(ch.ChunkText)
					}
					require.GreaterOrEqual(t, covered, len(strings.Join(strings.Fields(doc), "")), "text lost")
				}
			})
		}
	}
}
