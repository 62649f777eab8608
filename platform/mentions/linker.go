package mentions

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// LockKey is the advisory lock writers of chunks take shared and re-links
// take exclusive ("bmcis" 16).
const LockKey int64 = 0x626d636973_0010

// WordsVector is the words of chunk c's text as a tsvector, folded as the
// matcher folds them (letters and digits kept, everything else a break):
// for ranking a few chunks, not for filtering many (no index serves it).
const WordsVector = `to_tsvector('simple', regexp_replace(lower(c.text), '[^[:alnum:]]+', ' ', 'g'))`

// Querier is what the functions here read and write through: a pool, a
// connection or a transaction.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// LockShared takes LockKey shared for the rest of tx: a writer of chunks.
func LockShared(ctx context.Context, tx Querier) error {
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock_shared($1)", LockKey); err != nil {
		return fmt.Errorf("take mention lock: %w", err)
	}
	return nil
}

// LockExclusive takes LockKey exclusive for the rest of tx: a re-link.
func LockExclusive(ctx context.Context, tx Querier) error {
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", LockKey); err != nil {
		return fmt.Errorf("take mention lock: %w", err)
	}
	return nil
}

// GraphVersion reads the version of the graph's names.
func GraphVersion(ctx context.Context, q Querier) (int64, error) {
	var v int64
	if err := q.QueryRow(ctx, "SELECT graph_version FROM mention_state").Scan(&v); err != nil {
		return 0, fmt.Errorf("read graph version: %w", err)
	}
	return v, nil
}

// BumpGraphVersion moves the graph version on (inside the transaction that
// changed names) and returns the new one.
func BumpGraphVersion(ctx context.Context, q Querier) (int64, error) {
	var v int64
	if err := q.QueryRow(ctx, "UPDATE mention_state SET graph_version = nextval('mention_graph_version') RETURNING graph_version").Scan(&v); err != nil {
		return 0, fmt.Errorf("bump graph version: %w", err)
	}
	return v, nil
}

// LoadNames reads every entity name and alias.
func LoadNames(ctx context.Context, q Querier) ([]Name, error) {
	rows, err := q.Query(ctx, `
		SELECT id::text, name, is_vendor FROM entities
		UNION ALL
		SELECT a.entity_id::text, a.alias, true FROM vendor_aliases a`)
	if err != nil {
		return nil, fmt.Errorf("load entity names: %w", err)
	}
	names, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Name, error) {
		var n Name
		err := r.Scan(&n.EntityID, &n.Text, &n.IsVendor)
		return n, err
	})
	if err != nil {
		return nil, fmt.Errorf("load entity names: %w", err)
	}
	return names, nil
}

// Linker holds the matcher of the current graph, rebuilt when the graph
// version moves. Safe for concurrent use.
type Linker struct {
	mu      sync.Mutex
	m       *Matcher
	version int64
	built   bool
	checked time.Time // when the version was last read
}

// NewLinker returns a linker with no matcher yet.
func NewLinker() *Linker { return &Linker{} }

