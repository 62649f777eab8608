package source

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
)

func put(t *testing.T, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, rel)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
}

func collect(t *testing.T, paths ...string) (map[string]*searchv1.Document, map[string]string) {
	t.Helper()
	docs := map[string]*searchv1.Document{}
	problems := map[string]string{}
	require.NoError(t, Walk(paths, func(it Item) error {
		if it.Doc != nil {
			docs[it.Doc.ExternalId] = it.Doc
		} else {
			problems[it.Where] = it.Problem
		}
		return nil
	}))
	return docs, problems
}

func TestWalkTree(t *testing.T) {
	root := t.TempDir()
	put(t, root, "security/runbook.md", "---\ntitle: Incident Runbook\ncategory: sec-ops\nupdated_at: 2026-01-09T12:00:00Z\n---\n\n# Incident Runbook\n\nBody.\n")
	put(t, root, "security/nested/deep.md", "Intro line.\n\n```\n# not a heading\n```\n\n## First Real Heading\n\ntext\n")
	put(t, root, "top.md", "no heading at all")
	put(t, root, "notes/plain.txt", "Just text.\r\nSecond line.")
	put(t, root, "notes/dated.md", "---\nupdated_at: 2024-07-15\n---\n# Dated\n")
	put(t, root, "notes/ignored.bin", "%PDF")
	put(t, root, ".git/config.md", "hidden")
	put(t, root, "notes/.hidden.md", "hidden")
	put(t, root, "bad/front.md", "---\ntitle: [unclosed\n---\nbody")
	put(t, root, "bad/time.md", "---\nupdated_at: yesterday\n---\nbody")

	require.Equal(t, 7, Count([]string{root}))
	docs, problems := collect(t, root)
	require.Len(t, docs, 5)
	require.Len(t, problems, 2)
	require.Contains(t, problems[filepath.Join(root, "bad/front.md")], "invalid front matter")
	require.Contains(t, problems[filepath.Join(root, "bad/time.md")], "updated_at")

	d := docs["security/runbook.md"]
	require.Equal(t, "security/runbook.md", d.SourceFile)
	require.Equal(t, "sec-ops", d.Category, "front matter wins over the folder")
	require.Equal(t, "Incident Runbook", d.Title)
	require.True(t, d.UpdatedAt.AsTime().Equal(time.Date(2026, 1, 9, 12, 0, 0, 0, time.UTC)))
	require.Equal(t, searchv1.ContentFormat_CONTENT_FORMAT_MARKDOWN, d.Format)
	require.True(t, strings.HasPrefix(string(d.Content), "\n# Incident Runbook"), "front matter stripped: %q", d.Content)

	d = docs["security/nested/deep.md"]
	require.Equal(t, "security", d.Category, "first folder")
	require.Equal(t, "First Real Heading", d.Title, "first heading outside code")
	require.Nil(t, d.UpdatedAt)

	d = docs["top.md"]
	require.Equal(t, "", d.Category)
	require.Equal(t, "top", d.Title, "file name")

	d = docs["notes/plain.txt"]
	require.Equal(t, searchv1.ContentFormat_CONTENT_FORMAT_TEXT, d.Format)
	require.Equal(t, "plain", d.Title)
	require.Equal(t, "notes", d.Category)

	require.True(t, docs["notes/dated.md"].UpdatedAt.AsTime().Equal(time.Date(2024, 7, 15, 0, 0, 0, 0, time.UTC)))
	require.Equal(t, "Dated", docs["notes/dated.md"].Title)

	// A single file given directly: its name is the source.
	docs, _ = collect(t, filepath.Join(root, "security/runbook.md"))
	require.Contains(t, docs, "runbook.md")
}

