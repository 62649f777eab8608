package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/bmcis/knowledge/platform/mentions"
)

// EvidenceChunk is a chunk that mentions an entity.
type EvidenceChunk struct {
	ChunkID      int64
	DocumentID   string
	SourceFile   string
	MentionCount int
	Snippet      string
	Score        float64
}

// EvidenceDocument is a document that mentions an entity.
type EvidenceDocument struct {
	DocumentID   string
	SourceFile   string
	Title        string
	MentionCount int
	ChunkCount   int
}

// Evidence is what the documents say about an entity.
type Evidence struct {
	Chunks     []EvidenceChunk
	Documents  []EvidenceDocument
	ChunkCount int // chunks mentioning the entity in all
}

// evidencePool is how many of the most-mentioning chunks are ranked by
// relevance: ranking reads each one's text.
const evidencePool = 200

// SnippetChars bounds an evidence snippet.
const SnippetChars = 240

// Evidence returns the chunks and documents that mention entity id, best
// first, at most limit of each, from documents of the given categories
// only (none: every category; the read scope of vendorgraph's caller). A
// chunk's score is its mention count × (1 + ts_rank_cd of the chunk's
// words against the entity's name as a phrase): counts lead, and among
// equal counts the chunk where the name stands densest and whole wins. An
// entity search holds no names of has no evidence.
//
// access, when not nil, is the caller's access set: only chunks of
// documents it may read count.
func (s *Store) Evidence(ctx context.Context, id string, limit int, categories, access []string) (Evidence, error) {
	var ev Evidence
	if len(categories) == 0 {
		categories = nil // NULL: every category
	}
	var name string
	var aliases []string
	err := s.pool.QueryRow(ctx, "SELECT name, aliases FROM entity_names WHERE entity_id = $1", id).Scan(&name, &aliases)
	if errors.Is(err, pgx.ErrNoRows) {
		return ev, nil
	}
	if err != nil {
		return ev, fmt.Errorf("read entity name: %w", err)
	}
	b := &pgx.Batch{}
	b.Queue(`SELECT count(*) FROM entity_mentions m JOIN chunks c ON c.id = m.chunk_id
		WHERE m.entity_id = $1 AND ($2::text[] IS NULL OR c.category = ANY($2)) AND `+AccessAllows("c.access", "$3"), id, categories, access)
	b.Queue(`
		WITH linked AS (
			SELECT m.chunk_id, m.mention_count FROM entity_mentions m JOIN chunks c ON c.id = m.chunk_id
			WHERE m.entity_id = $1 AND ($5::text[] IS NULL OR c.category = ANY($5)) AND `+AccessAllows("c.access", "$6")+`
			ORDER BY m.mention_count DESC, m.chunk_id LIMIT $4)
		SELECT c.id, d.external_id, d.source_file, l.mention_count, c.text,
		       l.mention_count * (1 + ts_rank_cd(`+mentions.WordsVector+`, phraseto_tsquery('simple', $2))) AS score
		FROM linked l JOIN chunks c ON c.id = l.chunk_id JOIN documents d ON d.id = c.document_id
		ORDER BY score DESC, c.id LIMIT $3`, id, mentions.Normalize(name), limit, evidencePool, categories, access)
	b.Queue(`
		SELECT d.external_id, d.source_file, d.title, sum(m.mention_count)::int, count(*)::int
		FROM entity_mentions m JOIN chunks c ON c.id = m.chunk_id JOIN documents d ON d.id = c.document_id
		WHERE m.entity_id = $1 AND ($3::text[] IS NULL OR c.category = ANY($3)) AND `+AccessAllows("c.access", "$4")+`
		GROUP BY d.id ORDER BY 4 DESC, 5 DESC, d.external_id LIMIT $2`, id, limit, categories, access)
	br := s.pool.SendBatch(ctx, b)
	defer func() { _ = br.Close() }()
	if err := br.QueryRow().Scan(&ev.ChunkCount); err != nil {
		return ev, fmt.Errorf("count evidence: %w", err)
	}
	rows, err := br.Query()
	if err != nil {
		return ev, fmt.Errorf("rank evidence chunks: %w", err)
	}
	names := append([]string{name}, aliases...)
	ev.Chunks, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (EvidenceChunk, error) {
		var c EvidenceChunk
		var text string
		var score float32
		err := r.Scan(&c.ChunkID, &c.DocumentID, &c.SourceFile, &c.MentionCount, &text, &score)
		c.Score = shortestFloat(score)
		c.Snippet = SnippetAround(text, names, SnippetChars)
		return c, err
	})
	if err != nil {
		return ev, fmt.Errorf("rank evidence chunks: %w", err)
	}
	rows, err = br.Query()
	if err != nil {
		return ev, fmt.Errorf("rank evidence documents: %w", err)
	}
	ev.Documents, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (EvidenceDocument, error) {
		var d EvidenceDocument
		err := r.Scan(&d.DocumentID, &d.SourceFile, &d.Title, &d.MentionCount, &d.ChunkCount)
		return d, err
	})
	if err != nil {
		return ev, fmt.Errorf("rank evidence documents: %w", err)
	}
	return ev, nil
}

// shortestFloat widens a real (float4) score to the float64 that prints as
// the real did (0.3, not 0.30000001192092896).
func shortestFloat(f float32) float64 {
	v, err := strconv.ParseFloat(strconv.FormatFloat(float64(f), 'g', -1, 32), 64)
	if err != nil {
		return float64(f)
	}
	return v
}

// SnippetAround returns at most max characters of text around the first
// place one of names appears (case ignored; the start when none does),
// white space collapsed, cut at word boundaries, with "..." where cut.
func SnippetAround(text string, names []string, max int) string {
	text = strings.Join(strings.Fields(text), " ")
	runes := []rune(text)
	if len(runes) <= max {
		return text
	}
	lower := []rune(strings.ToLower(text))
	at := -1
	for _, n := range names {
		n = strings.ToLower(strings.Join(strings.Fields(n), " "))
		if i := indexRunes(lower, []rune(n)); i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	start := 0
	if at > max/4 {
		start = at - max/4
	}
	end := min(len(runes), start+max)
	if end == len(runes) {
		start = max0(end - max)
	}
	// Back off to word boundaries.
	for start > 0 && start < end && runes[start-1] != ' ' {
		start++
	}
	for end < len(runes) && end > start && runes[end] != ' ' {
		end--
	}
	out := strings.TrimSpace(string(runes[start:end]))
	if start > 0 {
		out = "..." + out
	}
	if end < len(runes) {
		out += "..."
	}
	if utf8.RuneCountInString(out) == 0 {
		return string(runes[:max])
	}
	return out
}

func max0(i int) int { return max(i, 0) }

func indexRunes(s, sub []rune) int {
	if len(sub) == 0 {
		return -1
	}
	for i := 0; i+len(sub) <= len(s); i++ {
		match := true
		for j := range sub {
			if s[i+j] != sub[j] {
				match = false
				break
			}
		}
		if match {
			return i
		}
	}
	return -1
}
