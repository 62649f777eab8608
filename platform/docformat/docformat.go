// Package docformat declares the document formats the product reads: each
// format's name (Document.format_name), the file extensions and media types
// that select it, whether a leading YAML block may set its metadata, and,
// for a container (JSON Lines), how the client splits it into documents.
// The ingesting client (bmcisctl), the gateway's upload and the search
// service all ask it. How a format's bytes become text is the search
// service's (services/search/internal/formats), so a client links no
// extractor. Adding a format is one entry here and one extractor there.
package docformat

import (
	"fmt"
	"io"
	"mime"
	"path"
	"slices"
	"sort"
	"strings"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
)

// Format declares one document format.
type Format struct {
	// Name is the registered name, sent as Document.format_name.
	Name string
	// Extensions select the format for a file, lower case with the dot.
	Extensions []string
	// MediaTypes select the format for an upload (first is canonical).
	MediaTypes []string
	// FrontMatter says a leading YAML block may set title, category and
	// updated_at (read by the client before sending).
	FrontMatter bool
	// Legacy is the ContentFormat enum value older clients send for this
	// format (unspecified when there is none).
	Legacy searchv1.ContentFormat
	// Records, set for a container of many documents (JSON Lines), splits
	// the file into them; the ingesting client does, so a container is
	// never sent whole. Nil for a format of one document per file.
	Records func(r io.Reader, name string, fn func(Record) error) error
}

// Container says the format holds many documents (Records splits it).
func (f *Format) Container() bool { return f.Records != nil }

// Record is one document of a container file, or a problem with one entry.
type Record struct {
	// Where names the input: a path, or "file.jsonl:LINE".
	Where string
	// Doc is nil when Problem is set.
	Doc     *searchv1.Document
	Problem string
}

// declared lists every format the product reads.
var declared = []*Format{
	{Name: "markdown", Extensions: []string{".md", ".markdown"}, MediaTypes: []string{"text/markdown", "text/x-markdown"},
		FrontMatter: true, Legacy: searchv1.ContentFormat_CONTENT_FORMAT_MARKDOWN},
	{Name: "text", Extensions: []string{".txt"}, MediaTypes: []string{"text/plain"},
		FrontMatter: true, Legacy: searchv1.ContentFormat_CONTENT_FORMAT_TEXT},
	{Name: "html", Extensions: []string{".html", ".htm", ".xhtml"}, MediaTypes: []string{"text/html", "application/xhtml+xml"}},
	{Name: "docx", Extensions: []string{".docx"}, MediaTypes: []string{"application/vnd.openxmlformats-officedocument.wordprocessingml.document"}},
	{Name: "pdf", Extensions: []string{".pdf"}, MediaTypes: []string{"application/pdf"}},
	{Name: "jsonl", Extensions: []string{".jsonl", ".ndjson"}, MediaTypes: []string{"application/jsonl", "application/x-ndjson"},
		Records: ReadJSONL},
}

var (
	byName   = map[string]*Format{}
	byExt    = map[string]*Format{}
	byMedia  = map[string]*Format{}
	byLegacy = map[searchv1.ContentFormat]*Format{}
)

// init indexes the declarations; a clash of names, extensions or media
// types is a bug in them, so it panics.
func init() {
	for _, f := range declared {
		if _, dup := byName[f.Name]; dup {
			panic("docformat: duplicate format " + f.Name)
		}
		byName[f.Name] = f
		for _, e := range f.Extensions {
			e = strings.ToLower(e)
			if _, dup := byExt[e]; dup {
				panic("docformat: duplicate extension " + e)
			}
			byExt[e] = f
		}
		for _, m := range f.MediaTypes {
			if _, dup := byMedia[m]; dup {
				panic("docformat: duplicate media type " + m)
			}
			byMedia[m] = f
		}
		if f.Legacy != searchv1.ContentFormat_CONTENT_FORMAT_UNSPECIFIED {
			byLegacy[f.Legacy] = f
		}
	}
}

// All lists every format, in declaration order.
func All() []*Format { return slices.Clone(declared) }

// ByName returns the format declared under name.
func ByName(name string) (*Format, bool) {
	f, ok := byName[name]
	return f, ok
}

// ForPath returns the format a file's extension selects.
func ForPath(p string) (*Format, bool) {
	f, ok := byExt[strings.ToLower(path.Ext(strings.ReplaceAll(p, `\`, "/")))]
	return f, ok
}

// ForMediaType returns the format a media type (parameters allowed)
// selects.
func ForMediaType(mt string) (*Format, bool) {
	base, _, err := mime.ParseMediaType(mt)
	if err != nil {
		return nil, false
	}
	f, ok := byMedia[base]
	return f, ok
}

// ForDocument returns the format a document names: format_name when set,
// else the legacy enum (unspecified meaning markdown). A container is
// never a document's format: the client splits it.
func ForDocument(d *searchv1.Document) (*Format, error) {
	if n := d.GetFormatName(); n != "" {
		if f, ok := ByName(n); ok && !f.Container() {
			return f, nil
		}
		return nil, fmt.Errorf("unknown format %q (known: %s)", n, strings.Join(Names(), ", "))
	}
	legacy := d.GetFormat()
	if legacy == searchv1.ContentFormat_CONTENT_FORMAT_UNSPECIFIED {
		legacy = searchv1.ContentFormat_CONTENT_FORMAT_MARKDOWN
	}
	if f, ok := byLegacy[legacy]; ok {
		return f, nil
	}
	return nil, fmt.Errorf("unknown content format %d", legacy)
}

// Names lists the formats that hold one document each, sorted.
func Names() []string {
	var out []string
	for n, f := range byName {
		if !f.Container() {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// Extensions lists every declared extension, sorted (for messages).
func Extensions() []string {
	out := make([]string, 0, len(byExt))
	for e := range byExt {
		out = append(out, e)
	}
	slices.Sort(out)
	return out
}
