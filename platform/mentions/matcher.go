package mentions

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/coregx/ahocorasick"
)

// Name is one way an entity is written: its name or one of its aliases.
type Name struct {
	EntityID string
	Text     string
	IsVendor bool
}

// MaxBearers is how many entities may share one normalized name and still
// be linked: a name borne by more ("Ada Adams" in many clusters of a big
// graph) says nothing about which one a text means, so it links none.
const MaxBearers = 4

// bearer is one entity a pattern may stand for.
type bearer struct {
	entityID string
	// exact, for an ambiguous name, is its letters and digits as written
	// (case kept); a match must show exactly these. Empty: any case.
	exact string
}

// Matcher finds the entities a text mentions. It is immutable and safe for
// concurrent use.
type Matcher struct {
	ac      *ahocorasick.Automaton // nil when the graph has no usable name
	bearers [][]bearer             // by automaton pattern id
	names   int
}

// Names is how many distinct normalized names the matcher knows.
func (m *Matcher) Names() int { return m.names }

// Build makes a matcher of names. Names without letters or digits are
// skipped; see Ambiguous and MaxBearers for the names that link only
// sometimes or never.
func Build(names []Name) (*Matcher, error) {
	type entry struct {
		bearers []bearer
		seen    map[string]bool
	}
	byNorm := map[string]*entry{}
	var order []string
	for _, n := range names {
		words := Words(n.Text)
		if len(words) == 0 {
			continue
		}
		norm := strings.Join(words, " ")
		b := bearer{entityID: n.EntityID}
		if Ambiguous(words) {
			exact := alnum(n.Text)
			if !hasUpper(exact) {
				continue // an all-lowercase ambiguous name never links
			}
			b.exact = exact
		}
		e := byNorm[norm]
		if e == nil {
			e = &entry{seen: map[string]bool{}}
			byNorm[norm] = e
			order = append(order, norm)
		}
		key := b.entityID + "\x00" + b.exact
		if e.seen[key] {
			continue
		}
		e.seen[key] = true
		e.bearers = append(e.bearers, b)
	}
	m := &Matcher{}
	patterns := make([][]byte, 0, len(order))
	for _, norm := range order {
		e := byNorm[norm]
		if distinctEntities(e.bearers) > MaxBearers {
			continue
		}
		patterns = append(patterns, encode(nil, strings.Fields(norm)))
		m.bearers = append(m.bearers, e.bearers)
	}
	m.names = len(patterns)
	if len(patterns) == 0 {
		return m, nil
	}
	// Every match is reported (overlapping) and leftmost-longest is chosen
	// here: the library's own LeftmostLongest search keeps the longest
	// match anywhere after the start, not the leftmost one.
	ac, err := ahocorasick.NewBuilder().AddPatterns(patterns).Build()
	if err != nil {
		return nil, fmt.Errorf("build name matcher: %w", err)
	}
	m.ac = ac
	return m, nil
}

func distinctEntities(bs []bearer) int {
	seen := map[string]bool{}
	for _, b := range bs {
		seen[b.entityID] = true
	}
	return len(seen)
}

