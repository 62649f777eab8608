package formats

import (
	"archive/zip"
	"bytes"
	"context"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/chunker"
	"github.com/bmcis/knowledge/platform/docformat"
	"github.com/bmcis/knowledge/services/search/internal/formats/sample"
)

var word = regexp.MustCompile(`[\p{L}\p{N}]+`)

// overlap is the share of the source's word tokens (with multiplicity)
// found in the extracted text.
func overlap(source, extracted string) float64 {
	have := map[string]int{}
	for _, w := range word.FindAllString(strings.ToLower(extracted), -1) {
		have[w]++
	}
	src := word.FindAllString(strings.ToLower(source), -1)
	hit := 0
	for _, w := range src {
		if have[w] > 0 {
			have[w]--
			hit++
		}
	}
	return float64(hit) / float64(len(src))
}

func TestRegistry(t *testing.T) {
	tests := []struct {
		path, media, name string
	}{
		{"a/b/Guide.MD", "text/markdown", "markdown"},
		{"notes.markdown", "", "markdown"},
		{"plain.txt", "text/plain; charset=utf-8", "text"},
		{"corpus.jsonl", "application/x-ndjson", "jsonl"},
		{"page.htm", "text/html", "html"},
		{"page.html", "", "html"},
		{"Report.docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document", "docx"},
		{"Handbook.PDF", "application/pdf", "pdf"},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			f, ok := ForPath(tc.path)
			require.True(t, ok)
			require.Equal(t, tc.name, f.Name)
			byName, ok := ByName(tc.name)
			require.True(t, ok)
			require.Same(t, f, byName)
			if tc.media != "" {
				m, ok := ForMediaType(tc.media)
				require.True(t, ok)
				require.Same(t, f, m)
			}
		})
	}
	_, ok := ForPath("image.png")
	require.False(t, ok)
	require.Equal(t, []string{"docx", "html", "markdown", "pdf", "text"}, docformat.Names(), "containers are not document formats")
	for _, d := range docformat.All() {
		f, ok := ByName(d.Name)
		require.True(t, ok)
		require.Equal(t, !d.Container(), f.extract != nil, "%s: every document format has an extractor, a container none", d.Name)
	}

	t.Run("documents name their format", func(t *testing.T) {
		for _, tc := range []struct {
			doc  *searchv1.Document
			want string
		}{
			{&searchv1.Document{}, "markdown"},
			{&searchv1.Document{Format: searchv1.ContentFormat_CONTENT_FORMAT_TEXT}, "text"},
			{&searchv1.Document{FormatName: "pdf", Format: searchv1.ContentFormat_CONTENT_FORMAT_TEXT}, "pdf"},
		} {
			f, err := ForDocument(tc.doc)
			require.NoError(t, err)
			require.Equal(t, tc.want, f.Name)
		}
		_, err := ForDocument(&searchv1.Document{FormatName: "jsonl"})
		require.ErrorContains(t, err, `unknown format "jsonl"`, "a container is split by the client, never sent whole")
		_, err = ForDocument(&searchv1.Document{FormatName: "rtf"})
		require.ErrorContains(t, err, `unknown format "rtf" (known: docx, html, markdown, pdf, text)`)
	})
}

func TestExtractKeepsTextAndStructure(t *testing.T) {
	doc := sample.Handbook
	tests := []struct {
		format, file string
		data         []byte
		layout       chunker.Format
		headings     []string // markdown heading lines expected
		title        string
	}{
		{"pdf", "hr/Handbook.pdf", sample.PDF(doc), chunker.PagedMarkdown,
			[]string{"# Employee Handbook", "## Welcome", "### Working hours", "## Expenses", "### Per diem", "## Security"}, "Employee Handbook"},
		{"docx", "hr/Handbook.docx", sample.DOCX(doc), chunker.Markdown,
			[]string{"# Employee Handbook", "## Welcome", "### Working hours", "## Expenses", "### Per diem", "## Security", "### Passwords"}, "Employee Handbook"},
		{"html", "hr/handbook.html", sample.HTML(doc), chunker.Markdown,
			[]string{"# Employee Handbook", "## Welcome", "### Working hours", "## Expenses", "### Per diem", "## Security", "### Passwords"}, "Employee Handbook"},
	}
	for _, tc := range tests {
		t.Run(tc.format, func(t *testing.T) {
			f, ok := ForPath(tc.file)
			require.True(t, ok)
			ex, err := f.Extract(t.Context(), tc.data, tc.file)
			require.NoError(t, err)
			require.Equal(t, tc.layout, ex.Layout)
			require.Equal(t, tc.title, ex.Title)
			require.GreaterOrEqual(t, overlap(doc.Text(), ex.Text), 0.95, ex.Text)
			lines := strings.Split(ex.Text, "\n")
			for _, h := range tc.headings {
				require.Contains(t, lines, h)
			}
			for _, bp := range sample.Boilerplate {
				require.NotContains(t, strings.ToLower(ex.Text), bp)
			}
			if tc.format == "pdf" {
				require.Equal(t, len(doc.Pages)-1, strings.Count(ex.Text, "\n\f\n"), "one form feed line between pages")
			}
		})
	}
}

