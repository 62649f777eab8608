// Package testfake runs in-process stand-ins for the search, vendorgraph
// and auth gRPC services over bufconn, for the adapter's phase-1 tests.
// They implement the final gRPC contracts with small deterministic
// behaviour (a term-overlap ranking over an embedded corpus, a generated
// vendor graph, a table of API keys); the real services replace them in
// the phase-2 tests.
package testfake

import (
	"embed"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tokens"
)

//go:embed corpus/*
var corpusFS embed.FS

// Special terms that select special chunks.
const (
	// HugeTerm matches one chunk of about 20,000 tokens.
	HugeTerm = "zzhugeterm"
	// BigTerm matches twelve chunks of about 2,500 tokens each.
	BigTerm = "zzbigterm"
)

// Document is a corpus file.
type Document struct {
	Name, Category, Title, Text string
}

// Documents returns the embedded corpus files.
func Documents() []Document {
	entries, _ := corpusFS.ReadDir("corpus")
	cats := map[string]string{
		"data-platform.md":      "data-platforms",
		"identity-access.md":    "authentication",
		"incident-response.md":  "security",
		"procurement-policy.md": "vendor-management",
		"search-server.go.txt":  "",
		"vendor-onboarding.md":  "vendor-management",
	}
	var docs []Document
	for _, e := range entries {
		b, _ := corpusFS.ReadFile(path.Join("corpus", e.Name()))
		text := string(b)
		title := strings.TrimSuffix(e.Name(), path.Ext(e.Name()))
		if strings.HasPrefix(text, "# ") {
			title = strings.TrimSpace(strings.SplitN(text[2:], "\n", 2)[0])
		}
		docs = append(docs, Document{Name: e.Name(), Category: cats[e.Name()], Title: title, Text: text})
	}
	sort.Slice(docs, func(i, j int) bool { return docs[i].Name < docs[j].Name })
	return docs
}

type section struct{ header, text string }

func sections(d Document) []section {
	var out []section
	header := d.Title
	var cur strings.Builder
	flush := func() {
		if t := strings.TrimSpace(cur.String()); t != "" {
			out = append(out, section{header, t})
		}
		cur.Reset()
	}
	for _, line := range strings.Split(d.Text, "\n") {
		if strings.HasPrefix(line, "## ") {
			flush()
			header = d.Title + " > " + strings.TrimSpace(line[3:])
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
	}
	flush()
	return out
}

// Epoch is the reference "now" of the corpus dates.
var Epoch = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// Corpus builds the chunk store: every section of every document; pairs of
// sections from different documents under synthetic file names (to make
// long ranked lists); exact copies of three sections under archive/ (near
// duplicates); one huge chunk and twelve big chunks for the token-budget
// paths. Ids are stable.
func Corpus() []*searchv1.Chunk {
	docs := Documents()
	var chunks []*searchv1.Chunk
	id := int64(1000)
	add := func(file, cat, header, text string, idx, total int, age time.Duration) {
		id++
		chunks = append(chunks, &searchv1.Chunk{
			ChunkId: id, DocumentId: "doc-" + file, SourceFile: file, SourceCategory: cat,
			Title: header, ContextHeader: header, ChunkText: text, ChunkIndex: int32(idx), TotalChunks: int32(total),
			ChunkTokenCount: int32(tokens.Count(text)), UpdatedAt: timestamppb.New(Epoch.Add(-age)),
		})
	}
	var all []section
	var allDocs []Document
	for di, d := range docs {
		ss := sections(d)
		for i, s := range ss {
			add("docs/"+d.Name, d.Category, s.header, s.text, i, len(ss), time.Duration(di*40+i)*24*time.Hour)
			all = append(all, s)
			allDocs = append(allDocs, d)
		}
	}
	// pairs of sections from different documents
	n := 0
	for i := 0; i < len(all) && n < 110; i++ {
		for j := i + 1; j < len(all) && n < 110; j += 3 {
			if allDocs[i].Name == allDocs[j].Name {
				continue
			}
			file := fmt.Sprintf("notes/combined-%03d.md", n)
			add(file, allDocs[i].Category, all[i].header, all[i].text+"\n\n"+all[j].text, 0, 1, time.Duration(n*9)*24*time.Hour)
			n++
		}
	}
	// exact copies (near duplicates of the originals)
	for k := 0; k < 3 && k < len(all); k++ {
		add("archive/"+allDocs[k].Name, allDocs[k].Category, all[k].header, all[k].text, 0, 1, 900*24*time.Hour)
	}
	// The huge and big chunks are made of ROT13 text, which keeps the shape
	// of prose but matches no real query, plus their selecting term.
	var filler strings.Builder
	for _, d := range docs {
		filler.WriteString(rot13(d.Text))
		filler.WriteString("\n\n")
	}
	var huge strings.Builder
	huge.WriteString("Appendix " + HugeTerm + ".\n\n")
	for huge.Len() < 90000 {
		huge.WriteString(filler.String())
	}
	add("appendix/everything.md", "documentation", "Appendix", huge.String(), 0, 1, 10*24*time.Hour)
	for b := 0; b < 12; b++ {
		var big strings.Builder
		fmt.Fprintf(&big, "Big section %d about %s.\n\n", b, BigTerm)
		f := filler.String()
		off := (b * 997) % len(f)
		for big.Len() < 11000 {
			big.WriteString(f[off:])
			big.WriteString(f[:off])
		}
		add(fmt.Sprintf("big/section-%02d.md", b), "documentation", fmt.Sprintf("Big > Section %d", b), strings.ToValidUTF8(big.String()[:11000], ""), b, 12, time.Duration(b)*24*time.Hour)
	}
	return chunks
}

func rot13(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return 'a' + (r-'a'+13)%26
		case r >= 'A' && r <= 'Z':
			return 'A' + (r-'A'+13)%26
		}
		return r
	}, s)
}
