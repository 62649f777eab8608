// Package source reads documents to ingest from the file system: directory
// trees of files in any single-document format declared in platform/docformat
// (markdown, text, HTML, DOCX, PDF, ...), and JSON Lines files of {"_id"|"id",
// "title", "text", "category"?, "updated_at"?} records (so a BEIR
// corpus.jsonl ingests as it is). Files are sent as they are, named by
// format; the service extracts their text.
//
// For files found in a tree: the source file is the path relative to the
// root given (slash-separated) and is also the external id; the category is
// front matter `category:` or else the first folder; the title is front
// matter `title:`, else the first heading, else the file name (formats
// without front matter leave it to the service, which reads the file's own
// title); updated_at comes from front matter. JSON Lines files are read only
// when named directly (a BEIR folder also holds queries.jsonl); their source
// file is the file's name and the external id the record's _id (or id).
package source

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/timestamppb"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/access"
	"github.com/bmcis/knowledge/platform/docformat"
)

// MaxFileBytes is the largest file read: the service's default document
// limit (BMCIS_SEARCH_MAX_DOCUMENT_BYTES); bigger documents travel in parts
// of one stream, so gRPC's 4 MiB message limit does not bound them.
var MaxFileBytes int64 = 64 << 20

// Item is one document read, or a problem with one input.
type Item = docformat.Record

// Walk reads every PATH and calls fn for each document or problem, in a
// deterministic order. It stops at the first error fn returns.
func Walk(paths []string, fn func(Item) error) error {
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			if err := fn(Item{Where: p, Problem: err.Error()}); err != nil {
				return err
			}
			continue
		}
		if info.IsDir() {
			if err := walkDir(p, fn); err != nil {
				return err
			}
			continue
		}
		f, ok := docformat.ForPath(p)
		switch {
		case !ok:
			if err := fn(Item{Where: p, Problem: "not a file of a known format (" + strings.Join(docformat.Extensions(), ", ") + ")"}); err != nil {
				return err
			}
		case f.Container():
			if err := readRecords(p, f, fn); err != nil {
				return err
			}
		default:
			if err := fn(readFile(p, filepath.Base(p), "")); err != nil {
				return err
			}
		}
	}
	return nil
}

// Count returns how many items Walk will produce (for progress), cheaply:
// files are counted, JSON Lines are counted by lines.
func Count(paths []string) int {
	n := 0
	_ = Walk0(paths, func(jsonl string) {
		f, _, err := openRegular(jsonl)
		if err != nil {
			n++
			return
		}
		defer f.Close()
		r := bufio.NewReaderSize(f, 1<<16)
		for {
			line, err := r.ReadSlice('\n')
			if len(bytes.TrimSpace(line)) > 0 {
				n++
			}
			if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
				return
			}
		}
	}, func() { n++ })
	return n
}

// CheckAccess checks the "access" lists of every record of the JSON Lines
// files among paths (docformat.CheckJSONLAccess), before anything is
// sent: an entry of an unknown form refuses the whole ingest, naming the
// record. Unreadable files are left to Walk to report.
func CheckAccess(paths []string) error {
	var first error
	_ = Walk0(paths, func(jsonl string) {
		if first != nil {
			return
		}
		f, _, err := openRegular(jsonl)
		if err != nil {
			return
		}
		defer f.Close()
		first = docformat.CheckJSONLAccess(f, jsonl)
	}, func() {})
	return first
}

// Walk0 visits inputs without reading documents: jsonl for JSON Lines
// files, other for every other item.
func Walk0(paths []string, jsonl func(string), other func()) error {
	for _, p := range paths {
		info, err := os.Stat(p)
		switch {
		case err != nil:
			other()
		case info.IsDir():
			root := p
			if real, err := filepath.EvalSymlinks(p); err == nil {
				root = real // as walkDir does
			}
			_ = filepath.WalkDir(root, func(fp string, d fs.DirEntry, err error) error {
				if err != nil {
					other()
					return nil
				}
				if d.IsDir() {
					if fp != root && strings.HasPrefix(d.Name(), ".") {
						return filepath.SkipDir
					}
					return nil
				}
				if inTree(fp) && !strings.HasPrefix(d.Name(), ".") {
					other()
				}
				return nil
			})
		case isContainer(p):
			jsonl(p)
		default:
			other()
		}
	}
	return nil
}

