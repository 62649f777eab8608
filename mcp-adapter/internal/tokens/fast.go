package tokens

import (
	"math"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// countExact counts cl100k_base tokens exactly, as tiktoken does, but
// without the regular-expression engine: the pre-tokenizer below is a
// hand-written matcher for the cl100k pattern
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//	 ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// and each piece is priced by the byte-pair merge over the same ranks. It
// is tested against tiktoken-go on prose, markdown, code, JSON and random
// Unicode. Each piece's count is cached: pieces repeat a lot.
func countExact(text string, ranks map[string]int) int {
	if !utf8.ValidString(text) {
		// tiktoken-go decodes to runes first, so each invalid byte becomes
		// U+FFFD.
		var b strings.Builder
		for i := 0; i < len(text); {
			r, size := utf8.DecodeRuneInString(text[i:])
			b.WriteRune(r)
			i += size
		}
		text = b.String()
	}
	n := 0
	forEachPiece(text, func(piece string) {
		n += pieceTokens(piece, ranks)
	})
	return n
}

func isLetter(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z'
	}
	return unicode.IsLetter(r)
}

func isNumber(r rune) bool {
	if r < utf8.RuneSelf {
		return '0' <= r && r <= '9'
	}
	return unicode.IsNumber(r)
}

func isSpace(r rune) bool {
	if r < utf8.RuneSelf {
		return r == ' ' || '\t' <= r && r <= '\r'
	}
	return unicode.IsSpace(r)
}

func isNewline(r rune) bool { return r == '\r' || r == '\n' }

// isOther is [^\s\p{L}\p{N}].
func isOther(r rune) bool { return !isSpace(r) && !isLetter(r) && !isNumber(r) }

func asciiLower(r rune) rune {
	if 'A' <= r && r <= 'Z' {
		return r + 'a' - 'A'
	}
	return r
}

// forEachPiece calls emit with each pre-token of text (valid UTF-8), in
// order, trying the pattern's alternatives in order at each position.
type runeBuf struct {
	rs  []rune
	off []int
}

var runeBufs = sync.Pool{New: func() any { return new(runeBuf) }}

func forEachPiece(text string, emit func(string)) {
	// runes and their byte offsets; off[len(rs)] = len(text)
	buf := runeBufs.Get().(*runeBuf)
	defer runeBufs.Put(buf)
	rs, off := buf.rs[:0], buf.off[:0]
	defer func() { buf.rs, buf.off = rs[:0], off[:0] }()
	for i, r := range text {
		rs = append(rs, r)
		off = append(off, i)
	}
	off = append(off, len(text))
	n := len(rs)
	at := func(i int) rune {
		if i < n {
			return rs[i]
		}
		return -1
	}
	i := 0
	for i < n {
		r := rs[i]
		end := -1
		// 1. contractions
		if r == '\'' {
			switch asciiLower(at(i + 1)) {
			case 's', 't', 'm', 'd':
				end = i + 2
			case 'r', 'v':
				if asciiLower(at(i+2)) == 'e' {
					end = i + 3
				}
			case 'l':
				if asciiLower(at(i+2)) == 'l' {
					end = i + 3
				}
			}
		}
		// 2. an optional non-letter, non-number, non-newline, then letters
		if end < 0 {
			j := i
			if !isLetter(r) && !isNumber(r) && !isNewline(r) {
				j = i + 1
			}
			if j < n && isLetter(rs[j]) {
				k := j + 1
				for k < n && isLetter(rs[k]) {
					k++
				}
				end = k
			}
		}
		// 3. one to three numbers
		if end < 0 && isNumber(r) {
			k := i + 1
			for k < n && k-i < 3 && isNumber(rs[k]) {
				k++
			}
			end = k
		}
		// 4. an optional space, other characters, trailing newlines
		if end < 0 {
			j := i
			if r == ' ' {
				j = i + 1
			}
			if j < n && isOther(rs[j]) {
				k := j + 1
				for k < n && isOther(rs[k]) {
					k++
				}
				for k < n && isNewline(rs[k]) {
					k++
				}
				end = k
			}
		}
		// 5-7. white space
		if end < 0 && isSpace(r) {
			k, lastNL := i, -1
			for k < n && isSpace(rs[k]) {
				if isNewline(rs[k]) {
					lastNL = k
				}
				k++
			}
			switch {
			case lastNL >= 0: // \s*[\r\n]+
				end = lastNL + 1
			case k == n: // \s+(?!\S) at the end
				end = k
			case k-i >= 2: // \s+(?!\S) leaves the last space to what follows
				end = k - 1
			default: // \s+
				end = k
			}
		}
		if end < 0 {
			end = i + 1 // unreachable for valid input; never loop forever
		}
		emit(text[off[i]:off[end]])
		i = end
	}
}

// pieceCache remembers the token count of pieces outside the vocabulary.
// It is dropped wholesale when it grows past pieceCacheMax.
var pieceCache struct {
	sync.RWMutex
	m map[string]int
}

const pieceCacheMax = 200_000

func pieceTokens(piece string, ranks map[string]int) int {
	if len(piece) == 1 {
		return 1 // every byte is a token
	}
	if _, ok := ranks[piece]; ok {
		return 1
	}
	pieceCache.RLock()
	n, ok := pieceCache.m[piece]
	pieceCache.RUnlock()
	if ok {
		return n
	}
	n = bytePairCount([]byte(piece), ranks)
	pieceCache.Lock()
	if pieceCache.m == nil || len(pieceCache.m) >= pieceCacheMax {
		pieceCache.m = make(map[string]int, 1024)
	}
	pieceCache.m[strings.Clone(piece)] = n
	pieceCache.Unlock()
	return n
}

// bytePairCount runs the byte-pair merge over piece and returns the number
// of tokens it ends with: repeatedly merge the adjacent pair whose merged
// bytes have the lowest rank, until no adjacent pair is in the ranks.
func bytePairCount(piece []byte, ranks map[string]int) int {
	// bounds[i] is the start of part i; the last entry is len(piece).
	bounds := make([]int, len(piece)+1)
	for i := range bounds {
		bounds[i] = i
	}
	rank := func(i int) int { // rank of merging parts i and i+1
		if i+2 >= len(bounds) {
			return math.MaxInt
		}
		if r, ok := ranks[string(piece[bounds[i]:bounds[i+2]])]; ok {
			return r
		}
		return math.MaxInt
	}
	ranksOf := make([]int, len(bounds))
	for i := range ranksOf {
		ranksOf[i] = rank(i)
	}
	for len(bounds) > 2 {
		best, at := math.MaxInt, -1
		for i := 0; i < len(bounds)-2; i++ {
			if ranksOf[i] < best {
				best, at = ranksOf[i], i
			}
		}
		if at < 0 {
			break
		}
		// merge parts at and at+1
		bounds = append(bounds[:at+1], bounds[at+2:]...)
		ranksOf = append(ranksOf[:at+1], ranksOf[at+2:]...)
		ranksOf[at] = rank(at)
		if at > 0 {
			ranksOf[at-1] = rank(at - 1)
		}
	}
	return len(bounds) - 1
}