func TestHTMLWithoutMainUsesReadableContent(t *testing.T) {
	// No <main> or <article>: boilerplate is still cut by tag, role and class.
	page := `<html><head><title>Release notes</title><script>var x = "scriptzz";</script></head><body>
<div role="navigation"><a href="/">Homezz</a> <a href="/docs">Productszz</a></div>
<div class="site-header">Careerszz at Example</div>
<div id="content"><h1>Release notes</h1><p>Version two adds <a href="https://example.com/x">single sign-on</a> for every workspace.</p>
<h2>Fixes</h2><p>Exports no longer time out on large projects.</p><img src="diagram.png" alt="Privacyzz"></div>
<div class="gdpr-consent">We use cookieszz. <button>OK</button></div>
<div class="footer">Copyrightzz 2026</div></body></html>`
	ex, err := extractHTML(background([]byte(page), "notes.html"))
	require.NoError(t, err)
	require.Equal(t, "Release notes", ex.Title)
	require.Contains(t, ex.Text, "single sign-on for every workspace")
	require.Contains(t, ex.Text, "## Fixes")
	require.NotContains(t, ex.Text, "example.com", "links keep their words, not their targets")
	for _, bp := range sample.Boilerplate {
		require.NotContains(t, strings.ToLower(ex.Text), bp)
	}
}

func TestDOCXLocalizedStyles(t *testing.T) {
	// Word writes localized style ids; styles.xml names them.
	data := docxWith(t, map[string]string{
		"word/document.xml": `<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>` +
			`<w:p><w:pPr><w:pStyle w:val="berschrift1"/></w:pPr><w:r><w:t>Einleitung</w:t></w:r></w:p>` +
			`<w:p><w:r><w:t xml:space="preserve">Erster </w:t></w:r><w:r><w:t>Absatz.</w:t></w:r></w:p>` +
			`<w:tbl><w:tr><w:tc><w:p><w:r><w:t>Zelle</w:t></w:r></w:p></w:tc></w:tr></w:tbl>` +
			`</w:body></w:document>`,
		"word/styles.xml": `<w:styles xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">` +
			`<w:style w:styleId="berschrift1"><w:name w:val="heading 1"/></w:style></w:styles>`,
	})
	ex, err := extractDOCX(background(data, "de/Bericht.docx"))
	require.NoError(t, err)
	require.Equal(t, "Bericht", ex.Title, "no title property or Title paragraph: the file name")
	require.Equal(t, "## Einleitung\n\nErster Absatz.\n\nZelle\n\n", ex.Text)
}

// background is an Input whose caller never leaves.
func background(data []byte, name string) *Input {
	return &Input{ctx: context.Background(), Data: data, Name: name}
}

