package analysis

import (
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// IndexedText is what BM25 and the embedders see of a chunk: its context
// header (whose root is the document title) on a line before its text.
// Measured on SciFact, the title in the indexed text is worth +0.02 nDCG@10.
func IndexedText(header, text string) string {
	if header == "" {
		return text
	}
	return header + "\n" + text
}

// NormalizeQuery is what the service ranks of a query, and the query part
// of a ranked-list cache key: Unicode NFKC, lower case, runs of white space
// folded to one space, trimmed. Queries that differ only in these ways rank
// the same and share one cached list by construction.
func NormalizeQuery(q string) string {
	q = norm.NFKC.String(q)
	var b strings.Builder
	b.Grow(len(q))
	space := false
	for _, r := range q {
		if unicode.IsSpace(r) {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}
