// Package analysis turns text into the terms the keyword index and the
// builtin embedder work on: Unicode-aware tokenization, lowercasing, English
// stop-word removal and Snowball English (Porter2) stemming.
//
// The same Analyzer must be used at ingestion and at query time, otherwise
// query terms will not meet indexed terms.
package analysis

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/kljensen/snowball/english"

	"github.com/bmcis/knowledge/platform/memo"
)

// StopList selects the English stop-word list.
type StopList int

const (
	// StopLucene is Lucene's 33-word English set (default, chosen by
	// measurement on SciFact; see the eval package's notes).
	StopLucene StopList = iota
	// StopSnowball is the Snowball/Bleve English list (~170 words).
	StopSnowball
	// StopNone keeps every token.
	StopNone
)

// Options configure an Analyzer. The zero value is the measured default.
type Options struct {
	// Stop selects the stop-word list.
	Stop StopList
	// NoStem disables Snowball stemming (useful for measurement only).
	NoStem bool
	// JoinHyphenated additionally emits the concatenation of hyphen-joined
	// alphanumeric parts ("il-6" -> "il", "6", "il6"), so "IL-6" and "IL6"
	// meet. Off by default: it did not help on SciFact (see eval notes).
	JoinHyphenated bool
	// MinLength drops terms shorter than this many runes (0 = keep all).
	MinLength int
}

// Analyzer is safe for concurrent use. Build it once and share it: it keeps
// a bounded stem cache, which is what makes it fast.
type Analyzer struct {
	opts  Options
	stop  map[string]struct{}
	cache *memo.Table[string] // word -> term
}

// New returns an English analyzer with the given options.
func New(opts Options) *Analyzer {
	a := &Analyzer{opts: opts, stop: map[string]struct{}{}, cache: memo.New[string](1 << 14)}
	var list []string
	switch opts.Stop {
	case StopLucene:
		list = luceneEnglishStopWords
	case StopSnowball:
		list = snowballEnglishStopWords
	}
	for _, w := range list {
		a.stop[w] = struct{}{}
	}
	return a
}

// NewEnglish returns the default English analyzer.
func NewEnglish() *Analyzer { return New(Options{}) }

// Options reports the options the analyzer was built with.
func (a *Analyzer) Options() Options { return a.opts }

// Token is one analyzed term with the span of the original text it came
// from. Start and End are byte offsets into the analyzed string.
type Token struct {
	Term     string
	Original string
	Start    int
	End      int
}

// Terms returns the analyzed terms of text in order, duplicates included.
func (a *Analyzer) Terms(text string) []string {
	return a.AppendTerms(make([]string, 0, len(text)/6+1), text)
}

// AppendTerms appends the analyzed terms of text to dst and returns it.
// Reusing dst across calls avoids allocating on the ingestion hot path.
func (a *Analyzer) AppendTerms(dst []string, text string) []string {
	a.scan(text, func(term string, _, _ int) { dst = append(dst, term) })
	return dst
}

// Tokens returns analyzed terms with their original spans. It is the slower
// path, meant for queries, where the original words are needed to report
// which query words matched.
func (a *Analyzer) Tokens(text string) []Token {
	var out []Token
	a.scan(text, func(term string, start, end int) {
		out = append(out, Token{Term: term, Original: text[start:end], Start: start, End: end})
	})
	return out
}

// QueryTerm is a distinct analyzed query term, how often it occurs in the
// query, and the original query words that produced it (in order, deduped).
type QueryTerm struct {
	Term  string
	Count int
	Words []string
}

// QueryTerms analyzes a query into its distinct terms, in first-occurrence
// order, keeping the link back to the words the user typed.
func (a *Analyzer) QueryTerms(query string) []QueryTerm {
	var out []QueryTerm
	idx := map[string]int{}
	for _, tok := range a.Tokens(query) {
		i, ok := idx[tok.Term]
		if !ok {
			i = len(out)
			idx[tok.Term] = i
			out = append(out, QueryTerm{Term: tok.Term})
		}
		qt := &out[i]
		qt.Count++
		if !containsFold(qt.Words, tok.Original) {
			qt.Words = append(qt.Words, tok.Original)
		}
	}
	return out
}

// OriginalWords maps analyzed terms (e.g. a hit's matched terms) back to the
// query words that produced them, in query order and without duplicates.
// Matched terms come in the query's order (the retrievers report them
// so), which one walk of both lists follows; any other order falls back to
// a set.
func OriginalWords(qts []QueryTerm, matched []string) []string {
	var out []string
	j := 0
	for _, qt := range qts {
		if j < len(matched) && matched[j] == qt.Term {
			j++
			out = appendWords(out, qt.Words)
		}
	}
	if j == len(matched) {
		return out
	}
	set := make(map[string]struct{}, len(matched))
	for _, m := range matched {
		set[m] = struct{}{}
	}
	out = nil
	for _, qt := range qts {
		if _, ok := set[qt.Term]; ok {
			out = appendWords(out, qt.Words)
		}
	}
	return out
}