func docxWith(t *testing.T, parts map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range parts {
		w, err := zw.Create(name)
		require.NoError(t, err)
		_, err = w.Write([]byte(body))
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

func TestUnreadableFilesSayWhy(t *testing.T) {
	pdf := sample.PDF(sample.Handbook)
	docx := sample.DOCX(sample.Handbook)
	noText := sample.PDF(sample.Doc{Pages: [][]sample.Block{{}, {}}})
	encrypted := bytes.Replace(pdf, []byte("/Root 1 0 R"), []byte("/Root 1 0 R /Encrypt << /Filter /Standard /V 2 /R 3 /Length 128 /O <00> /U <00> /P -4 >>"), 1)
	tests := []struct {
		name, file string
		data       []byte
		reason     string
	}{
		{"pdf that is text", "a.pdf", []byte("just some words, not a PDF"), "not a PDF (no %PDF- header)"},
		{"truncated pdf", "a.pdf", pdf[:len(pdf)/3], "corrupt PDF"},
		{"garbage pdf", "a.pdf", append([]byte("%PDF-1.4\n"), bytes.Repeat([]byte{0xde, 0xad}, 300)...), "corrupt PDF"},
		{"encrypted pdf", "a.pdf", encrypted, "encrypted PDF"},
		{"scanned pdf", "a.pdf", noText, "no text in PDF"},
		{"docx that is text", "a.docx", []byte("plain words"), "not a DOCX (not a zip archive)"},
		{"truncated docx", "a.docx", docx[:len(docx)/2], "not a DOCX (not a zip archive)"},
		{"zip without document", "a.docx", docxWith(t, map[string]string{"readme.txt": "hi"}), "not a DOCX (no word/document.xml)"},
		{"broken xml", "a.docx", docxWith(t, map[string]string{"word/document.xml": "<w:document><w:body><w:p>"}), "corrupt DOCX"},
		{"legacy or encrypted docx", "a.docx", append([]byte("\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"), make([]byte, 512)...), "encrypted or legacy Word file"},
		{"html that is a pdf", "a.html", pdf, "not HTML (binary content)"},
		{"html that is an image", "a.html", append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 64)...), "not HTML (binary content)"},
		{"html that is plain text", "a.html", []byte("no markup here at all"), "not HTML (no HTML elements)"},
		{"html with only boilerplate", "a.html", []byte("<html><body><nav>Home</nav><footer>(c)</footer></body></html>"), "no text in HTML page"},
		{"markdown that is binary", "a.md", []byte("a\x00b"), "binary content"},
		{"text in latin-1", "a.txt", []byte("caf\xe9"), "invalid UTF-8 at byte 3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, ok := ForPath(tc.file)
			require.True(t, ok)
			_, err := f.Extract(t.Context(), tc.data, tc.file)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.reason)
		})
	}
}

// A PDF that keeps the engine busy past the bound is refused, and the
// engine still reads the next one.
func TestPDFTimeout(t *testing.T) {
	pdf := sample.PDF(sample.Handbook)
	_, err := extractPDF(background(pdf, "warm.pdf")) // the engine is up before the bound shrinks
	require.NoError(t, err)
	defer func(d time.Duration) { pdfTimeout = d }(pdfTimeout)
	pdfTimeout = time.Nanosecond
	_, err = extractPDF(background(pdf, "slow.pdf"))
	require.ErrorContains(t, err, "PDF not read within 1ns")
	pdfTimeout = time.Minute
	for range pdfWorkers + 1 { // every worker slot is usable again
		ex, err := extractPDF(background(pdf, "after.pdf"))
		require.NoError(t, err)
		require.Equal(t, "Employee Handbook", ex.Title)
	}
}

// TestDOCXParagraphOfManyRunsIsLinear: one paragraph of 4,000 runs of 100
// bytes. Built with += on a string it copied the paragraph once per run,
// about 800 MB allocated; built in place, a few times its 400 KB.
func TestDOCXParagraphOfManyRunsIsLinear(t *testing.T) {
	var body strings.Builder
	body.WriteString(`<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p>`)
	run := strings.Repeat("x", 99) + " "
	for range 4000 {
		body.WriteString(`<w:r><w:t xml:space="preserve">` + run + `</w:t></w:r>`)
	}
	body.WriteString(`<w:r><w:tab/><w:t>end</w:t><w:br/></w:r></w:p></w:body></w:document>`)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	paras, err := docxParagraphs(strings.NewReader(body.String()))
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	require.Len(t, paras, 1)
	require.Equal(t, strings.Repeat(run, 4000)+"\tend ", paras[0].text)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("allocated %d KB for a %d KB paragraph", allocated>>10, len(paras[0].text)>>10)
	require.Less(t, allocated, uint64(40<<20), "allocation grows with the paragraph, not with its square")
}
