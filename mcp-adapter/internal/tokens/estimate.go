package tokens

import (
	"math"
	"unicode"
	"unicode/utf8"

	"github.com/bmcis/knowledge/platform/cl100k"
)

// The estimator mimics the two stages of cl100k_base in one streaming pass.
//
// Stage one, pre-tokenization, splits text into pieces approximately the
// way the encoder's pattern does: a word is an optional single leading
// non-letter (usually a space or a quote) followed by letters; numbers are
// split into groups of at most three digits; a run of punctuation keeps an
// optional leading space and its trailing newlines; white space runs stand
// alone.
//
// Stage two, byte-pair merging, is replaced by a lookup and a length model:
// a piece that is one entry of the cl100k vocabulary costs one token;
// otherwise a word segment costs one token up to wordFree letters and one
// more per wordStep letters after that (an all-capital segment capsBase,
// plus one per capsStep letters past four), a punctuation run one token per
// punctStep characters, each non-ASCII letter nonASCIICost, and any piece
// outside the vocabulary at least two tokens. The constants were fitted
// against the real encoder on prose, markdown, code, identifiers and JSON.
const (
	wordFree     = 8
	wordStep     = 3.2
	capsBase     = 1.3
	capsStep     = 3.5
	punctStep    = 2.6
	nonASCIICost = 0.9
)

type class uint8

const (
	clNone class = iota
	clLetter
	clDigit
	clSpace
	clNewline
	clPunct
)

func classify(r rune) class {
	switch {
	case r == '\n' || r == '\r':
		return clNewline
	case r < utf8.RuneSelf:
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z':
			return clLetter
		case '0' <= r && r <= '9':
			return clDigit
		case r == ' ' || r == '\t' || r == '\v' || r == '\f':
			return clSpace
		}
		return clPunct
	case unicode.IsLetter(r):
		return clLetter
	case unicode.IsDigit(r) || unicode.IsNumber(r):
		return clDigit
	case unicode.IsSpace(r):
		return clSpace
	}
	return clPunct
}

// scanner is a streaming piece counter. Feed it runes; finish returns the
// estimate. It keeps only the state of the current piece, so estimating a
// JSON string can feed the escaped form without building it.
type scanner struct {
	total float64

	cur class // piece being built: clNone, clLetter, clDigit, clPunct, clNewline

	// word piece
	letters   int  // ASCII letters in the current camelCase segment
	upper     int  // uppercase letters in the current segment
	prevLower bool // previous letter was lowercase (a camelCase boundary follows)
	nonASCII  int  // non-ASCII letters in the word

	digits int // digits in the current number run

	punct       int  // characters in the current punctuation run
	punctSpaced bool // the run took a leading space
	punctNL     bool // the run took trailing newlines

	spaces int // pending spaces not yet part of a piece

	wordCost float64 // model cost of the word's finished segments
	piece    []byte  // bytes of the current word or punctuation piece
}

// flushSegment prices one camelCase segment of a word: byte-pair merges are
// case-sensitive, so "GetQuery" costs about what "Get" and "Query" cost, and
// all-capital segments split more than lowercase ones.
func (s *scanner) flushSegment() {
	n := s.letters
	if n == 0 {
		return
	}
	var t float64
	if s.upper == n && n >= 2 {
		t = capsBase + math.Max(0, float64(n-4))/capsStep
	} else {
		t = 1 + math.Max(0, float64(n-wordFree))/wordStep
	}
	s.wordCost += t
	s.letters, s.upper = 0, 0
}

// flushWord prices the word piece: one token when the piece (with its
// prefix) is in the cl100k vocabulary, else the length model, at least two
// tokens since the encoder has to split it.
func (s *scanner) flushWord() {
	s.flushSegment()
	cost := s.wordCost + float64(s.nonASCII)*nonASCIICost
	if inVocabulary(s.piece) {
		cost = 1
	} else if len(s.piece) <= maxPiece {
		cost = math.Max(cost, 2)
	}
	s.total += cost
	s.nonASCII, s.prevLower, s.wordCost = 0, false, 0
	s.piece = s.piece[:0]
}

func (s *scanner) flush() {
	switch s.cur {
	case clLetter:
		s.flushWord()
	case clDigit:
		s.total += float64((s.digits + 2) / 3)
		s.digits = 0
	case clPunct:
		cost := math.Max(1, float64(s.punct)/punctStep)
		if inVocabulary(s.piece) {
			cost = 1
		} else if s.punct > 1 {
			cost = math.Max(cost, 2)
		}
		s.total += cost
		s.punct, s.punctSpaced, s.punctNL = 0, false, false
		s.piece = s.piece[:0]
	case clNewline:
		s.total++
	}
	s.cur = clNone
}

// takeSpaces settles pending spaces before a piece that may start with one
// space (a word or punctuation): all but the last form one piece, the last
// joins the new piece. It reports whether a space joined.
func (s *scanner) takeSpaces() bool {
	if s.spaces == 0 {
		return false
	}
	if s.spaces > 1 {
		s.total++
	}
	s.spaces = 0
	return true
}

