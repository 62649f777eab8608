// Package sample writes small, real PDF, DOCX and HTML files from one
// outline, so tests and the demo knowledge base ingest documents the project
// made itself (nothing downloaded, nothing binary of unknown origin).
package sample

import (
	"archive/zip"
	"bytes"
	"fmt"
	"html"
	"strings"
)

// Block is a heading (Level 1..3) or a paragraph (Level 0).
type Block struct {
	Level int
	Text  string
}

// Doc is an outline: a title and pages of blocks. Only the PDF keeps the
// page breaks as pages; DOCX and HTML flow them together.
type Doc struct {
	Title string
	Pages [][]Block
}

// Text is the words of the outline (title, headings, paragraphs) in
// reading order: what an extractor must give back.
func (d Doc) Text() string {
	var b strings.Builder
	b.WriteString(d.Title)
	for _, p := range d.Pages {
		for _, bl := range p {
			b.WriteString("\n")
			b.WriteString(bl.Text)
		}
	}
	return b.String()
}

// PDF lays the outline out with the standard Helvetica fonts: one PDF page
// per outline page, headings larger and bold. Text must be ASCII.
func PDF(d Doc) []byte { return pdf(d, 0) }

// BigPDF is PDF(d) grown to about size bytes by a grey-scale image of
// incompressible noise on the first page, as scanned or illustrated PDFs
// are: big files whose text is a small part.
func BigPDF(d Doc, size int) []byte { return pdf(d, size) }

func pdf(d Doc, size int) []byte {
	var objs []string // 1-based object bodies
	add := func(body string) int { objs = append(objs, body); return len(objs) }
	catalog := add("") // filled below
	pagesObj := add("")
	fontBody := add("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
	fontBold := add("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold /Encoding /WinAnsiEncoding >>")
	image := ""
	if size > 0 {
		const width = 1024
		height := max(1, size/width)
		noise := make([]byte, width*height)
		x := uint32(2463534242)
		for i := range noise { // xorshift: deterministic, incompressible
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			noise[i] = byte(x)
		}
		im := add(fmt.Sprintf("<< /Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceGray /BitsPerComponent 8 /Length %d >>\nstream\n%s\nendstream",
			width, height, len(noise), noise))
		image = fmt.Sprintf(" /XObject << /Im1 %d 0 R >>", im)
	}
	var kids []string
	for _, page := range d.Pages {
		var s strings.Builder
		y := 800.0
		line := func(font string, size float64, text string) {
			fmt.Fprintf(&s, "BT /%s %.1f Tf 56 %.1f Td (%s) Tj ET\n", font, size, y, pdfEscape(text))
			y -= size * 1.45
		}
		res := ""
		if len(kids) == 0 {
			line("F2", 22, d.Title)
			y -= 8
			if image != "" {
				s.WriteString("q 483 0 0 120 56 40 cm /Im1 Do Q\n")
				res = image
			}
		}
		for _, bl := range page {
			if bl.Level > 0 {
				y -= 6
				line("F2", []float64{0, 18, 14, 12.5}[min(bl.Level, 3)], bl.Text)
				continue
			}
			for _, l := range wrap(bl.Text, 95) {
				line("F1", 10, l)
			}
			y -= 6
		}
		stream := s.String()
		content := add(fmt.Sprintf("<< /Length %d >>\nstream\n%sendstream", len(stream), stream))
		p := add(fmt.Sprintf("<< /Type /Page /Parent %d 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 %d 0 R /F2 %d 0 R >>%s >> /Contents %d 0 R >>",
			pagesObj, fontBody, fontBold, res, content))
		kids = append(kids, fmt.Sprintf("%d 0 R", p))
	}
	objs[catalog-1] = fmt.Sprintf("<< /Type /Catalog /Pages %d 0 R >>", pagesObj)
	objs[pagesObj-1] = fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), len(kids))
	info := add(fmt.Sprintf("<< /Title (%s) /Producer (bmcis sample) >>", pdfEscape(d.Title)))

	var out bytes.Buffer
	out.WriteString("%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
	offsets := make([]int, len(objs))
	for i, body := range objs {
		offsets[i] = out.Len()
		fmt.Fprintf(&out, "%d 0 obj\n%s\nendobj\n", i+1, body)
	}
	xref := out.Len()
	fmt.Fprintf(&out, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&out, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&out, "trailer\n<< /Size %d /Root %d 0 R /Info %d 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, catalog, info, xref)
	return out.Bytes()
}

func pdfEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `(`, `\(`, `)`, `\)`).Replace(s)
}

