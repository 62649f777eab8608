package formats

import (
	"archive/zip"
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"

	"github.com/bmcis/knowledge/platform/chunker"
)

func init() {
	register("docx", extractDOCX)
}

// maxDOCXPart bounds how much one XML part may inflate to (a zip bomb
// would otherwise decompress without limit).
const maxDOCXPart = 64 << 20

// Word namespace of WordprocessingML elements.
const wordNS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"

// extractDOCX reads the Office Open XML document part (word/document.xml)
// as markdown: paragraphs in the Title style give the title, Heading1..6
// (or a style named "heading N", or an outline level) become headings, and
// every other paragraph, table cells included, is prose. Parts inflate and
// decode through the Input's readers.
func extractDOCX(in *Input) (Extracted, error) {
	data, name := in.Data, in.Name
	if bytes.HasPrefix(data, []byte("\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1")) {
		return Extracted{}, errors.New("encrypted or legacy Word file (an OLE container, not Office Open XML)")
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return Extracted{}, errors.New("not a DOCX (not a zip archive)")
	}
	part := func(n string) ([]byte, bool, error) {
		for _, f := range zr.File {
			if f.Name != n {
				continue
			}
			rc, err := f.Open()
			if err != nil {
				return nil, true, err
			}
			defer rc.Close()
			b, err := io.ReadAll(io.LimitReader(in.Wrap(rc), maxDOCXPart+1))
			if err == nil && len(b) > maxDOCXPart {
				err = fmt.Errorf("%s inflates past %d bytes", n, maxDOCXPart)
			}
			return b, true, err
		}
		return nil, false, nil
	}
	body, ok, err := part("word/document.xml")
	switch {
	case !ok:
		return Extracted{}, errors.New("not a DOCX (no word/document.xml)")
	case err != nil:
		return Extracted{}, fmt.Errorf("corrupt DOCX: %v", err)
	}
	levels := map[string]int{} // style id -> heading level (0 = title)
	if styles, ok, err := part("word/styles.xml"); ok && err == nil {
		levels = docxStyleLevels(styles)
	}
	paras, err := docxParagraphs(in.Wrap(bytes.NewReader(body)))
	if err != nil {
		return Extracted{}, fmt.Errorf("corrupt DOCX: %v", err)
	}
	title := ""
	if core, ok, err := part("docProps/core.xml"); ok && err == nil {
		title = docxCoreTitle(core)
	}
	var b strings.Builder
	for _, p := range paras {
		text := strings.Join(strings.Fields(p.text), " ")
		if text == "" {
			continue
		}
		level, isHeading := headingLevel(p, levels)
		switch {
		case isHeading && level == 0:
			if title == "" {
				title = text
			}
			b.WriteString("# " + text + "\n\n")
		case isHeading:
			// The title is level 1, so Heading1 sits under it.
			b.WriteString(strings.Repeat("#", min(level+1, 6)) + " " + text + "\n\n")
		default:
			b.WriteString(escapeMarkdownLine(strings.TrimSpace(p.text)) + "\n\n")
		}
	}
	if strings.TrimSpace(b.String()) == "" {
		return Extracted{}, errors.New("no text in DOCX")
	}
	if title == "" {
		title = strings.TrimSuffix(path.Base(name), path.Ext(name))
	}
	return Extracted{Text: b.String(), Layout: chunker.Markdown, Title: title}, nil
}

type docxPara struct {
	style        string
	outlineLevel int // -1 when unset
	text         string
}

func headingLevel(p docxPara, levels map[string]int) (int, bool) {
	if l, ok := levels[p.style]; ok {
		return l, true
	}
	if l, ok := styleLevel(p.style); ok {
		return l, true
	}
	if p.outlineLevel >= 0 && p.outlineLevel < 6 {
		return p.outlineLevel + 1, true
	}
	return 0, false
}

// styleLevel reads a style id or name: "Title" is 0, "Heading3" or
// "heading 3" is 3.
func styleLevel(s string) (int, bool) {
	s = strings.ToLower(strings.ReplaceAll(s, " ", ""))
	if s == "title" {
		return 0, true
	}
	if n, ok := strings.CutPrefix(s, "heading"); ok {
		if l, err := strconv.Atoi(n); err == nil && l >= 1 && l <= 6 {
			return l, true
		}
	}
	return 0, false
}

// docxParagraphs streams the document part: w:t text, w:tab and w:br as
// whitespace, one entry per w:p.
func docxParagraphs(body io.Reader) ([]docxPara, error) {
	dec := xml.NewDecoder(body)
	var out []docxPara
	var cur *docxPara
	// The current paragraph's text, built in place: += on a string would
	// copy it once per run, quadratic in a paragraph of many runs.
	var text strings.Builder
	depth := 0 // nesting of w:p (text boxes hold paragraphs inside runs)
	inText := false
	sawBody := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if t.Name.Space != wordNS {
				continue
			}
			switch t.Name.Local {
			case "body":
				sawBody = true
			case "p":
				depth++
				if depth == 1 {
					out = append(out, docxPara{outlineLevel: -1})
					cur = &out[len(out)-1]
					text.Reset()
				}
			case "pStyle":
				if cur != nil && depth == 1 {
					cur.style = attr(t, "val")
				}
			case "outlineLvl":
				if cur != nil && depth == 1 {
					if l, err := strconv.Atoi(attr(t, "val")); err == nil {
						cur.outlineLevel = l
					}
				}
			case "t":
				inText = true
			case "tab":
				if cur != nil {
					text.WriteByte('\t')
				}
			case "br", "cr":
				if cur != nil {
					text.WriteByte(' ')
				}
			}
		case xml.EndElement:
			if t.Name.Space != wordNS {
				continue
			}
			switch t.Name.Local {
			case "p":
				depth--
				if depth == 0 && cur != nil {
					cur.text = text.String()
					cur = nil
				}
			case "t":
				inText = false
			}
		case xml.CharData:
			if inText && cur != nil {
				text.Write(t)
			}
		}
	}
	if !sawBody {
		return nil, errors.New("word/document.xml has no w:body")
	}
	if cur != nil { // a paragraph the part never closed
		cur.text = text.String()
	}
	return out, nil
}

func attr(e xml.StartElement, local string) string {
	for _, a := range e.Attr {
		if a.Name.Local == local {
			return a.Value
		}
	}
	return ""
}

// docxStyleLevels maps style ids to heading levels from their names, so
// localized ids ("berschrift1") still read as headings.
func docxStyleLevels(styles []byte) map[string]int {
	var doc struct {
		Styles []struct {
			ID   string `xml:"styleId,attr"`
			Name struct {
				Val string `xml:"val,attr"`
			} `xml:"name"`
		} `xml:"style"`
	}
	out := map[string]int{}
	if xml.Unmarshal(styles, &doc) != nil {
		return out
	}
	for _, s := range doc.Styles {
		if l, ok := styleLevel(s.Name.Val); ok {
			out[s.ID] = l
		}
	}
	return out
}

func docxCoreTitle(core []byte) string {
	var doc struct {
		Title string `xml:"http://purl.org/dc/elements/1.1/ title"`
	}
	if xml.Unmarshal(core, &doc) != nil {
		return ""
	}
	return strings.Join(strings.Fields(doc.Title), " ")
}
