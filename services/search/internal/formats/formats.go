// Package formats is the one place a document format is declared: its
// name, the file extensions and media types that select it, and how its
// bytes become text with structure. Each format is one file of this package
// that registers itself by name (as bleve registers analyzers); source
// (which files to read), the ingest protocol (Document.format_name) and
// ingest.Prepare (how to read the bytes) all ask this registry, so adding a
// format is adding one file.
package formats

import (
	"fmt"
	"io"
	"mime"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/services/search/internal/chunker"
)

// Format declares one document format.
type Format struct {
	// Name is the registered name, sent as Document.format_name.
	Name string
	// Extensions select the format for a file, lower case with the dot.
	Extensions []string
	// MediaTypes select the format for an upload (first is canonical).
	MediaTypes []string
	// Extract reads one document's bytes. name is the document's source
	// file, for titles and messages. A returned error is the reason the
	// file is refused, in words a user can act on.
	Extract func(data []byte, name string) (Extracted, error)
	// Records, set instead of Extract, makes the format a container of many
	// documents (JSON Lines): the ingesting client splits the file.
	Records func(r io.Reader, name string, fn func(Record) error) error
	// FrontMatter says a leading YAML block may set title, category and
	// updated_at (read by the client before sending).
	FrontMatter bool
	// Legacy is the ContentFormat enum value older clients send for this
	// format (unspecified when there is none).
	Legacy searchv1.ContentFormat
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

// Record is one document of a container file, or a problem with one entry.
type Record struct {
	// Where names the input: a path, or "file.jsonl:LINE".
	Where string
	// Doc is nil when Problem is set.
	Doc     *searchv1.Document
	Problem string
}

var (
	mu       sync.RWMutex
	byName   = map[string]*Format{}
	byExt    = map[string]*Format{}
	byMedia  = map[string]*Format{}
	byLegacy = map[searchv1.ContentFormat]*Format{}
)

// Register adds a format. It panics on a duplicate name, extension or media
// type: registrations are init-time declarations, so a clash is a bug.
func Register(f Format) {
	mu.Lock()
	defer mu.Unlock()
	if f.Name == "" || (f.Extract == nil) == (f.Records == nil) {
		panic(fmt.Sprintf("formats: %q needs a name and exactly one of Extract or Records", f.Name))
	}
	if _, dup := byName[f.Name]; dup {
		panic("formats: duplicate format " + f.Name)
	}
	p := &f
	byName[f.Name] = p
	for _, e := range f.Extensions {
		e = strings.ToLower(e)
		if _, dup := byExt[e]; dup {
			panic("formats: duplicate extension " + e)
		}
		byExt[e] = p
	}
	for _, m := range f.MediaTypes {
		if _, dup := byMedia[m]; dup {
			panic("formats: duplicate media type " + m)
		}
		byMedia[m] = p
	}
	if f.Legacy != searchv1.ContentFormat_CONTENT_FORMAT_UNSPECIFIED {
		byLegacy[f.Legacy] = p
	}
}

// ByName returns the format registered under name.
func ByName(name string) (*Format, bool) {
	mu.RLock()
	defer mu.RUnlock()
	f, ok := byName[name]
	return f, ok
}

// ForPath returns the format a file's extension selects.
func ForPath(p string) (*Format, bool) {
	mu.RLock()
	defer mu.RUnlock()
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
	mu.RLock()
	defer mu.RUnlock()
	f, ok := byMedia[base]
	return f, ok
}

// ForDocument returns the format a document names: format_name when set,
// else the legacy enum (unspecified meaning markdown).
func ForDocument(d *searchv1.Document) (*Format, error) {
	if n := d.GetFormatName(); n != "" {
		if f, ok := ByName(n); ok && f.Extract != nil {
			return f, nil
		}
		return nil, fmt.Errorf("unknown format %q (known: %s)", n, strings.Join(Names(), ", "))
	}
	legacy := d.GetFormat()
	if legacy == searchv1.ContentFormat_CONTENT_FORMAT_UNSPECIFIED {
		legacy = searchv1.ContentFormat_CONTENT_FORMAT_MARKDOWN
	}
	mu.RLock()
	defer mu.RUnlock()
	if f, ok := byLegacy[legacy]; ok {
		return f, nil
	}
	return nil, fmt.Errorf("unknown content format %d", legacy)
}

// Names lists the registered formats that hold one document each, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	var out []string
	for n, f := range byName {
		if f.Extract != nil {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// Extensions lists every registered extension, sorted (for messages).
func Extensions() []string {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]string, 0, len(byExt))
	for e := range byExt {
		out = append(out, e)
	}
	slices.Sort(out)
	return out
}
