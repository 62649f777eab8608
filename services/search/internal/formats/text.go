package formats

import (
	"bytes"
	"unicode/utf8"

	"github.com/bmcis/knowledge/platform/chunker"
)

func init() {
	register("text", func(in *Input) (Extracted, error) {
		text, err := in.Text()
		if err != nil {
			return Extracted{}, err
		}
		return Extracted{Text: text, Layout: chunker.PlainText}, nil
	})
}

// isBinary reports content that is not text: a NUL byte in the first 8 KiB,
// or more than 10% control characters other than tab, newlines and form feed.
func isBinary(b []byte) bool {
	head := b[:min(len(b), 8192)]
	if bytes.IndexByte(head, 0) >= 0 {
		return true
	}
	ctrl := 0
	for _, c := range head {
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v' || c == 0x7f {
			ctrl++
		}
	}
	return ctrl*10 > len(head)
}

func invalidAt(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}
