// Package names normalizes vendor and entity names so lookups ignore case,
// white space and punctuation: "ACME, Inc." and "acme inc" are the same name.
package names

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/bmcis/knowledge/platform/limits"
)

// MaxLen is the longest name, in characters, a record may carry: as long as
// a lookup may ask for (GetVendorRequest.name's limit).
var MaxLen = limits.VendorName.Max

// Normalize lowercases s and folds every run of characters that are neither
// letters nor digits (white space, punctuation, symbols) into one space,
// trimmed at both ends. The result holds only letters, digits and single
// spaces, so it is also safe inside a LIKE pattern.
func Normalize(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	pendingSpace := false
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if pendingSpace && b.Len() > 0 {
				b.WriteByte(' ')
			}
			pendingSpace = false
			b.WriteRune(unicode.ToLower(r))
			continue
		}
		pendingSpace = true
	}
	return b.String()
}

// Len counts characters (runes), the unit every length limit uses.
func Len(s string) int { return utf8.RuneCountInString(s) }
