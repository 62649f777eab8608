// Package formats turns a document's bytes into text with structure, one
// extractor per document format of platform/docformat (which declares the
// formats: names, extensions, media types, front matter, containers). Each
// format is one file of this package that registers its extractor by name;
// ingest.Prepare asks ForDocument how to read a document.
package formats

import (
	"fmt"
	"sync"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/chunker"
	"github.com/bmcis/knowledge/platform/docformat"
)

// Format is a declared format with its extractor.
type Format struct {
	*docformat.Format
	// Extract reads one document's bytes. name is the document's source
	// file, for titles and messages. A returned error is the reason the
	// file is refused, in words a user can act on. Nil for a container,
	// which the client splits.
	Extract func(data []byte, name string) (Extracted, error)
}

// Extracted is a document's text with its structure.
type Extracted struct {
	// Text is what gets chunked, in the Layout's markup.
	Text string
	// Layout tells the chunker how Text marks structure.
	Layout chunker.Format
	// Title is the document's own title (metadata, first heading), or "".
	Title string
}

var (
	extractors = map[string]func(data []byte, name string) (Extracted, error){}
	// withExtractors is every declared format with its extractor, built
	// once after the files' init functions registered them.
	withExtractors = sync.OnceValue(func() map[string]*Format {
		out := map[string]*Format{}
		for _, f := range docformat.All() {
			out[f.Name] = &Format{Format: f, Extract: extractors[f.Name]}
		}
		return out
	})
)

// register adds the extractor of a declared format. It panics on an
// undeclared or doubly registered name: registrations are init-time
// declarations, so either is a bug.
func register(name string, extract func(data []byte, name string) (Extracted, error)) {
	f, ok := docformat.ByName(name)
	if !ok || f.Container() {
		panic(fmt.Sprintf("formats: %q is not a declared document format (platform/docformat)", name))
	}
	if _, dup := extractors[name]; dup {
		panic("formats: duplicate extractor for " + name)
	}
	extractors[name] = extract
}

// ByName returns the format declared under name.
func ByName(name string) (*Format, bool) {
	f, ok := withExtractors()[name]
	return f, ok
}

// ForPath returns the format a file's extension selects.
func ForPath(p string) (*Format, bool) {
	d, ok := docformat.ForPath(p)
	if !ok {
		return nil, false
	}
	return ByName(d.Name)
}

// ForMediaType returns the format a media type (parameters allowed)
// selects.
func ForMediaType(mt string) (*Format, bool) {
	d, ok := docformat.ForMediaType(mt)
	if !ok {
		return nil, false
	}
	return ByName(d.Name)
}

// ForDocument returns the format a document names (docformat.ForDocument).
func ForDocument(d *searchv1.Document) (*Format, error) {
	df, err := docformat.ForDocument(d)
	if err != nil {
		return nil, err
	}
	f, _ := ByName(df.Name)
	return f, nil
}