// Matcher returns a matcher for the graph as q sees it, and its version. A
// caller that must not race an import reads through a transaction holding
// LockKey.
func (l *Linker) Matcher(ctx context.Context, q Querier) (*Matcher, int64, error) {
	v, err := GraphVersion(ctx, q)
	if err != nil {
		return nil, 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.checked = time.Now()
	if l.built && l.version == v {
		return l.m, v, nil
	}
	names, err := LoadNames(ctx, q)
	if err != nil {
		return nil, 0, err
	}
	m, err := Build(names)
	if err != nil {
		return nil, 0, err
	}
	l.m, l.version, l.built = m, v, true
	return m, v, nil
}

// MatcherWithin is Matcher, but trusts a version read less than maxAge ago
// instead of reading it again: for a writer whose insert checks the
// version itself (a stale one costs a re-link, never a wrong link).
func (l *Linker) MatcherWithin(ctx context.Context, q Querier, maxAge time.Duration) (*Matcher, int64, error) {
	l.mu.Lock()
	if l.built && time.Since(l.checked) < maxAge {
		m, v := l.m, l.version
		l.mu.Unlock()
		return m, v, nil
	}
	l.mu.Unlock()
	return l.Matcher(ctx, q)
}

// Link is one (entity, chunk, count) row.
type Link struct {
	EntityID string
	ChunkID  int64
	Count    int
}

// ChunkText is a chunk to link.
type ChunkText struct {
	ID   int64
	Text string
}

// Links matches every chunk, in a stable order.
func (m *Matcher) Links(chunks []ChunkText) []Link {
	var out []Link
	for _, c := range chunks {
		found := m.Match(c.Text)
		ids := make([]string, 0, len(found))
		for id := range found {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			out = append(out, Link{EntityID: id, ChunkID: c.ID, Count: found[id]})
		}
	}
	return out
}

// InsertLinks writes links (the chunks must have none yet).
func InsertLinks(ctx context.Context, q Querier, links []Link) error {
	if len(links) == 0 {
		return nil
	}
	ents, chunks, counts := make([]string, len(links)), make([]int64, len(links)), make([]int32, len(links))
	for i, l := range links {
		ents[i], chunks[i], counts[i] = l.EntityID, l.ChunkID, int32(l.Count)
	}
	if _, err := q.Exec(ctx, `
		INSERT INTO entity_mentions (entity_id, chunk_id, mention_count)
		SELECT u.e::uuid, u.c, u.n FROM unnest($1::text[], $2::bigint[], $3::int[]) AS u(e, c, n)`,
		ents, chunks, counts); err != nil {
		return fmt.Errorf("insert mentions: %w", err)
	}
	return nil
}

// relinkBatch is how many chunks one read-match-write round handles.
const relinkBatch = 500

// RelinkChunks replaces the links of the chunks ids with what m finds in
// their text now. tx must hold LockKey.
func RelinkChunks(ctx context.Context, tx Querier, m *Matcher, ids []int64) error {
	for len(ids) > 0 {
		n := min(len(ids), relinkBatch)
		batch := ids[:n]
		ids = ids[n:]
		rows, err := tx.Query(ctx, "SELECT id, text FROM chunks WHERE id = ANY($1::bigint[])", batch)
		if err != nil {
			return fmt.Errorf("read chunks to link: %w", err)
		}
		chunks, err := pgx.CollectRows(rows, pgx.RowToStructByPos[ChunkText])
		if err != nil {
			return fmt.Errorf("read chunks to link: %w", err)
		}
		if _, err := tx.Exec(ctx, "DELETE FROM entity_mentions WHERE chunk_id = ANY($1::bigint[])", batch); err != nil {
			return fmt.Errorf("drop old mentions: %w", err)
		}
		if err := InsertLinks(ctx, tx, m.Links(chunks)); err != nil {
			return err
		}
	}
	return nil
}

// RelinkAll re-links every chunk: the path for an import that changed so
// many names that finding their chunks one name at a time costs more.
func RelinkAll(ctx context.Context, tx Querier, m *Matcher) (int, error) {
	if _, err := tx.Exec(ctx, "DELETE FROM entity_mentions"); err != nil {
		return 0, fmt.Errorf("drop mentions: %w", err)
	}
	var after int64
	total := 0
	for {
		rows, err := tx.Query(ctx, "SELECT id, text FROM chunks WHERE id > $1 ORDER BY id LIMIT $2", after, relinkBatch)
		if err != nil {
			return total, fmt.Errorf("read chunks to link: %w", err)
		}
		chunks, err := pgx.CollectRows(rows, pgx.RowToStructByPos[ChunkText])
		if err != nil {
			return total, fmt.Errorf("read chunks to link: %w", err)
		}
		if len(chunks) == 0 {
			return total, nil
		}
		if err := InsertLinks(ctx, tx, m.Links(chunks)); err != nil {
			return total, err
		}
		total += len(chunks)
		after = chunks[len(chunks)-1].ID
	}
}

// MaxIncremental is the most changed entities re-linked through the words
// index; an import changing more re-links every chunk (RelinkAll).
const MaxIncremental = 5000

// RelinkEntities re-links after the entities ids changed (created, renamed,
// aliases replaced): the chunks their names and aliases can appear in now,
// and the chunks they were linked to before, are matched again with m,
// which must know the new names. tx must hold LockKey exclusive. It returns
// how many chunks it re-linked.
//
// Candidates: the chunks a matcher of the changed names alone finds
// anything in, streamed through once; only they are re-linked (matched
// with the whole graph and rewritten). Neither a text index nor a filter
// in SQL serves here: a GIN index on the chunks' words made ingestion about
// 15 times slower, and ILIKE ANY over 100 names cost minutes at 100,000
// chunks (docs/BENCHMARKS.md, "Mentions").
func RelinkEntities(ctx context.Context, tx Querier, m *Matcher, ids []string) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	if len(ids) > MaxIncremental {
		return RelinkAll(ctx, tx, m)
	}
	rows, err := tx.Query(ctx, `
		SELECT id::text, name FROM entities WHERE id = ANY($1::uuid[])
		UNION SELECT entity_id::text, alias FROM vendor_aliases WHERE entity_id = ANY($1::uuid[])`, ids)
	if err != nil {
		return 0, fmt.Errorf("read changed names: %w", err)
	}
	changed, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Name, error) {
		var n Name
		err := r.Scan(&n.EntityID, &n.Text)
		return n, err
	})
	if err != nil {
		return 0, fmt.Errorf("read changed names: %w", err)
	}
	small, err := Build(changed)
	if err != nil {
		return 0, err
	}
	rows, err = tx.Query(ctx, "SELECT DISTINCT chunk_id FROM entity_mentions WHERE entity_id = ANY($1::uuid[])", ids)
	if err != nil {
		return 0, fmt.Errorf("read old mentions: %w", err)
	}
	old, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, fmt.Errorf("read old mentions: %w", err)
	}
	candidates := map[int64]bool{}
	for _, id := range old {
		candidates[id] = true
	}
	if small.ac != nil {
		var after int64
		for {
			rows, err := tx.Query(ctx, "SELECT id, text FROM chunks WHERE id > $1 ORDER BY id LIMIT $2", after, scanBatch)
			if err != nil {
				return 0, fmt.Errorf("scan chunks for changed names: %w", err)
			}
			chunks, err := pgx.CollectRows(rows, pgx.RowToStructByPos[ChunkText])
			if err != nil {
				return 0, fmt.Errorf("scan chunks for changed names: %w", err)
			}
			if len(chunks) == 0 {
				break
			}
			for _, c := range chunks {
				if len(small.Match(c.Text)) > 0 {
					candidates[c.ID] = true
				}
			}
			after = chunks[len(chunks)-1].ID
		}
	}
	list := make([]int64, 0, len(candidates))
	for id := range candidates {
		list = append(list, id)
	}
	slices.Sort(list)
	return len(list), RelinkChunks(ctx, tx, m, list)
}

// scanBatch is how many chunks one read of a candidate scan takes.
const scanBatch = 2000
