package formats

import (
	"github.com/bmcis/knowledge/platform/chunker"
	"github.com/bmcis/knowledge/platform/docformat"
)

func init() {
	register("markdown", func(data []byte, _ string) (Extracted, error) {
		if err := CheckText(data); err != nil {
			return Extracted{}, err
		}
		return Extracted{Text: string(data), Layout: chunker.Markdown, Title: docformat.FirstHeading(string(data))}, nil
	})
}
