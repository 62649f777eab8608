// Package cl100k counts and encodes cl100k_base tokens, the encoding the
// chunker sizes chunks with and the MCP adapter prices answers with. It is
// the one tokenizer of the project: both agree on a chunk's token count
// because they run this code. It depends only on the embedded merge table
// (tiktoken-go-loader), so the adapter stays light.
package cl100k

import (
	"container/heap"
	"fmt"
	"math"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"

	"github.com/bmcis/knowledge/platform/memo"
)

// Tokenizer is a cl100k_base byte-pair encoder. It produces exactly the
// tokens of tiktoken's cl100k_base for ordinary text (special-token strings
// are treated as text), which tests check against tiktoken-go on real data.
//
// Why not call tiktoken-go directly: its pre-tokenizer is a backtracking
// regexp2 over []rune conversions, and measured ~0.7M tokens/s on SciFact,
// i.e. the chunker would spend most of ingestion there. This hand-written
// pre-tokenizer plus a piece cache is several times faster (see benchmarks).
// The merge ranks come from tiktoken-go-loader's embedded (offline)
// cl100k_base file, so nothing is fetched at run time.
//
// A Tokenizer is safe for concurrent use.
type Tokenizer struct {
	ranks map[string]int
	// cache holds token counts of pieces that are not single tokens (long
	// or rare words).
	cache *memo.Table[int]
}

var (
	loadOnce sync.Once
	shared   *Tokenizer
	loadErr  error
)

// Load returns the shared tokenizer, parsing the embedded merge table on
// first use (~100 ms).
func Load() (*Tokenizer, error) {
	loadOnce.Do(func() {
		ranks, err := tiktoken_loader.NewOfflineLoader().LoadTiktokenBpe("cl100k_base.tiktoken")
		if err != nil {
			loadErr = fmt.Errorf("load cl100k_base ranks: %w", err)
			return
		}
		shared = &Tokenizer{ranks: ranks, cache: memo.New[int](1 << 13)}
	})
	return shared, loadErr
}

// IsToken reports whether piece is one entry of the vocabulary; the
// adapter's estimator prices such a piece as one token.
func (t *Tokenizer) IsToken(piece []byte) bool {
	_, ok := t.ranks[string(piece)]
	return ok
}

// Count returns the number of cl100k tokens of text.
func (t *Tokenizer) Count(text string) int {
	n := 0
	t.pieces(text, func(_, _, c int) { n += c })
	return n
}

// Encode returns the cl100k token ids of text.
func (t *Tokenizer) Encode(text string) []int {
	text = validUTF8(text)
	out := []int{}
	splitPieces(text, func(s, e int) {
		p := text[s:e]
		if id, ok := t.ranks[p]; ok {
			out = append(out, id)
			return
		}
		out = append(out, encodePiece(p, t.ranks)...)
	})
	return out
}

// Pieces calls fn for every pre-tokenizer piece of text with its byte span
// and token count. Pieces never straddle a token, so cutting text at a piece
// boundary splits the token sequence cleanly; the chunker uses this to cut
// oversized passages and to take overlaps at token granularity.
func (t *Tokenizer) Pieces(text string, fn func(start, end, tokens int)) {
	t.pieces(text, fn)
}

func (t *Tokenizer) pieces(text string, fn func(start, end, tokens int)) {
	text = validUTF8(text)
	splitPieces(text, func(s, e int) {
		fn(s, e, t.pieceTokens(text[s:e]))
	})
}

func (t *Tokenizer) pieceTokens(p string) int {
	if _, ok := t.ranks[p]; ok {
		return 1
	}
	if len(p) > maxPiece {
		return len(encodePiece(p, t.ranks)) // kept out of the cache: it would hold the whole run
	}
	if n, ok := t.cache.Get(p); ok {
		return n
	}
	n := len(bytePairEncode([]byte(p), t.ranks))
	t.cache.Put(p, n)
	return n
}

// maxPiece bounds what one merge loop works on. A longer piece (a run of
// letters with no space or punctuation that long is not prose: a 60 MB one
// in an upload held gigabytes during its merges) is encoded in parts of
// about this size, cut between runes, so memory stays bounded and time
// linear; its tokens may differ from tiktoken's around the cuts. Chunks,
// whose counts must be exact, are far shorter.
const maxPiece = 64 << 10

// encodePiece is bytePairEncode of p, in parts of at most maxPiece bytes.
func encodePiece(p string, ranks map[string]int) []int {
	if len(p) <= maxPiece {
		return bytePairEncode([]byte(p), ranks)
	}
	var out []int
	for len(p) > 0 {
		n := min(maxPiece, len(p))
		for n < len(p) && !utf8.RuneStart(p[n]) {
			n++
		}
		out = append(out, bytePairEncode([]byte(p[:n]), ranks)...)
		p = p[n:]
	}
	return out
}

