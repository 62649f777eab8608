// Package tokens counts and estimates cl100k_base tokens.
//
// Count is exact: it is platform/cl100k, the tokenizer the search service
// chunks with, so a chunk's stored token count and the adapter's count of
// the same text agree. EstimateText and Sink are a streaming approximation
// used before any text exists, to plan an answer (how many results fit the
// budget) and to report tokens_estimated.
package tokens

import (
	"github.com/bmcis/knowledge/platform/cl100k"
	"github.com/bmcis/knowledge/platform/memo"
)

// Init loads the encoder. Calling it at start-up moves the one-off load cost
// (a few hundred milliseconds) out of the first tool call and surfaces a
// broken build early.
func Init() error {
	_, err := cl100k.Load()
	return err
}

// Count returns the exact number of cl100k_base tokens in s, the number
// tiktoken's EncodeOrdinary returns (special-token text such as
// "<|endoftext|>" counts as ordinary text).
func Count(s string) int {
	if s == "" {
		return 0
	}
	tok, err := cl100k.Load()
	if err != nil {
		// The ranks are embedded; failing to parse them is a build defect.
		// Fall back to the estimate rather than failing a user's call.
		return EstimateText(s)
	}
	return tok.Count(s)
}

// lineCounts memoises CountLines' segments by fingerprint (8,192 lines),
// so that a line seen once costs no copy.
var lineCounts = memo.NewPrints[int](8192)

// CountLines is Count(s) for a text whose lines recur from one answer to
// the next (the markdown of an answer: a result's heading and confidence
// lines, the notes, the whole page when a search is repeated). It counts s
// segment by segment, cut after each line break that a printable ASCII
// character other than a space follows, and memoises each segment's count. cl100k's pieces never cross
// such a cut (a piece that takes a line break ends with the run of them,
// and no piece starts with a line break and goes on to a non-space), so the
// sum is exactly Count(s) (tested against it).
func CountLines(s string) int {
	if _, err := cl100k.Load(); err != nil {
		return Count(s) // the estimate, which is not a sum over lines
	}
	n := 0
	for len(s) > 0 {
		end := lineCut(s)
		seg := s[:end]
		p := lineCounts.Of(seg)
		c, ok := lineCounts.Get(p)
		if !ok {
			c = Count(seg)
			lineCounts.Put(p, c)
		}
		n += c
		s = s[end:]
	}
	return n
}

// lineCut is the end of s's first segment: just after the first '\n' or
// '\r' followed by a printable ASCII character other than a space, or
// len(s).
func lineCut(s string) int {
	for i := 1; i < len(s); i++ {
		if c := s[i]; (s[i-1] == '\n' || s[i-1] == '\r') && c > ' ' && c < 0x7f {
			return i
		}
	}
	return len(s)
}

// Cut reports whether i is a cut of s that no cl100k piece crosses, so
// that Count(s) == Count(s[:i]) + Count(s[i:]): s[i] is an ASCII letter
// and the two bytes before it are ASCII punctuation other than an
// apostrophe (as before a JSON member name: `,"name`, `{"name`). The piece
// holding s[i-2] can only be a run of punctuation (a piece made of a
// letter run takes at most one character before it, and s[i-1] is no
// letter), and such a run goes on to the letter; the letters start a piece
// of their own, which the regular expression matches looking forward only.
func Cut(s []byte, i int) bool {
	if i < 2 || i >= len(s) {
		return false
	}
	return asciiLetter(s[i]) && asciiPunct(s[i-1]) && asciiPunct(s[i-2])
}

func asciiLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func asciiPunct(c byte) bool {
	return c > ' ' && c < 0x7f && c != '\'' && !asciiLetter(c) && (c < '0' || c > '9')
}