// Match counts the entities text mentions: entity id to the number of
// times. Matches are found on the normalized text at word boundaries; where
// names overlap, the leftmost, then the longest, wins.
func (m *Matcher) Match(text string) map[string]int {
	if m.ac == nil {
		return nil
	}
	// Encoded text: " w1  w2  w3 " (each lowercased word between two
	// spaces), so a pattern " a  b " can only start and end at word
	// boundaries, and consuming a match never eats the next word's leading
	// space. One pass, no allocation per word.
	buf := make([]byte, 0, len(text)+len(text)/3+2)
	var words []span // original offsets; lower unused here
	var starts []int // encoded offset of each word
	in := false
	for i, r := range text {
		if isWordRune(r) {
			if !in {
				starts = append(starts, len(buf))
				words = append(words, span{start: i})
				buf = append(buf, ' ')
				in = true
			}
			if r < utf8.RuneSelf {
				if 'A' <= r && r <= 'Z' {
					r += 'a' - 'A'
				}
				buf = append(buf, byte(r))
			} else {
				buf = utf8.AppendRune(buf, unicode.ToLower(r))
			}
			continue
		}
		if in {
			words[len(words)-1].end = i
			buf = append(buf, ' ')
			in = false
		}
	}
	if in {
		words[len(words)-1].end = len(text)
		buf = append(buf, ' ')
	}
	if len(words) == 0 {
		return nil
	}
	var out map[string]int
	for _, hit := range leftmostLongest(m.ac.FindAllOverlapping(buf)) {
		first, ok := slices.BinarySearch(starts, hit.Start)
		if !ok {
			continue // cannot happen: every pattern starts at a word
		}
		last := first + strings.Count(string(buf[hit.Start:hit.End]), "  ")
		spanText := text[words[first].start:words[last].end]
		for _, b := range m.bearers[hit.PatternID] {
			if b.exact != "" && alnum(spanText) != b.exact {
				continue
			}
			if out == nil {
				out = map[string]int{}
			}
			out[b.entityID]++
		}
	}
	return out
}

// leftmostLongest keeps, from every match, the non-overlapping ones a
// left-to-right scan takes when it prefers the longest match at a start.
func leftmostLongest(all []ahocorasick.Match) []ahocorasick.Match {
	slices.SortFunc(all, func(a, b ahocorasick.Match) int {
		if a.Start != b.Start {
			return a.Start - b.Start
		}
		return b.End - a.End
	})
	out := all[:0]
	end := -1
	for _, m := range all {
		if m.Start >= end {
			out = append(out, m)
			end = m.End
		}
	}
	return out
}

// Words splits s into its normalized words: lowercase runs of letters and
// digits; everything else breaks words.
func Words(s string) []string {
	spans := wordSpans(s)
	out := make([]string, len(spans))
	for i, w := range spans {
		out[i] = w.lower
	}
	return out
}

// Normalize is s's words joined by single spaces.
func Normalize(s string) string { return strings.Join(Words(s), " ") }

type span struct {
	start, end int // byte offsets in the original text
	lower      string
}

func wordSpans(s string) []span {
	var out []span
	start := -1
	var b strings.Builder
	for i, r := range s {
		if isWordRune(r) {
			if start < 0 {
				start = i
				b.Reset()
			}
			b.WriteRune(unicode.ToLower(r))
			continue
		}
		if start >= 0 {
			out = append(out, span{start: start, end: i, lower: b.String()})
			start = -1
		}
	}
	if start >= 0 {
		out = append(out, span{start: start, end: len(s), lower: b.String()})
	}
	return out
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

func encode(buf []byte, words []string) []byte {
	for _, w := range words {
		buf = append(buf, ' ')
		buf = append(buf, w...)
		buf = append(buf, ' ')
	}
	return buf
}

// alnum is s's letters and digits, case kept.
func alnum(s string) string {
	var b strings.Builder
	for _, r := range s {
		if isWordRune(r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func hasUpper(s string) bool {
	for _, r := range s {
		if unicode.IsUpper(r) {
			return true
		}
	}
	return false
}

// ShortName is the longest one-word name, in characters, that is
// ambiguous for its length alone ("SI", "GE", "HP", "IBM").
const ShortName = 3

// Ambiguous reports whether a name of these normalized words is ambiguous:
// one word that is short (at most ShortName characters) or a common English
// word ("apple", "box", "target"). An ambiguous name links only where the
// text writes it exactly as the graph does, case included, and only if the
// graph writes it with a capital: alias "SI" links "SI" but not "si" or
// "Si"; "Target" links "Target" but not "target"; "box" never links.
func Ambiguous(words []string) bool {
	if len(words) != 1 {
		return false
	}
	return utf8.RuneCountInString(words[0]) <= ShortName || commonWords[words[0]]
}
