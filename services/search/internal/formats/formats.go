// Package formats turns a document's bytes into text with structure, one
// extractor per document format of platform/docformat (which declares the
// formats: names, extensions, media types, front matter, containers). Each
// format is one file of this package that registers its extractor by name;
// ingest.Prepare asks ForDocument how to read a document.
//
// Extraction honours the caller's context in one place, the Input an
// extractor reads from (input.go): its readers check the context every
// checkBytes bytes, extractors call Check at their own boundaries (a page,
// a stage), and Format.Extract answers the context's error whenever the
// Input saw one, however the extractor worded its own.
package formats

import (
	"context"
	"fmt"
	"sync"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/chunker"
	"github.com/bmcis/knowledge/platform/docformat"
)

// Format is a declared format with its extractor.
type Format struct {
	*docformat.Format
	// extract reads one document (its bytes and source file name, for
	// titles and messages). A returned error is the reason the file is
	// refused, in words a user can act on. Nil for a container, which the
	// client splits.
	extract extractor
}

// extractor is one format's reading of a document.
type extractor func(in *Input) (Extracted, error)

// Extract reads one document's bytes; name is its source file. A refusal
// is an error in words a user can act on. When ctx ends first, extraction
// stops at the next check (within checkBytes bytes read, or the format's
// next page or stage) and the error is ctx.Err() itself, never a refusal.
func (f *Format) Extract(ctx context.Context, data []byte, name string) (Extracted, error) {
	ex, _, err := f.extractInput(ctx, data, name)
	return ex, err
}

// extractInput is Extract that also returns the Input, whose counts tell
// tests how much was read and checked.
func (f *Format) extractInput(ctx context.Context, data []byte, name string) (Extracted, *Input, error) {
	in := &Input{ctx: ctx, Data: data, Name: name}
	if f.extract == nil {
		return Extracted{}, in, fmt.Errorf("format %s is a container: its client splits it", f.Name)
	}
	if err := in.Check(); err != nil {
		return Extracted{}, in, err
	}
	ex, err := f.extract(in)
	if stop := in.stopped(); stop != nil {
		return Extracted{}, in, stop
	}
	return ex, in, err
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
	extractors = map[string]extractor{}
	// withExtractors is every declared format with its extractor, built
	// once after the files' init functions registered them.
	withExtractors = sync.OnceValue(func() map[string]*Format {
		out := map[string]*Format{}
		for _, f := range docformat.All() {
			out[f.Name] = &Format{Format: f, extract: extractors[f.Name]}
		}
		return out
	})
)

// register adds the extractor of a declared format. It panics on an
// undeclared or doubly registered name: registrations are init-time
// declarations, so either is a bug.
func register(name string, extract extractor) {
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
