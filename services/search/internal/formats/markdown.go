package formats

import (
	"github.com/bmcis/knowledge/platform/chunker"
	"github.com/bmcis/knowledge/platform/docformat"
)

func init() {
	register("markdown", func(in *Input) (Extracted, error) {
		text, err := in.Text()
		if err != nil {
			return Extracted{}, err
		}
		return Extracted{Text: text, Layout: chunker.Markdown, Title: docformat.FirstHeading(text)}, nil
	})
}