// inTree reports a file a directory walk reads: one document in a
// registered format (containers such as JSON Lines only when named).
func inTree(p string) bool {
	f, ok := docformat.ForPath(p)
	return ok && !f.Container()
}

func isContainer(p string) bool {
	f, ok := docformat.ForPath(p)
	return ok && f.Container()
}

// ErrOutsideRoot is the problem reported for a link that resolves outside
// the directory being ingested: following it would let whoever can write
// into the tree send any file the ingesting user can read.
const ErrOutsideRoot = "symbolic link leads outside the ingestion root; skipped"

func walkDir(root string, fn func(Item) error) error {
	return WalkTree(root, nil, func(_ string, _ FileState, it Item) error { return fn(it) })
}

// FileState is what a sync compares between passes: a file with the same
// size and modification time is not read again.
type FileState struct {
	Size    int64
	ModTime time.Time
	// Folder: the problem is a folder that could not be listed (or the
	// root itself), so nothing under it is known: not that it is gone.
	Folder bool
	// Access is the access list that applies to the file (AccessLists,
	// joined; set by the sync, not by WalkTree): a changed access file
	// makes its files changed, so they are sent again with their new list.
	Access string
}

// WalkTree walks the directory tree under root as Walk does, giving fn each
// file's path relative to root (slash-separated, also its external id) and
// state. A file for which skip (may be nil) says true is not read: fn gets
// an Item with neither Doc nor Problem. A folder that cannot be listed (the
// root's rel is ".") comes with a Problem and st.Folder set.
func WalkTree(root string, skip func(rel string, st FileState) bool, fn func(rel string, st FileState, it Item) error) error {
	realRoot, err := filepath.EvalSymlinks(root)
	if err == nil {
		realRoot, err = filepath.Abs(realRoot)
	}
	if err != nil {
		return fn(".", FileState{Folder: true}, Item{Where: root, Problem: err.Error()})
	}
	// Walk the resolved root (WalkDir does not enter a root that is a link)
	// but name files under the root as given.
	return filepath.WalkDir(realRoot, func(real string, d fs.DirEntry, err error) error {
		fp := root
		if r, rerr := filepath.Rel(realRoot, real); rerr == nil && r != "." {
			fp = filepath.Join(root, r)
		}
		relOf := func() string {
			r, _ := filepath.Rel(root, fp)
			return filepath.ToSlash(r)
		}
		if err != nil {
			// WalkDir reports errors only for the root and for folders it
			// cannot list (entries come from the listing): a folder's.
			return fn(relOf(), FileState{Folder: true}, Item{Where: fp, Problem: err.Error()})
		}
		if d.IsDir() {
			if real != realRoot && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		if !inTree(fp) {
			return nil
		}
		rel, err := filepath.Rel(root, fp)
		if err != nil {
			return fn(fp, FileState{}, Item{Where: fp, Problem: err.Error()})
		}
		rel = filepath.ToSlash(rel)
		folder := ""
		if i := strings.IndexByte(rel, '/'); i > 0 {
			folder = rel[:i]
		}
		read := real
		if d.Type()&fs.ModeSymlink != 0 {
			target, ok, err := inside(realRoot, real)
			switch {
			case err != nil:
				return fn(rel, FileState{}, Item{Where: fp, Problem: err.Error()})
			case !ok:
				return fn(rel, FileState{}, Item{Where: fp, Problem: ErrOutsideRoot})
			}
			// Read the resolved path, so the link cannot be swapped for one
			// leading elsewhere between the check and the read.
			read = target
		}
		var st FileState
		if info, err := os.Stat(read); err == nil {
			st = FileState{Size: info.Size(), ModTime: info.ModTime()}
		}
		if skip != nil && skip(rel, st) {
			return fn(rel, st, Item{Where: fp})
		}
		it := readFile(read, rel, folder)
		it.Where = fp
		return fn(rel, st, it)
	})
}

// inside resolves the link fp and reports whether its target lies within
// realRoot (itself resolved and absolute).
func inside(realRoot, fp string) (string, bool, error) {
	target, err := filepath.EvalSymlinks(fp)
	if err != nil {
		return "", false, err
	}
	if target, err = filepath.Abs(target); err != nil {
		return "", false, err
	}
	rel, err := filepath.Rel(realRoot, target)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return target, false, nil
	}
	return target, true, nil
}

