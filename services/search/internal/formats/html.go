package formats

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"unicode/utf8"

	readability "codeberg.org/readeck/go-readability/v2"
	htmltomarkdown "github.com/JohannesKaufmann/html-to-markdown/v2"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
	"golang.org/x/net/html/charset"

	"github.com/bmcis/knowledge/platform/chunker"
)

func init() {
	register("html", extractHTML)
}

var htmlElement = regexp.MustCompile(`(?i)<(!doctype\s+html|html|head|body|title|main|article|section|div|p|h[1-6]|ul|ol|table|span|a)[\s>/]`)

// extractHTML keeps a page's main content as markdown: boilerplate
// (navigation, headers and footers outside the article, sidebars, cookie
// and consent banners, scripts, styles, forms) is cut before anything is
// read, then the main content is <main> or <article> when the page marks
// it, else what readability finds, as long as that keeps most of the text.
// The page is decoded and parsed through the Input's readers; the stages
// after (pruning, readability, conversion) are checked between.
func extractHTML(in *Input) (Extracted, error) {
	data := in.Data
	if isBinary(data) || bytes.HasPrefix(data, []byte("%PDF-")) || bytes.HasPrefix(data, []byte("PK\x03\x04")) {
		return Extracted{}, errors.New("not HTML (binary content)")
	}
	valid, _, err := in.validUTF8()
	if err != nil {
		return Extracted{}, err
	}
	if !valid {
		enc, name, _ := charset.DetermineEncoding(data, "")
		decoded, err := io.ReadAll(enc.NewDecoder().Reader(in.Reader()))
		if err != nil || !utf8.Valid(decoded) {
			return Extracted{}, fmt.Errorf("not HTML: undecodable text (charset %s)", name)
		}
		data = decoded
	}
	if !htmlElement.Match(data) {
		return Extracted{}, errors.New("not HTML (no HTML elements)")
	}
	doc, err := html.Parse(in.Wrap(bytes.NewReader(data)))
	if err != nil {
		return Extracted{}, fmt.Errorf("corrupt HTML: %v", err)
	}
	title := strings.Join(strings.Fields(textOf(find(doc, atom.Title))), " ")
	pruneBoilerplate(doc, false)
	body := find(doc, atom.Body)
	if body == nil {
		body = doc
	}
	content := find(body, atom.Main)
	if content == nil {
		content = find(body, atom.Article)
	}
	if content == nil {
		content = body
		all := len(strings.Fields(textOf(body)))
		if err := in.Check(); err != nil {
			return Extracted{}, err
		}
		if art, err := readability.FromDocument(cloneTree(doc), nil); err == nil && art.Node != nil &&
			len(strings.Fields(textOf(art.Node))) >= all*6/10 {
			content = art.Node
		}
	}
	if title == "" {
		title = strings.Join(strings.Fields(textOf(find(content, atom.H1))), " ")
	}
	simplifyInline(content)
	if err := in.Check(); err != nil {
		return Extracted{}, err
	}
	md, err := htmltomarkdown.ConvertNode(content)
	if err != nil {
		return Extracted{}, fmt.Errorf("corrupt HTML: %v", err)
	}
	if len(bytes.TrimSpace(md)) == 0 {
		return Extracted{}, errors.New("no text in HTML page (only boilerplate or markup)")
	}
	return Extracted{Text: string(md), Layout: chunker.Markdown, Title: title}, nil
}

// Always boilerplate, wherever it sits.
var dropTags = map[atom.Atom]bool{
	atom.Script: true, atom.Style: true, atom.Noscript: true, atom.Template: true, atom.Iframe: true,
	atom.Svg: true, atom.Canvas: true, atom.Nav: true, atom.Aside: true, atom.Form: true,
	atom.Button: true, atom.Select: true, atom.Input: true, atom.Textarea: true, atom.Dialog: true,
	atom.Object: true, atom.Embed: true, atom.Link: true, atom.Meta: true,
}

var dropRoles = map[string]bool{"navigation": true, "banner": true, "contentinfo": true, "complementary": true,
	"search": true, "dialog": true, "alertdialog": true, "menu": true, "menubar": true}

// Class or id words of site furniture; "header" and "footer" only count
// outside the main content (an article's own header holds its title).
var boilerplateWords = regexp.MustCompile(`(?i)(^|[\s_-])(cookies?|consent|gdpr|newsletter|subscribe|breadcrumbs?|sidebar|advert|ads|promo|popup|modal|share|social|navbar|nav|menu|skip-link)([\s_-]|$)`)
var pageFurnitureWords = regexp.MustCompile(`(?i)(^|[\s_-])(header|footer|masthead|banner)([\s_-]|$)`)

func pruneBoilerplate(n *html.Node, inContent bool) {
	for c := n.FirstChild; c != nil; {
		next := c.NextSibling
		if c.Type == html.CommentNode {
			n.RemoveChild(c)
		} else if c.Type == html.ElementNode {
			if isBoilerplate(c, inContent) {
				n.RemoveChild(c)
			} else {
				pruneBoilerplate(c, inContent || c.DataAtom == atom.Main || c.DataAtom == atom.Article)
			}
		}
		c = next
	}
}

func isBoilerplate(n *html.Node, inContent bool) bool {
	if dropTags[n.DataAtom] {
		return true
	}
	if !inContent && (n.DataAtom == atom.Header || n.DataAtom == atom.Footer) {
		return true
	}
	var idClass string
	for _, a := range n.Attr {
		switch strings.ToLower(a.Key) {
		case "role":
			if dropRoles[strings.ToLower(strings.TrimSpace(a.Val))] {
				return true
			}
		case "hidden":
			return true
		case "aria-hidden":
			if strings.EqualFold(a.Val, "true") {
				return true
			}
		case "id", "class":
			idClass += " " + a.Val
		}
	}
	return boilerplateWords.MatchString(idClass) || (!inContent && pageFurnitureWords.MatchString(idClass))
}

// simplifyInline replaces links by their text and drops images, so URLs
// and file names do not reach the index as words.
func simplifyInline(n *html.Node) {
	for c := n.FirstChild; c != nil; {
		next := c.NextSibling
		if c.Type == html.ElementNode {
			simplifyInline(c)
			switch c.DataAtom {
			case atom.A:
				for gc := c.FirstChild; gc != nil; {
					gnext := gc.NextSibling
					c.RemoveChild(gc)
					n.InsertBefore(gc, c)
					gc = gnext
				}
				n.RemoveChild(c)
			case atom.Img, atom.Picture, atom.Video, atom.Audio, atom.Source:
				n.RemoveChild(c)
			}
		}
		c = next
	}
}

func find(n *html.Node, a atom.Atom) *html.Node {
	if n == nil {
		return nil
	}
	if n.Type == html.ElementNode && n.DataAtom == a {
		return n
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if f := find(c, a); f != nil {
			return f
		}
	}
	return nil
}

func textOf(n *html.Node) string {
	if n == nil {
		return ""
	}
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
			b.WriteByte(' ')
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return b.String()
}

// cloneTree deep-copies a node (readability rewrites the tree it reads).
func cloneTree(n *html.Node) *html.Node {
	c := &html.Node{Type: n.Type, DataAtom: n.DataAtom, Data: n.Data, Namespace: n.Namespace,
		Attr: append([]html.Attribute(nil), n.Attr...)}
	for k := n.FirstChild; k != nil; k = k.NextSibling {
		c.AppendChild(cloneTree(k))
	}
	return c
}
