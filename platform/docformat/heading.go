package docformat

import (
	"strings"
	"unicode/utf8"
)

// FirstHeading is the text of a markdown document's first ATX heading
// outside code fences, or "".
func FirstHeading(body string) string {
	inFence := false
	for _, line := range strings.Split(body, "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			inFence = !inFence
			continue
		}
		if inFence || !strings.HasPrefix(t, "#") {
			continue
		}
		h := strings.TrimLeft(t, "#")
		if len(t)-len(h) <= 6 && (h == "" || h[0] == ' ' || h[0] == '\t') {
			if h = strings.TrimSpace(strings.TrimRight(strings.TrimSpace(h), "#")); h != "" && utf8.ValidString(h) {
				return h
			}
		}
	}
	return ""
}
