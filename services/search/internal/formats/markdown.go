package formats

import (
	"strings"
	"unicode/utf8"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/services/search/internal/chunker"
)

func init() {
	Register(Format{
		Name:        "markdown",
		Extensions:  []string{".md", ".markdown"},
		MediaTypes:  []string{"text/markdown", "text/x-markdown"},
		FrontMatter: true,
		Legacy:      searchv1.ContentFormat_CONTENT_FORMAT_MARKDOWN,
		Extract: func(data []byte, _ string) (Extracted, error) {
			if err := CheckText(data); err != nil {
				return Extracted{}, err
			}
			return Extracted{Text: string(data), Layout: chunker.Markdown, Title: FirstHeading(string(data))}, nil
		},
	})
}

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