func (s *scanner) feed(r rune) {
	switch classify(r) {
	case clSpace:
		if s.cur != clNone {
			s.flush()
		}
		s.spaces++
	case clLetter:
		if s.cur == clLetter {
			s.addLetter(r)
			return
		}
		switch {
		case s.takeSpaces():
			// " word": the space is the word's prefix
			s.flush()
			s.piece = append(s.piece[:0], ' ')
		case s.cur == clPunct && s.punct == 1 && !s.punctSpaced && !s.punctNL:
			// a lone punctuation character right before letters is the
			// word's prefix ("_id", "(see"); its bytes stay in piece
			s.punct, s.cur = 0, clNone
		default:
			s.flush()
			s.piece = s.piece[:0]
		}
		s.cur = clLetter
		s.addLetter(r)
	case clDigit:
		if s.cur == clDigit {
			s.digits++
			return
		}
		s.flush()
		if s.spaces > 0 {
			// spaces never prefix numbers: one piece, or two for a run
			s.total += math.Min(float64(s.spaces), 2)
			s.spaces = 0
		}
		s.cur = clDigit
		s.digits = 1
	case clPunct:
		if s.cur == clPunct && !s.punctNL {
			s.punct++
			s.piece = utf8.AppendRune(s.piece, r)
			return
		}
		s.flush()
		spaced := s.takeSpaces()
		s.piece = s.piece[:0]
		if spaced {
			s.piece = append(s.piece, ' ')
		}
		s.piece = utf8.AppendRune(s.piece, r)
		s.cur = clPunct
		s.punct, s.punctSpaced = 1, spaced
	case clNewline:
		switch s.cur {
		case clPunct:
			s.punctNL = true // trailing newlines belong to the punctuation
			s.piece = utf8.AppendRune(s.piece, r)
			return
		case clNewline:
			return
		}
		s.flush()
		s.spaces = 0 // spaces then newlines form one piece
		s.cur = clNewline
	}
}

func (s *scanner) addLetter(r rune) {
	s.piece = utf8.AppendRune(s.piece, r)
	if r >= utf8.RuneSelf {
		s.nonASCII++
		s.prevLower = false
		return
	}
	upper := 'A' <= r && r <= 'Z'
	if upper && s.prevLower {
		s.flushSegment()
	}
	s.prevLower = !upper
	if upper {
		s.upper++
	}
	s.letters++
}

func (s *scanner) finish() int {
	s.flush()
	if s.spaces > 0 {
		s.total++
		s.spaces = 0
	}
	n := int(s.total + 0.5)
	s.total = 0
	return n
}

// maxPiece bounds the pieces looked up in the vocabulary.
const maxPiece = 48

func inVocabulary(piece []byte) bool {
	if len(piece) == 0 || len(piece) > maxPiece {
		return false
	}
	if len(piece) == 1 {
		return true // every byte is a token
	}
	tok, err := cl100k.Load()
	if err != nil {
		return false
	}
	return tok.IsToken(piece)
}

// EstimateText approximates Count(text) without running the encoder.
func EstimateText(text string) int {
	var s scanner
	for _, r := range text {
		s.feed(r)
	}
	return s.finish()
}

// feedJSONString feeds the JSON encoding of str (quotes and escapes
// included, as encoding/json writes it with HTML escaping off) without
// building it.
func (s *scanner) feedJSONString(str string) {
	s.feed('"')
	for _, r := range str {
		switch r {
		case '"', '\\':
			s.feed('\\')
			s.feed(r)
		case '\n':
			s.feed('\\')
			s.feed('n')
		case '\r':
			s.feed('\\')
			s.feed('r')
		case '\t':
			s.feed('\\')
			s.feed('t')
		case '\b':
			s.feed('\\')
			s.feed('b')
		case '\f':
			s.feed('\\')
			s.feed('f')
		case '\u2028', '\u2029', utf8.RuneError:
			s.feed('\\')
			s.feed('u')
			s.feed('2')
			s.feed('0')
			s.feed('2')
			s.feed('8')
		default:
			if r < 0x20 {
				s.feed('\\')
				s.feed('u')
				s.feed('0')
				s.feed('0')
				s.feed('1')
				s.feed('f')
				continue
			}
			s.feed(r)
		}
	}
	s.feed('"')
}

// Sink accumulates an estimate from pieces of text fed in order, as they
// would appear in the final output.
type Sink struct {
	s     scanner
	known int
}

// Raw feeds text as it will appear.
func (k *Sink) Raw(text string) {
	for _, r := range text {
		k.s.feed(r)
	}
}

// Byte feeds one ASCII character.
func (k *Sink) Byte(b byte) { k.s.feed(rune(b)) }

// JSONString feeds str encoded as a JSON string.
func (k *Sink) JSONString(str string) { k.s.feedJSONString(str) }

// Known adds n tokens for a span whose count is already known, ending the
// piece being built.
func (k *Sink) Known(n int) {
	k.known += k.s.finish() + n
}

// Total returns the estimate of everything fed so far and resets the sink.
func (k *Sink) Total() int {
	n := k.known + k.s.finish()
	k.known = 0
	return n
}

// KnownJSONString estimates a JSON string whose plain-text token count is
// known. Escaping adds about one token per newline and 0.4 per double
// quote (fitted against cl100k on prose, markdown and code chunks).
func KnownJSONString(text string, plainTokens int) int {
	newlines, quotes := 0, 0
	for i := 0; i < len(text); i++ {
		switch text[i] {
		case '\n':
			newlines++
		case '"':
			quotes++
		}
	}
	return plainTokens + newlines + int(0.4*float64(quotes)+0.5) + 1
}

// EstimateOpaque estimates an opaque machine token such as a base64url
// cursor, which byte-pair encoding splits into short fragments: about 1.37
// characters per token (measured on adapter cursors).
func EstimateOpaque(s string) int {
	return int(float64(len(s))/1.37 + 0.5)
}