func TestSymlinksStayInsideTheRoot(t *testing.T) {
	outside := t.TempDir()
	put(t, outside, "secret.md", "# Secret\n\nnot for ingestion\n")
	put(t, outside, "dir/more.md", "# More\n")
	root := t.TempDir()
	put(t, root, "hr/handbook.md", "# Handbook\n")
	link := func(target, rel string) {
		t.Helper()
		require.NoError(t, os.Symlink(target, filepath.Join(root, rel)))
	}
	link(filepath.Join(outside, "secret.md"), "hr/escape.md")       // absolute, outside
	link("../../"+filepath.Base(outside)+"/secret.md", "hr/rel.md") // relative, outside
	link("handbook.md", "hr/alias.md")                              // relative, inside
	link(filepath.Join(outside, "dir"), "hr/linked-dir")            // a directory outside: not descended
	link(filepath.Join(root, "hr/escape.md"), "hr/chain.md")        // inside link to an outside link

	docs, problems := collect(t, root)
	require.Contains(t, docs, "hr/handbook.md")
	require.Contains(t, docs, "hr/alias.md", "a link resolving inside the root is read")
	require.Equal(t, "Handbook", docs["hr/alias.md"].Title)
	for _, d := range docs {
		require.NotContains(t, string(d.Content), "not for ingestion")
		require.NotEqual(t, "More", d.Title)
	}
	tests := []struct{ name, rel string }{
		{"absolute link out", "hr/escape.md"},
		{"relative link out", "hr/rel.md"},
		{"link to a link out", "hr/chain.md"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.NotContains(t, docs, tc.rel)
			require.Equal(t, ErrOutsideRoot, problems[filepath.Join(root, tc.rel)], "skipped and reported")
		})
	}
	require.Len(t, docs, 2)
	require.Len(t, problems, 3)
	require.Equal(t, len(docs)+len(problems), Count([]string{root}), "progress counts the skipped links")

	t.Run("a root that is itself a link", func(t *testing.T) {
		via := filepath.Join(t.TempDir(), "via")
		require.NoError(t, os.Symlink(root, via))
		docs, problems := collect(t, via)
		require.Contains(t, docs, "hr/alias.md")
		require.Equal(t, ErrOutsideRoot, problems[filepath.Join(via, "hr/escape.md")])
		require.Equal(t, len(docs)+len(problems), Count([]string{via}))
	})
}