// validUTF8 mirrors tiktoken-go, which converts text to []rune and so turns
// every invalid byte into U+FFFD before encoding.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		b.WriteRune(r) // RuneError for an invalid byte, as []rune(s) does
		i += size
	}
	return b.String()
}

// Character classes of the cl100k pattern. Go's unicode tables are the ones
// regexp2 uses, so categories agree.
func isL(r rune) bool {
	if r < utf8.RuneSelf {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
	}
	return unicode.IsLetter(r)
}

func isN(r rune) bool {
	if r < utf8.RuneSelf {
		return r >= '0' && r <= '9'
	}
	return unicode.IsNumber(r)
}

// isS is .NET's \s: [\f\n\r\t\v\x85\p{Z}].
func isS(r rune) bool {
	if r < utf8.RuneSelf {
		return r == ' ' || r >= '\t' && r <= '\r'
	}
	return r == 0x85 || unicode.In(r, unicode.Z)
}

func isNL(r rune) bool { return r == '\r' || r == '\n' }

func decodeAt(s string, i int) (rune, int) {
	if i >= len(s) {
		return -1, 0
	}
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

// splitPieces implements cl100k_base's pre-tokenizer
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//	 ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// by hand: at each position the alternatives are tried in order, exactly as
// the backtracking regex engine would, and the first that matches wins.
func splitPieces(s string, emit func(start, end int)) {
	i := 0
	for i < len(s) {
		r0, n0 := decodeAt(s, i)
		// 1. Contractions.
		if r0 == '\'' {
			if e := contraction(s, i+1); e > 0 {
				emit(i, e)
				i = e
				continue
			}
		}
		r1, n1 := decodeAt(s, i+n0)
		// 2. [^\r\n\p{L}\p{N}]?\p{L}+
		if !isNL(r0) && !isL(r0) && !isN(r0) && r1 >= 0 && isL(r1) {
			e := scanLetters(s, i+n0+n1)
			emit(i, e)
			i = e
			continue
		}
		if isL(r0) {
			e := scanLetters(s, i+n0)
			emit(i, e)
			i = e
			continue
		}
		// 3. \p{N}{1,3}
		if isN(r0) {
			e := i + n0
			for k := 0; k < 2; k++ {
				r, n := decodeAt(s, e)
				if r < 0 || !isN(r) {
					break
				}
				e += n
			}
			emit(i, e)
			i = e
			continue
		}
		// 4.  ?[^\s\p{L}\p{N}]+[\r\n]*
		isPunct := func(r rune) bool { return r >= 0 && !isS(r) && !isL(r) && !isN(r) }
		start := -1
		if r0 == ' ' && isPunct(r1) {
			start = i + n0
		} else if isPunct(r0) {
			start = i
		}
		if start >= 0 {
			e := start
			for {
				r, n := decodeAt(s, e)
				if !isPunct(r) {
					break
				}
				e += n
			}
			for e < len(s) && (s[e] == '\r' || s[e] == '\n') {
				e++
			}
			emit(i, e)
			i = e
			continue
		}
		// r0 is whitespace from here on.
		// Maximal whitespace run [i, j) and the end of its last newline.
		j, lastNL := i, -1
		for {
			r, n := decodeAt(s, j)
			if r < 0 || !isS(r) {
				break
			}
			j += n
			if isNL(r) {
				lastNL = j
			}
		}
		// 5. \s*[\r\n]+ : greedy \s* backs off to the last newline, then
		// [\r\n]+ takes it (and any newline right after, already counted).
		if lastNL > 0 {
			emit(i, lastNL)
			i = lastNL
			continue
		}
		// 6. \s+(?!\S): the whole run at end of text, else all but its last
		// character so that character can lead the next word.
		if j == len(s) {
			emit(i, j)
			i = j
			continue
		}
		_, lastSize := utf8.DecodeLastRuneInString(s[i:j])
		if j-lastSize > i {
			emit(i, j-lastSize)
			i = j - lastSize
			continue
		}
		// 7. \s+ : a single whitespace character before a non-space.
		emit(i, j)
		i = j
	}
}

// contraction matches (?i:'s|'t|'re|'ve|'m|'ll|'d) after the apostrophe at
// i-1 and returns the end offset, or 0.
func contraction(s string, i int) int {
	lower := func(k int) byte {
		if k >= len(s) {
			return 0
		}
		c := s[k]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		return c
	}
	switch c := lower(i); c {
	case 's', 't', 'm', 'd':
		return i + 1
	case 'r', 'v':
		if lower(i+1) == 'e' {
			return i + 2
		}
	case 'l':
		if lower(i+1) == 'l' {
			return i + 2
		}
	}
	// Non-ASCII letters that case-fold onto these (e.g. the Kelvin sign)
	// are not handled; they do not fold onto s/t/r/e/v/m/l/d.
	return 0
}

func scanLetters(s string, e int) int {
	for {
		r, n := decodeAt(s, e)
		if r < 0 || !isL(r) {
			return e
		}
		e += n
	}
}

// longPiece is the length from which bytePairEncode merges with a heap:
// the scan below costs the square of the length, so a run of letters with
// no space or punctuation (a megabyte of it in one upload) would pin a core
// for hours. Shorter pieces, all of ordinary text, keep the scan.
const longPiece = 128

// bytePairEncode is tiktoken's merge loop: repeatedly merge the adjacent
// pair whose concatenation has the lowest rank.
func bytePairEncode(piece []byte, ranks map[string]int) []int {
	if len(piece) >= longPiece {
		return bytePairEncodeHeap(piece, ranks)
	}
	if len(piece) == 1 {
		return []int{ranks[string(piece)]}
	}
	type part struct{ start, rank int }
	parts := make([]part, len(piece)+1)
	rankOf := func(i, skip int) int {
		if i+skip+2 < len(parts) {
			if r, ok := ranks[string(piece[parts[i].start:parts[i+skip+2].start])]; ok {
				return r
			}
		}
		return math.MaxInt
	}
	for i := range parts {
		parts[i] = part{start: i, rank: math.MaxInt}
	}
	for i := 0; i < len(parts)-2; i++ {
		parts[i].rank = rankOf(i, 0)
	}
	for len(parts) > 1 {
		minRank, minIdx := math.MaxInt, -1
		for i := 0; i < len(parts)-1; i++ {
			if parts[i].rank < minRank {
				minRank, minIdx = parts[i].rank, i
			}
		}
		if minIdx < 0 {
			break
		}
		i := minIdx
		parts[i].rank = rankOf(i, 1)
		if i > 0 {
			parts[i-1].rank = rankOf(i-1, 1)
		}
		parts = append(parts[:i+1], parts[i+2:]...)
	}
	out := make([]int, len(parts)-1)
	for i := range out {
		out[i] = ranks[string(piece[parts[i].start:parts[i+1].start])]
	}
	return out
}

// bytePairEncodeHeap makes the merges of bytePairEncode in the same order
// (the lowest rank first, the leftmost of equal ranks) in O(n log n): the
// parts are a linked list of start offsets and the candidate pairs a heap,
// an entry dropped when taken if either part has changed since.
func bytePairEncodeHeap(piece []byte, ranks map[string]int) []int {
	n := len(piece)
	// Part s is piece[s:next[s]]; prev[s] is the part before it, -1 for none.
	next := make([]int, n)
	prev := make([]int, n)
	for i := range n {
		next[i], prev[i] = i+1, i-1
	}
	alive := make([]bool, n)
	for i := range alive {
		alive[i] = true
	}
	h := &pairHeap{}
	push := func(s int) {
		if t := next[s]; t < n {
			if r, ok := ranks[string(piece[s:next[t]])]; ok {
				heap.Push(h, pair{rank: r, start: s, end: next[t]})
			}
		}
	}
	for s := 0; s < n-1; s++ {
		push(s)
	}
	for h.Len() > 0 {
		p := heap.Pop(h).(pair)
		t := next[p.start]
		if !alive[p.start] || t >= n || next[t] != p.end {
			continue // a part of it was merged since: stale
		}
		alive[t] = false
		next[p.start] = next[t]
		if next[t] < n {
			prev[next[t]] = p.start
		}
		push(p.start)
		if q := prev[p.start]; q >= 0 {
			push(q)
		}
	}
	var out []int
	for s := 0; s < n; s = next[s] {
		out = append(out, ranks[string(piece[s:next[s]])])
	}
	return out
}

// pair is a candidate merge of the part at start with the next one, which
// together span piece[start:end].
type pair struct{ rank, start, end int }

// pairHeap orders pairs by rank, then start: the scan's choice.
type pairHeap []pair

func (h pairHeap) Len() int { return len(h) }
func (h pairHeap) Less(i, j int) bool {
	return h[i].rank < h[j].rank || h[i].rank == h[j].rank && h[i].start < h[j].start
}
func (h pairHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *pairHeap) Push(x any)   { *h = append(*h, x.(pair)) }
func (h *pairHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
