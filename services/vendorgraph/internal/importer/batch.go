package importer

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
)

// Batch collects the records of one import and every problem found.
type Batch struct {
	Entities      []Entity
	Relationships []Relationship
	// Lines counts lines received, blank ones included.
	Lines int64

	maxLines  int64
	problems  []Problem
	extra     int // problems beyond MaxProblems, counted only
	entityAt  map[UUID]int64
	relAt     map[UUID]int64
	typeNames map[string]string // interns type strings: a million rows share a few
	// refNames remembers the file id of each relationship end that named no
	// entity seen so far, for the dangling-reference message.
	refNames map[UUID]string
}

// NewBatch starts an import that accepts at most maxLines lines.
func NewBatch(maxLines int64) *Batch {
	return &Batch{
		maxLines:  maxLines,
		entityAt:  map[UUID]int64{},
		relAt:     map[UUID]int64{},
		typeNames: map[string]string{},
		refNames:  map[UUID]string{},
	}
}

// Problems returns the problems found, by line, and how many more were found
// but not kept.
func (b *Batch) Problems() ([]Problem, int) {
	sort.SliceStable(b.problems, func(i, j int) bool { return b.problems[i].Line < b.problems[j].Line })
	return b.problems, b.extra
}

// OK reports whether no problem has been found.
func (b *Batch) OK() bool { return len(b.problems) == 0 && b.extra == 0 }

// Over reports whether more lines than allowed arrived.
func (b *Batch) Over() bool { return b.Lines > b.maxLines }

func (b *Batch) fail(line int64, format string, args ...any) {
	if len(b.problems) >= MaxProblems {
		b.extra++
		return
	}
	b.problems = append(b.problems, Problem{Line: line, Message: fmt.Sprintf(format, args...)})
}

// Add parses and checks one line. lineNo is the 1-based line number; 0 means
// "the next line".
func (b *Batch) Add(lineNo int64, line string) {
	if lineNo <= 0 {
		lineNo = b.Lines + 1
	}
	if b.Lines >= b.maxLines {
		b.accept(parsed{line: lineNo, over: true})
		return
	}
	b.accept(parseLine(lineNo, line))
}

// accept adds a parsed line, in file order, and checks what spans lines:
// duplicate ids, and which references still need resolving.
func (b *Batch) accept(p parsed) {
	b.Lines++
	if p.over {
		if b.Lines == b.maxLines+1 {
			b.fail(p.line, "the import has more than %d lines: split the file", b.maxLines)
		}
		return
	}
	for _, pr := range p.problems {
		b.fail(pr.Line, "%s", pr.Message)
	}
	switch {
	case p.entity != nil:
		e := p.entity
		if first, dup := b.entityAt[e.ID]; dup {
			b.fail(p.line, "duplicate entity id %q (first on line %d)", p.fileID, first)
			return
		}
		b.entityAt[e.ID] = p.line
		e.Type = b.intern(e.Type)
		b.Entities = append(b.Entities, *e)
	case p.rel != nil:
		r := p.rel
		if first, dup := b.relAt[r.ID]; dup {
			b.fail(p.line, "duplicate relationship id %s (first on line %d)", quoteID(p.fileID), first)
			return
		}
		b.relAt[r.ID] = p.line
		if _, known := b.entityAt[r.Source]; !known {
			b.refNames[r.Source] = p.sourceRef
		}
		if _, known := b.entityAt[r.Target]; !known {
			b.refNames[r.Target] = p.targetRef
		}
		r.Type = b.intern(r.Type)
		b.Relationships = append(b.Relationships, *r)
	}
}

func (b *Batch) intern(s string) string {
	if v, ok := b.typeNames[s]; ok {
		return v
	}
	b.typeNames[s] = s
	return s
}

// chunkLines is how many lines a parse worker takes at a time.
const chunkLines = 512

type chunk struct {
	lines  []rawLine
	parsed []parsed
	done   chan struct{}
}

type rawLine struct {
	no   int64
	text string
	over bool
}

// Collect reads lines from next until it returns io.EOF, parsing them on
// workers goroutines while reading goes on, and accepts them in order. It
// stops reading after the first line past maxLines. An error other than
// io.EOF from next is returned with the partial batch.
func Collect(next func() (lineNo int64, line string, err error), maxLines int64, workers int) (*Batch, error) {
	b := NewBatch(maxLines)
	workers = max(workers, 1)
	work := make(chan *chunk, workers)
	order := make(chan *chunk, 2*workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range work {
				c.parsed = make([]parsed, len(c.lines))
				for i, l := range c.lines {
					if l.over {
						c.parsed[i] = parsed{line: l.no, over: true}
						continue
					}
					c.parsed[i] = parseLine(l.no, l.text)
				}
				close(c.done)
			}
		}()
	}
	merged := make(chan struct{})
	go func() {
		defer close(merged)
		for c := range order {
			<-c.done
			for _, p := range c.parsed {
				b.accept(p)
			}
		}
	}()

	newChunk := func() *chunk { return &chunk{lines: make([]rawLine, 0, chunkLines), done: make(chan struct{})} }
	cur := newChunk()
	flush := func() {
		if len(cur.lines) == 0 {
			return
		}
		order <- cur
		work <- cur
		cur = newChunk()
	}
	var seen int64
	var readErr error
	for {
		no, text, err := next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			readErr = err
			break
		}
		seen++
		if no <= 0 {
			no = seen
		}
		over := seen > maxLines
		cur.lines = append(cur.lines, rawLine{no: no, text: text, over: over})
		if over {
			break
		}
		if len(cur.lines) == chunkLines {
			flush()
		}
	}
	flush()
	close(work)
	close(order)
	<-merged
	wg.Wait()
	return b, readErr
}

func quoteID(s string) string {
	if len(s) > 0 && s[0] == '(' {
		return s
	}
	return fmt.Sprintf("%q", s)
}

// MissingReferences returns the entity ids relationships point at that no
// entity of this batch defines; they must already be in the graph.
func (b *Batch) MissingReferences() []UUID {
	seen := map[UUID]bool{}
	var out []UUID
	for i := range b.Relationships {
		r := &b.Relationships[i]
		for _, id := range [2]UUID{r.Source, r.Target} {
			if _, ok := b.entityAt[id]; !ok && !seen[id] {
				seen[id] = true
				out = append(out, id)
			}
		}
	}
	return out
}

// ReportDangling records a problem for every relationship end that is
// neither in this batch nor among existing (ids already in the graph).
func (b *Batch) ReportDangling(existing map[UUID]bool) {
	for i := range b.Relationships {
		r := &b.Relationships[i]
		for _, end := range [2]struct {
			field string
			id    UUID
		}{{"source_id", r.Source}, {"target_id", r.Target}} {
			if _, ok := b.entityAt[end.id]; ok || existing[end.id] {
				continue
			}
			b.fail(r.Line, "field %q: %q names no entity in this file or in the graph", end.field, b.refNames[end.id])
		}
	}
}