func TestJSONL(t *testing.T) {
	dir := t.TempDir()
	lines := []string{
		`{"_id": "4983", "title": "Microstructural development", "text": "Alterations of the architecture."}`,
		`{"id": 17, "title": "Numeric id", "text": "t", "category": "bio", "updated_at": "2025-02-03"}`,
		``,
		`{"title": "no id", "text": "x"}`,
		`{"_id": "5", "title": "no text"}`,
		`not json`,
		"{\"_id\": \"6\", \"text\": \"bad \xff utf8\"}",
		`{"_id": "7", "text": "", "title": "empty text goes to the service, which rejects it"}`,
	}
	p := filepath.Join(dir, "corpus.jsonl")
	require.NoError(t, os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	require.Equal(t, 7, Count([]string{p}))
	docs, problems := collect(t, p)
	require.Len(t, docs, 3)
	d := docs["4983"]
	require.Equal(t, "corpus.jsonl", d.SourceFile)
	require.Equal(t, "Microstructural development", d.Title)
	require.Equal(t, "Alterations of the architecture.", string(d.Content))
	require.Equal(t, searchv1.ContentFormat_CONTENT_FORMAT_TEXT, d.Format)
	require.Equal(t, "bio", docs["17"].Category)
	require.NotNil(t, docs["17"].UpdatedAt)
	require.Contains(t, docs, "7")
	require.Equal(t, map[string]string{
		"corpus.jsonl:4": `missing "_id" or "id"`,
		"corpus.jsonl:5": `record 5 has no "text"`,
		"corpus.jsonl:6": problems["corpus.jsonl:6"],
		"corpus.jsonl:7": "invalid UTF-8",
	}, problems)
	require.Contains(t, problems["corpus.jsonl:6"], "invalid JSON")

	// JSON Lines inside a tree are not read (a BEIR folder holds queries too).
	put(t, dir, "queries.jsonl", `{"_id":"q1","text":"a query"}`)
	docs, _ = collect(t, dir)
	require.Empty(t, docs)
}

func TestMissingPathIsAProblem(t *testing.T) {
	_, problems := collect(t, filepath.Join(t.TempDir(), "nope"))
	require.Len(t, problems, 1)
}

func TestWalkSendsEveryRegisteredFormat(t *testing.T) {
	root := t.TempDir()
	put(t, root, "hr/handbook.pdf", "%PDF-1.4 bytes the service reads")
	put(t, root, "hr/policy.DOCX", "PK zip bytes")
	put(t, root, "web/page.htm", "<html><body><p>x</p></body></html>")
	put(t, root, "web/notes.md", "---\ntitle: Notes\n---\n# Other\n")
	put(t, root, "web/image.png", "not a document")
	put(t, root, "data/corpus.jsonl", `{"_id": "1", "text": "t"}`+"\n")

	require.Equal(t, 4, Count([]string{root}), "containers and unknown files are not found in trees")
	docs, problems := collect(t, root)
	require.Empty(t, problems)
	tests := []struct {
		id, format, title, category string
		legacy                      searchv1.ContentFormat
	}{
		{"hr/handbook.pdf", "pdf", "", "hr", searchv1.ContentFormat_CONTENT_FORMAT_UNSPECIFIED},
		{"hr/policy.DOCX", "docx", "", "hr", searchv1.ContentFormat_CONTENT_FORMAT_UNSPECIFIED},
		{"web/page.htm", "html", "", "web", searchv1.ContentFormat_CONTENT_FORMAT_UNSPECIFIED},
		{"web/notes.md", "markdown", "Notes", "web", searchv1.ContentFormat_CONTENT_FORMAT_MARKDOWN},
	}
	require.Len(t, docs, len(tests))
	for _, tc := range tests {
		t.Run(tc.id, func(t *testing.T) {
			d := docs[tc.id]
			require.NotNil(t, d)
			require.Equal(t, tc.format, d.FormatName)
			require.Equal(t, tc.legacy, d.Format)
			require.Equal(t, tc.title, d.Title, "the service reads the title of binary formats")
			require.Equal(t, tc.category, d.Category)
		})
	}
	require.Equal(t, []byte("%PDF-1.4 bytes the service reads"), docs["hr/handbook.pdf"].Content, "sent as they are")

	docs, problems = collect(t, filepath.Join(root, "data/corpus.jsonl"), filepath.Join(root, "web/image.png"))
	require.Equal(t, "text", docs["1"].FormatName)
	require.Contains(t, problems[filepath.Join(root, "web/image.png")], "not a file of a known format (.docx, .htm, .html, .jsonl, .markdown, .md, .ndjson, .pdf, .txt, .xhtml)")
}

// A named pipe with a document's extension is a problem, not a read that
// blocks forever waiting for a writer: in a tree, named directly, and as
// a JSON Lines file (counting too).
func TestNamedPipesAreSkipped(t *testing.T) {
	root := t.TempDir()
	put(t, root, "a.md", "# A\n\nReadable.\n")
	for _, rel := range []string{"pipe.md", "sub/pipe.txt", "records.jsonl"} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, filepath.Dir(rel)), 0o755))
		require.NoError(t, syscall.Mkfifo(filepath.Join(root, rel), 0o644))
	}
	done := make(chan struct{})
	var docs map[string]*searchv1.Document
	var problems map[string]string
	go func() {
		defer close(done)
		Count([]string{root, filepath.Join(root, "records.jsonl")})
		docs, problems = collect(t, root, filepath.Join(root, "pipe.md"), filepath.Join(root, "records.jsonl"))
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the walk blocked on a named pipe")
	}
	require.Len(t, docs, 1)
	require.Contains(t, docs, "a.md")
	require.Equal(t, map[string]string{
		filepath.Join(root, "pipe.md"):       ErrNotRegular,
		filepath.Join(root, "sub/pipe.txt"):  ErrNotRegular,
		filepath.Join(root, "records.jsonl"): ErrNotRegular,
	}, problems)
}
