package chunker

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

type headingEntry struct {
	level int
	text  string
}

// markdownBlocks parses the block structure the chunker cares about:
// ATX and setext headings (which set the heading path), fenced code blocks
// (``` or ~~~, kept whole) and paragraphs (everything else, split on blank
// lines). Indented code, lists, tables and quotes are treated as prose.
func markdownBlocks(title, src string, paged bool) []block {
	var stack []headingEntry
	page := 0
	if paged {
		page = 1
	}
	path := func() []string {
		p := make([]string, 0, len(stack)+2)
		if title != "" {
			p = append(p, title)
		}
		if paged {
			p = append(p, fmt.Sprintf("p. %d", page))
		}
		for _, h := range stack {
			p = append(p, h.text)
		}
		return p
	}
	curPath := path()
	var blocks []block
	paraStart, paraEnd := -1, -1
	flushPara := func() {
		if paraStart >= 0 {
			blocks = append(blocks, block{start: paraStart, end: paraEnd, page: page, path: curPath, kind: prose})
		}
		paraStart, paraEnd = -1, -1
	}
	pushHeading := func(level int, text string, start, end int) {
		// A leading "# Title" that repeats the document title is the title
		// itself, not a section: "Guide > Guide > Setup" would be noise.
		if title != "" && len(stack) == 0 && level == 1 && strings.EqualFold(strings.TrimSpace(text), title) {
			blocks = append(blocks, block{start: start, end: end, page: page, path: curPath, kind: heading})
			return
		}
		for len(stack) > 0 && stack[len(stack)-1].level >= level {
			stack = stack[:len(stack)-1]
		}
		stack = append(stack, headingEntry{level: level, text: text})
		curPath = path()
		blocks = append(blocks, block{start: start, end: end, page: page, path: curPath, kind: heading})
	}

	for ls := 0; ls < len(src); {
		le, next := lineEnd(src, ls)
		line := src[ls:le]

		if fch, n, ok := fenceOpen(line); ok {
			flushPara()
			// Find the closing fence; an unclosed fence runs to the end.
			bodyStart := next
			closeStart, closeEnd, after := len(src), len(src), len(src)
			for ks := next; ks < len(src); {
				ke, knext := lineEnd(src, ks)
				if fenceCloses(src[ks:ke], fch, n) {
					closeStart, closeEnd, after = ks, ke, knext
					break
				}
				ks = knext
			}
			end := closeEnd
			closeLine := strings.TrimSpace(src[closeStart:closeEnd])
			if closeStart == len(src) {
				closeLine = strings.Repeat(string(fch), n)
				end = trimRightSpace(src, ls, len(src))
			}
			bodyEnd := closeStart
			if bodyEnd < bodyStart {
				bodyEnd = bodyStart
			}
			blocks = append(blocks, block{
				start: ls, end: end, page: page, path: curPath, kind: code,
				open: strings.TrimSpace(line), close: closeLine,
				bodyStart: bodyStart, bodyEnd: bodyEnd,
			})
			ls = after
			continue
		}
		if paged && line == "\f" {
			flushPara()
			page++
			curPath = path()
			ls = next
			continue
		}
		if level, text, ok := atxHeading(line); ok {
			flushPara()
			pushHeading(level, text, ls, le)
			ls = next
			continue
		}
		if strings.TrimSpace(line) == "" {
			flushPara()
			ls = next
			continue
		}
		if paraStart >= 0 {
			if level, ok := setextUnderline(line); ok {
				text := strings.Join(strings.Fields(src[paraStart:paraEnd]), " ")
				start := paraStart
				paraStart, paraEnd = -1, -1
				pushHeading(level, text, start, le)
				ls = next
				continue
			}
		}
		if paraStart < 0 {
			paraStart = ls
		}
		paraEnd = le
		ls = next
	}
	flushPara()
	return blocks
}

// lineEnd returns the end of the line at ls (without its newline) and the
// start of the next line.
func lineEnd(s string, ls int) (int, int) {
	i := strings.IndexByte(s[ls:], '\n')
	if i < 0 {
		return len(s), len(s)
	}
	e := ls + i
	next := e + 1
	if e > ls && s[e-1] == '\r' {
		e--
	}
	return e, next
}

func indentOK(line string) (string, bool) {
	n := 0
	for n < len(line) && line[n] == ' ' {
		n++
	}
	if n > 3 {
		return "", false
	}
	return line[n:], true
}

