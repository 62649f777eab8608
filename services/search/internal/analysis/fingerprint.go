package analysis

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// Version names the tokenization rules; bump it when Terms would change
// for some text in a way the probe below might miss. Stored indexes (index
// snapshots) made under another version are not used.
const Version = 1

// fingerprintProbe exercises what analysis does: case, punctuation,
// hyphens, digits, accents, stop words and stems of several suffix classes.
const fingerprintProbe = "The Running runners RAN quickly; IL-6 and IL6 in COVID-19 studies (2021). " +
	"Café naïve résumé — généralisations! Connected connection connectivity, generously generalized; " +
	"it's the cats' toys. Ångström 3.14 x86_64 e-mail user@example.com"

// Fingerprint identifies everything that decides which terms a chunk is
// indexed under: Version, the options, the stop list, HeaderWeight, and the
// terms IndexedTerms produces for a fixed probe text (so an updated
// stemmer or tokenizer changes it too).
func Fingerprint(a *Analyzer) string {
	h := sha256.New()
	o := a.Options()
	fmt.Fprintf(h, "v%d stop=%d nostem=%t join=%t min=%d header=%d\n", Version, o.Stop, o.NoStem, o.JoinHyphenated, o.MinLength, HeaderWeight)
	stops := make([]string, 0, len(a.stop))
	for w := range a.stop {
		stops = append(stops, w)
	}
	slices.Sort(stops)
	fmt.Fprintf(h, "%s\n", strings.Join(stops, " "))
	fmt.Fprintf(h, "%s\n", strings.Join(IndexedTerms(a, "Probe Header: Guides", fingerprintProbe), " "))
	return hex.EncodeToString(h.Sum(nil)[:16])
}