// readFile reads one file of a single-document format (chosen by rel).
func readFile(fp, rel, folder string) Item {
	it := Item{Where: fp}
	data, err := readRegular(fp)
	if err != nil {
		it.Problem = err.Error()
		return it
	}
	doc, err := ParseFile(rel, folder, data)
	if err != nil {
		it.Problem = err.Error()
		return it
	}
	it.Doc = doc
	return it
}

// openRegular opens fp for reading if it is a regular file. A named pipe,
// device or socket is refused: reading one can block forever (a pipe with
// no writer) or never end. The open does not block (O_NONBLOCK), and the
// check is on the opened file, so a file swapped for a pipe is refused too.
func openRegular(fp string) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(fp, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	info, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	if !info.Mode().IsRegular() {
		_ = f.Close()
		return nil, nil, fmt.Errorf("%s", ErrNotRegular)
	}
	return f, info, nil
}

// ErrNotRegular is the problem reported for a named pipe, device or socket.
const ErrNotRegular = "not a regular file (a named pipe, device or socket); skipped"

// readRegular reads a regular file of at most MaxFileBytes.
func readRegular(fp string) ([]byte, error) {
	f, info, err := openRegular(fp)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if info.Size() > MaxFileBytes {
		return nil, fmt.Errorf("too large: %d bytes (limit %d)", info.Size(), MaxFileBytes)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > MaxFileBytes {
		return nil, fmt.Errorf("too large: over %d bytes (limit %d)", MaxFileBytes, MaxFileBytes)
	}
	return data, nil
}

type frontMatter struct {
	Title     string `yaml:"title"`
	Category  string `yaml:"category"`
	UpdatedAt string `yaml:"updated_at"`
}

// ParseFile builds the document of one file: rel is its path relative to
// the ingestion root (its extension picks the format), folder its first
// folder ("" at the root). Front matter is read for the formats that have
// it; other formats travel as bytes for the service to extract.
func ParseFile(rel, folder string, data []byte) (*searchv1.Document, error) {
	f, ok := docformat.ForPath(rel)
	if !ok || f.Container() {
		return nil, fmt.Errorf("not a file of a known format (%s)", strings.Join(docformat.Extensions(), ", "))
	}
	doc := &searchv1.Document{ExternalId: rel, SourceFile: rel, Category: folder, Content: data, FormatName: f.Name, Format: f.Legacy}
	if !f.FrontMatter {
		return doc, nil
	}
	fm, body, err := splitFrontMatter(data)
	if err != nil {
		return nil, err
	}
	doc.Content = body
	if fm != nil {
		if c := strings.TrimSpace(fm.Category); c != "" {
			doc.Category = c
		}
		doc.Title = strings.TrimSpace(fm.Title)
		if fm.UpdatedAt != "" {
			ts, err := docformat.ParseTime(fm.UpdatedAt)
			if err != nil {
				return nil, fmt.Errorf("front matter updated_at: %v", err)
			}
			doc.UpdatedAt = timestamppb.New(ts)
		}
	}
	if doc.Title == "" && f.Legacy == searchv1.ContentFormat_CONTENT_FORMAT_MARKDOWN {
		doc.Title = docformat.FirstHeading(string(body))
	}
	if doc.Title == "" {
		base := path.Base(rel)
		doc.Title = strings.TrimSuffix(base, path.Ext(base))
	}
	return doc, nil
}

// splitFrontMatter separates a leading YAML block delimited by "---" lines.
func splitFrontMatter(data []byte) (*frontMatter, []byte, error) {
	d := bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	if !bytes.HasPrefix(d, []byte("---\n")) && !bytes.HasPrefix(d, []byte("---\r\n")) {
		return nil, data, nil
	}
	rest := d[bytes.IndexByte(d, '\n')+1:]
	for off := 0; off < len(rest); {
		end := bytes.IndexByte(rest[off:], '\n')
		line := rest[off:]
		next := len(rest)
		if end >= 0 {
			line = rest[off : off+end]
			next = off + end + 1
		}
		if t := string(bytes.TrimRight(line, " \t\r")); t == "---" || t == "..." {
			var fm frontMatter
			if err := yaml.Unmarshal(rest[:off], &fm); err != nil {
				return nil, nil, fmt.Errorf("invalid front matter: %v", err)
			}
			return &fm, rest[next:], nil
		}
		off = next
	}
	return nil, data, nil // no closing line: not front matter
}

func readRecords(p string, f *docformat.Format, fn func(Item) error) error {
	r, _, err := openRegular(p)
	if err != nil {
		return fn(Item{Where: p, Problem: err.Error()})
	}
	defer r.Close()
	return f.Records(r, filepath.Base(p), fn)
}

// AccessFileName is the per-folder access file of a synced tree: one
// principal per line (everyone, group:NAME, user:ID), blank lines and
// lines starting with # ignored. It applies to the files of its folder and
// of every folder below, down to the next folder holding one (nearest
// wins). A folder without one anywhere above it takes the source's default.
const AccessFileName = ".bmcis-access"

// AccessLists are the access files of a tree by folder (slash-separated,
// relative to the root, "." for the root itself), each normalised
// (platform/access.ParseList; a list of everyone is ["everyone"], so it
// overrides a restricted source default).
type AccessLists map[string][]string

// ReadAccessLists finds and parses every access file under root. A file
// that cannot be read or holds an entry of an unknown form is an error
// naming it: the sync must not start, since it would store its folder's
// documents with the wrong readers.
func ReadAccessLists(root string) (AccessLists, error) {
	lists := AccessLists{}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, err
	}
	err = filepath.WalkDir(realRoot, func(real string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil // unreadable folders are WalkTree's to report
		}
		if real != realRoot && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		b, err := os.ReadFile(filepath.Join(real, AccessFileName))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if _, serr := os.Lstat(filepath.Join(real, AccessFileName)); err != nil && serr != nil && !errors.Is(serr, fs.ErrNotExist) {
			// The folder itself cannot be searched: WalkTree reports it
			// as unreadable, and everything stored under it stays.
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(realRoot, real)
		where := filepath.Join(root, rel, AccessFileName)
		if err != nil {
			return fmt.Errorf("read %s: %w", where, err)
		}
		var entries []string
		for _, line := range strings.Split(string(b), "\n") {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				entries = append(entries, line)
			}
		}
		list, err := access.ParseList(entries)
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if list == nil {
			list = []string{access.Everyone}
		}
		lists[filepath.ToSlash(rel)] = list
		return nil
	})
	return lists, err
}

// For returns the access list of the file rel (slash-separated, relative
// to the root): its nearest folder's access file's; nil when none applies
// (the source's default).
func (l AccessLists) For(rel string) []string {
	dir := path.Dir(rel)
	for {
		if list, ok := l[dir]; ok {
			return list
		}
		if dir == "." || dir == "/" || dir == "" {
			return nil
		}
		dir = path.Dir(dir)
	}
}