// fenceOpen recognises ``` or ~~~ (3 or more) with up to 3 spaces indent.
func fenceOpen(line string) (byte, int, bool) {
	rest, ok := indentOK(line)
	if !ok || len(rest) < 3 || (rest[0] != '`' && rest[0] != '~') {
		return 0, 0, false
	}
	ch := rest[0]
	n := 0
	for n < len(rest) && rest[n] == ch {
		n++
	}
	if n < 3 {
		return 0, 0, false
	}
	if ch == '`' && strings.IndexByte(rest[n:], '`') >= 0 {
		return 0, 0, false // backticks in the info string: inline code, not a fence
	}
	return ch, n, true
}

func fenceCloses(line string, ch byte, n int) bool {
	rest, ok := indentOK(line)
	if !ok {
		return false
	}
	k := 0
	for k < len(rest) && rest[k] == ch {
		k++
	}
	return k >= n && strings.TrimSpace(rest[k:]) == ""
}

func atxHeading(line string) (int, string, bool) {
	rest, ok := indentOK(line)
	if !ok {
		return 0, "", false
	}
	level := 0
	for level < len(rest) && rest[level] == '#' {
		level++
	}
	if level == 0 || level > 6 || (level < len(rest) && rest[level] != ' ' && rest[level] != '\t') {
		return 0, "", false
	}
	text := strings.TrimSpace(rest[level:])
	// Optional closing sequence: " ##".
	if t := strings.TrimRight(text, "#"); t != text && (t == "" || strings.HasSuffix(t, " ")) {
		text = strings.TrimSpace(t)
	}
	return level, text, true
}

func setextUnderline(line string) (int, bool) {
	rest, ok := indentOK(line)
	rest = strings.TrimRight(rest, " \t")
	if !ok || rest == "" {
		return 0, false
	}
	ch := rest[0]
	if ch != '=' && ch != '-' {
		return 0, false
	}
	for i := 0; i < len(rest); i++ {
		if rest[i] != ch {
			return 0, false
		}
	}
	if ch == '=' {
		return 1, true
	}
	return 2, true
}

// forEachParagraph calls fn for each blank-line separated paragraph of
// src[start:end], trimmed of surrounding whitespace.
func forEachParagraph(src string, start, end int, fn func(s, e int)) {
	ps := -1
	pe := -1
	for ls := start; ls < end; {
		le, next := lineEnd(src, ls)
		if le > end {
			le = end
		}
		if strings.TrimSpace(src[ls:le]) == "" {
			if ps >= 0 {
				fn(ps, pe)
			}
			ps = -1
		} else {
			if ps < 0 {
				ps = ls + leadingSpace(src[ls:le])
			}
			pe = trimRightSpace(src, ls, le)
		}
		ls = next
	}
	if ps >= 0 {
		fn(ps, pe)
	}
}

func leadingSpace(s string) int {
	return len(s) - len(strings.TrimLeftFunc(s, unicode.IsSpace))
}

// trimRightSpace returns e moved left past trailing whitespace (not past s).
func trimRightSpace(src string, s, e int) int {
	for e > s {
		r, size := utf8.DecodeLastRuneInString(src[s:e])
		if !unicode.IsSpace(r) {
			break
		}
		e -= size
	}
	return e
}

// sentenceStarts returns the offsets in [start,end) where sentences begin:
// start itself, every non-blank line start, and after ., ! or ? (plus any
// closing quotes or brackets) and whitespace when the next character looks
// like a sentence opening (upper case, digit, opening quote or bracket).
// Lower-case continuations ("e.g. this") are not split.
func sentenceStarts(src string, start, end int) []int {
	out := []int{start}
	add := func(p int) {
		if p > out[len(out)-1] && p < end {
			out = append(out, p)
		}
	}
	for i := start; i < end; {
		r, size := utf8.DecodeRuneInString(src[i:end])
		switch {
		case r == '\n':
			j := i + 1
			for j < end && (src[j] == ' ' || src[j] == '\t' || src[j] == '\n' || src[j] == '\r') {
				j++
			}
			add(j)
		case r == '.' || r == '!' || r == '?':
			j := i + size
			for j < end {
				c := src[j]
				if c == '"' || c == '\'' || c == ')' || c == ']' {
					j++
					continue
				}
				break
			}
			k := j
			for k < end && (src[k] == ' ' || src[k] == '\t') {
				k++
			}
			if k > j && k < end {
				nr, _ := utf8.DecodeRuneInString(src[k:end])
				if unicode.IsUpper(nr) || unicode.IsDigit(nr) || nr == '"' || nr == '(' || nr == '[' || nr == '\u201c' {
					add(k)
				}
			}
		}
		i += size
	}
	return out
}