func wrap(s string, width int) []string {
	var lines []string
	cur := ""
	for _, w := range strings.Fields(s) {
		if cur != "" && len(cur)+1+len(w) > width {
			lines = append(lines, cur)
			cur = ""
		}
		if cur != "" {
			cur += " "
		}
		cur += w
	}
	if cur != "" {
		lines = append(lines, cur)
	}
	return lines
}

// DOCX writes an Office Open XML word-processing file: the title in the
// Title style, headings in Heading1..3, paragraphs in the default style,
// and a page break between outline pages.
func DOCX(d Doc) []byte {
	var body strings.Builder
	para := func(style, text string) {
		body.WriteString("<w:p>")
		if style != "" {
			fmt.Fprintf(&body, `<w:pPr><w:pStyle w:val="%s"/></w:pPr>`, style)
		}
		fmt.Fprintf(&body, `<w:r><w:t xml:space="preserve">%s</w:t></w:r></w:p>`, html.EscapeString(text))
	}
	para("Title", d.Title)
	for i, page := range d.Pages {
		if i > 0 {
			body.WriteString(`<w:p><w:r><w:br w:type="page"/></w:r></w:p>`)
		}
		for _, bl := range page {
			style := ""
			if bl.Level > 0 {
				style = fmt.Sprintf("Heading%d", bl.Level)
			}
			para(style, bl.Text)
		}
	}
	files := []struct{ name, body string }{
		{"[Content_Types].xml", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/><Override PartName="/docProps/core.xml" ContentType="application/vnd.openxmlformats-package.core-properties+xml"/></Types>`},
		{"_rels/.rels", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/><Relationship Id="rId2" Type="http://schemas.openxmlformats.org/package/2006/relationships/metadata/core-properties" Target="docProps/core.xml"/></Relationships>`},
		{"docProps/core.xml", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>` + html.EscapeString(d.Title) + `</dc:title></cp:coreProperties>`},
		{"word/document.xml", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>` + body.String() + `</w:body></w:document>`},
	}
	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	for _, f := range files {
		// Fixed times keep the bytes reproducible (the demo files are committed).
		w, err := zw.CreateHeader(&zip.FileHeader{Name: f.name, Method: zip.Deflate})
		if err != nil {
			panic(err) // writing to memory cannot fail
		}
		_, _ = w.Write([]byte(f.body))
	}
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return out.Bytes()
}

// HTML writes a web page with the outline as its article, wrapped in the
// boilerplate of a real site: navigation, a cookie banner, a sidebar, a
// footer, scripts and styles. Each boilerplate piece carries one of the
// Boilerplate words, which must never reach the index.
func HTML(d Doc) []byte {
	var b strings.Builder
	e := html.EscapeString
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>%s</title>\n", e(d.Title))
	b.WriteString("<style>body{font-family:sans-serif} .navlinkzz{color:blue}</style>\n")
	b.WriteString("<script>window.trackerzz = function(){ return 'analyticszz'; };</script>\n</head><body>\n")
	b.WriteString(`<div id="cookie-banner" class="cookie-consent">We use cookieszz to improve your experience. <button>Accept all cookieszz</button></div>` + "\n")
	b.WriteString(`<header><nav class="site-nav"><a href="/">Homezz</a> <a href="/products">Productszz</a> <a href="/pricing">Pricingzz</a> <a href="/careers">Careerszz</a></nav></header>` + "\n")
	b.WriteString("<main><article>\n")
	fmt.Fprintf(&b, "<h1>%s</h1>\n", e(d.Title))
	for _, page := range d.Pages {
		for _, bl := range page {
			if bl.Level > 0 {
				fmt.Fprintf(&b, "<h%d>%s</h%d>\n", bl.Level+1, e(bl.Text), bl.Level+1)
				continue
			}
			fmt.Fprintf(&b, "<p>%s</p>\n", e(bl.Text))
		}
	}
	b.WriteString("</article></main>\n")
	b.WriteString(`<aside class="sidebar"><h3>Related postszz</h3><ul><li><a href="/a">Sidebarlinkzz one</a></li><li><a href="/b">Sidebarlinkzz two</a></li></ul></aside>` + "\n")
	b.WriteString(`<footer><p>Copyrightzz 2026 Example Corp. All rights reserved.</p><a href="/privacy">Privacyzz</a> <a href="/terms">Termszz</a></footer>` + "\n")
	b.WriteString("<script src=\"/app.js\"></script><script>console.log('scriptzz');</script>\n</body></html>\n")
	return []byte(b.String())
}

// Boilerplate lists words HTML places only in navigation, banners,
// sidebars, footers, scripts and styles.
var Boilerplate = []string{"cookieszz", "homezz", "productszz", "pricingzz", "careerszz", "postszz", "sidebarlinkzz",
	"copyrightzz", "privacyzz", "termszz", "scriptzz", "trackerzz", "analyticszz", "navlinkzz"}