// appendWords appends the words not in out yet (case folded).
func appendWords(out, words []string) []string {
	for _, w := range words {
		if !containsFold(out, w) {
			out = append(out, w)
		}
	}
	return out
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// isWordRune reports whether r belongs inside a token. Combining marks are
// included so decomposed accents do not split words.
func isWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Mc, r)
}

func isDigitRune(r rune) bool {
	if r < utf8.RuneSelf {
		return r >= '0' && r <= '9'
	}
	return unicode.IsDigit(r)
}

func isLetterRune(r rune) bool {
	if r < utf8.RuneSelf {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
	}
	return unicode.IsLetter(r)
}

func isApostrophe(r rune) bool { return r == '\'' || r == '\u2019' }

func isHyphen(r rune) bool {
	return r == '-' || r == '\u2010' || r == '\u2011' || r == '\u2013'
}

// scan walks text and calls emit for every analyzed term. Word boundaries
// follow the spirit of UAX#29 (what Lucene's StandardTokenizer and Bleve's
// unicode tokenizer do): runs of letters/digits, with "1.5" and "10,000"
// kept whole and apostrophes inside words kept ("patient's" -> possessive
// stripped). Hyphens split ("il-6" -> "il", "6"), which measured best.
func (a *Analyzer) scan(text string, emit func(term string, start, end int)) {
	var buf [64]byte
	lower := buf[:0]
	// Hyphen-join state: parts of the current hyphenated compound.
	var joined []byte
	joinStart, joinParts := -1, 0
	lastEnd := -1

	flushJoin := func() {
		if a.opts.JoinHyphenated && joinParts > 1 {
			if t, ok := a.finish(joined); ok {
				emit(t, joinStart, lastEnd)
			}
		}
		joined = joined[:0]
		joinStart, joinParts = -1, 0
	}

	i := 0
	for i < len(text) {
		r, size := rune(text[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(text[i:])
		}
		if !isWordRune(r) {
			i += size
			continue
		}
		start := i
		lower = lower[:0]
		prev := rune(0)
		for i < len(text) {
			r, size = rune(text[i]), 1
			if r >= utf8.RuneSelf {
				r, size = utf8.DecodeRuneInString(text[i:])
			}
			if isWordRune(r) {
				lower = appendLower(lower, r)
				prev = r
				i += size
				continue
			}
			// Mid-word punctuation that does not end the word.
			if i+size < len(text) {
				next, _ := utf8.DecodeRuneInString(text[i+size:])
				if (r == '.' || r == ',') && isDigitRune(prev) && isDigitRune(next) {
					lower = append(lower, byte(r))
					prev = r
					i += size
					continue
				}
				if isApostrophe(r) && isLetterRune(prev) && isLetterRune(next) {
					lower = append(lower, '\'')
					prev = r
					i += size
					continue
				}
			}
			break
		}
		end := i

		// Possessive filter: "patient's" -> "patient".
		if n := len(lower); n > 2 && lower[n-1] == 's' && lower[n-2] == '\'' {
			lower = lower[:n-2]
		}

		if a.opts.JoinHyphenated {
			// A part continues the compound only when exactly one hyphen
			// separates it from the previous part.
			if joinParts == 0 || !isHyphenSpan(text[lastEnd:start]) {
				flushJoin()
				joinStart = start
			}
			joined = append(joined, lower...)
			joinParts++
			lastEnd = end
		}

		if t, ok := a.finish(lower); ok {
			emit(t, start, end)
		}
	}
	if a.opts.JoinHyphenated {
		flushJoin()
	}
}

func isHyphenSpan(s string) bool {
	if s == "" {
		return false
	}
	r, size := utf8.DecodeRuneInString(s)
	return size == len(s) && isHyphen(r)
}

func appendLower(dst []byte, r rune) []byte {
	if r < utf8.RuneSelf {
		if r >= 'A' && r <= 'Z' {
			r += 'a' - 'A'
		}
		return append(dst, byte(r))
	}
	return utf8.AppendRune(dst, unicode.ToLower(r))
}

// finish applies stop words, length filter and stemming to a lowercased
// token. The stem cache is consulted first; its lookups do not allocate.
func (a *Analyzer) finish(lower []byte) (string, bool) {
	if len(lower) == 0 {
		return "", false
	}
	if _, stop := a.stop[string(lower)]; stop {
		return "", false
	}
	if a.opts.MinLength > 0 && utf8.RuneCount(lower) < a.opts.MinLength {
		return "", false
	}
	if t, ok := a.cache.GetBytes(lower); ok {
		return t, true
	}
	w := string(lower)
	t := w
	if !a.opts.NoStem && !isNumeric(lower) {
		t = english.Stem(w, true)
	}
	a.cache.Put(w, t)
	return t, true
}

func isNumeric(b []byte) bool {
	for _, c := range b {
		if c >= 'a' && c <= 'z' || c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
