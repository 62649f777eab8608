package mentions

import (
	"context"
	"encoding/json"
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

// GraphChannel is the PostgreSQL channel search notifies on commit when its
// names moved (SyncNames, after moving the graph version in the same
// transaction) or a write re-linked: search's replicas, which keep the
// version in memory, refresh on it. Search's own: vendorgraph's imports
// reach search over gRPC, not through this channel.
const GraphChannel = "bmcis_search_names_changed"

// GraphVersion reads the version of the graph's names.
func GraphVersion(ctx context.Context, q Querier) (int64, error) {
	var v int64
	if err := q.QueryRow(ctx, "SELECT graph_version FROM search.mention_state").Scan(&v); err != nil {
		return 0, fmt.Errorf("read graph version: %w", err)
	}
	return v, nil
}

// BumpGraphVersion moves the graph version on (inside the transaction that
// changed names) and returns the new one.
func BumpGraphVersion(ctx context.Context, q Querier) (int64, error) {
	var v int64
	if err := q.QueryRow(ctx, "UPDATE search.mention_state SET graph_version = nextval('search.mention_graph_version') RETURNING graph_version").Scan(&v); err != nil {
		return 0, fmt.Errorf("bump graph version: %w", err)
	}
	return v, nil
}

// LoadNames reads every entity name and alias of search's copy
// (search.entity_names, kept by StoreNames).
func LoadNames(ctx context.Context, q Querier) ([]Name, error) {
	rows, err := q.Query(ctx, `
		SELECT entity_id::text, name, is_vendor FROM search.entity_names
		UNION ALL
		SELECT n.entity_id::text, a.alias, true FROM search.entity_names n CROSS JOIN LATERAL unnest(n.aliases) AS a(alias)`)
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

// EntityName is an entity as search keeps it: what linking and naming
// vendors in results need, sent by the vendor graph
// (SearchService.SyncEntityNames).
type EntityName struct {
	EntityID   string
	Name       string
	EntityType string
	IsVendor   bool
	Aliases    []string
}

// StoreNames writes names into search's copy (search.entity_names), each
// replacing what was held for its entity, aliases included, and returns
// the ids stored. tx must hold LockKey exclusive: a re-link follows.
func StoreNames(ctx context.Context, tx Querier, names []EntityName) ([]string, error) {
	if len(names) == 0 {
		return nil, nil
	}
	ids, texts, types, vendors, aliases := make([]string, len(names)), make([]string, len(names)),
		make([]string, len(names)), make([]bool, len(names)), make([]string, len(names))
	for i, n := range names {
		ids[i], texts[i], types[i], vendors[i] = n.EntityID, n.Name, n.EntityType, n.IsVendor
		// A text[] per row cannot go through unnest of a 2-D array of
		// ragged rows: each row's aliases travel as one JSON array.
		a, err := json.Marshal(nonNil(n.Aliases))
		if err != nil {
			return nil, fmt.Errorf("store entity names: %w", err)
		}
		aliases[i] = string(a)
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO search.entity_names AS n (entity_id, name, entity_type, is_vendor, aliases)
		SELECT u.id::uuid, u.name, u.type, u.vendor, ARRAY(SELECT jsonb_array_elements_text(u.aliases::jsonb))
		FROM unnest($1::text[], $2::text[], $3::text[], $4::bool[], $5::text[]) AS u(id, name, type, vendor, aliases)
		ON CONFLICT (entity_id) DO UPDATE SET name = EXCLUDED.name, entity_type = EXCLUDED.entity_type,
			is_vendor = EXCLUDED.is_vendor, aliases = EXCLUDED.aliases`,
		ids, texts, types, vendors, aliases); err != nil {
		return nil, fmt.Errorf("store entity names: %w", err)
	}
	return ids, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
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

// Current returns the matcher built last and its version, without reading
// the database; ok is false until a matcher was built. For readers that
// follow the graph through GraphChannel and a periodic Matcher call.
func (l *Linker) Current() (m *Matcher, version int64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m, l.version, l.built
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
		INSERT INTO search.entity_mentions (entity_id, chunk_id, mention_count)
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
	_, err := relinkChunks(ctx, tx, m, ids, nil)
	return err
}

// relinkChunks is RelinkChunks for the chunks keep accepts (all when keep
// is nil); it returns how many it re-linked.
func relinkChunks(ctx context.Context, tx Querier, m *Matcher, ids []int64, keep func(ChunkText) bool) (int, error) {
	total := 0
	for len(ids) > 0 {
		n := min(len(ids), relinkBatch)
		batch := ids[:n]
		ids = ids[n:]
		rows, err := tx.Query(ctx, "SELECT id, text FROM search.chunks WHERE id = ANY($1::bigint[])", batch)
		if err != nil {
			return total, fmt.Errorf("read chunks to link: %w", err)
		}
		chunks, err := pgx.CollectRows(rows, pgx.RowToStructByPos[ChunkText])
		if err != nil {
			return total, fmt.Errorf("read chunks to link: %w", err)
		}
		if keep != nil {
			chunks = slices.DeleteFunc(chunks, func(c ChunkText) bool { return !keep(c) })
		}
		kept := make([]int64, len(chunks))
		for i, c := range chunks {
			kept[i] = c.ID
		}
		if _, err := tx.Exec(ctx, "DELETE FROM search.entity_mentions WHERE chunk_id = ANY($1::bigint[])", kept); err != nil {
			return total, fmt.Errorf("drop old mentions: %w", err)
		}
		if err := InsertLinks(ctx, tx, m.Links(chunks)); err != nil {
			return total, err
		}
		total += len(chunks)
	}
	return total, nil
}

// RelinkAll re-links every chunk: the path for an import that changed so
// many names that finding their chunks one name at a time costs more.
func RelinkAll(ctx context.Context, tx Querier, m *Matcher) (int, error) {
	if _, err := tx.Exec(ctx, "DELETE FROM search.entity_mentions"); err != nil {
		return 0, fmt.Errorf("drop mentions: %w", err)
	}
	var after int64
	total := 0
	for {
		chunks, err := chunksAfter(ctx, tx, after, relinkBatch)
		if err != nil {
			return total, err
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

// RelinkStats says what RelinkEntities did.
type RelinkStats struct {
	Indexed  int // chunks new since the last re-link whose words it indexed
	Read     int // candidate chunks whose text it read
	Relinked int // of those, the chunks it matched again and rewrote
}

// RelinkEntities re-links after the entities ids changed (created, renamed,
// aliases replaced): the chunks their names and aliases can appear in now,
// and the chunks they were linked to before, are matched again with m,
// which must know the new names. tx must hold LockKey exclusive.
//
// Candidates come from the words index (chunk_terms, GIN): a chunk can
// hold a name only if it holds every word of it, so the look-up is
// `terms @> the name's words`, one per changed name. First the chunks
// written since the last re-link are added to the index (IndexNewChunks);
// apart from them, only candidates' text is read. The matcher then decides
// on each candidate as it does on a write, so normalization, word
// boundaries, leftmost-longest and the ambiguous-name rule are exactly the
// matcher's.
func RelinkEntities(ctx context.Context, tx Querier, m *Matcher, ids []string) (RelinkStats, error) {
	var st RelinkStats
	if len(ids) == 0 {
		return st, nil
	}
	if len(ids) > MaxIncremental {
		n, err := RelinkAll(ctx, tx, m)
		st.Read, st.Relinked = n, n
		return st, err
	}
	var err error
	if st.Indexed, err = IndexNewChunks(ctx, tx); err != nil {
		return st, err
	}
	rows, err := tx.Query(ctx, `
		SELECT entity_id::text, name FROM search.entity_names WHERE entity_id = ANY($1::uuid[])
		UNION SELECT n.entity_id::text, a.alias FROM search.entity_names n CROSS JOIN LATERAL unnest(n.aliases) AS a(alias)
		WHERE n.entity_id = ANY($1::uuid[])`, ids)
	if err != nil {
		return st, fmt.Errorf("read changed names: %w", err)
	}
	changed, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Name, error) {
		var n Name
		err := r.Scan(&n.EntityID, &n.Text)
		return n, err
	})
	if err != nil {
		return st, fmt.Errorf("read changed names: %w", err)
	}
	small, err := Build(changed)
	if err != nil {
		return st, err
	}
	rows, err = tx.Query(ctx, "SELECT DISTINCT chunk_id FROM search.entity_mentions WHERE entity_id = ANY($1::uuid[])", ids)
	if err != nil {
		return st, fmt.Errorf("read old mentions: %w", err)
	}
	oldList, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return st, fmt.Errorf("read old mentions: %w", err)
	}
	var looked []string
	for _, n := range changed {
		if words := Words(n.Text); len(words) > 0 && !neverLinks(words, n.Text) {
			looked = append(looked, n.Text)
		}
	}
	flat, lo, hi := FlatTerms(looked)
	rows, err = tx.Query(ctx, `
		SELECT DISTINCT c.id FROM unnest($2::int[], $3::int[]) AS n(lo, hi)
		CROSS JOIN LATERAL (SELECT chunk_id AS id FROM search.chunk_terms WHERE terms @> ($1::int[])[n.lo:n.hi]) AS c`,
		flat, lo, hi)
	if err != nil {
		return st, fmt.Errorf("find candidate chunks: %w", err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return st, fmt.Errorf("find candidate chunks: %w", err)
	}
	// A candidate is re-linked if it was linked to a changed entity, or if
	// a matcher of the changed names alone finds one in it (the words may
	// be there apart); the whole graph's matcher then rewrites its links.
	old := make(map[int64]bool, len(oldList))
	for _, id := range oldList {
		old[id] = true
	}
	list := slices.Concat(oldList, found)
	slices.Sort(list)
	list = slices.Compact(list)
	st.Read = len(list)
	st.Relinked, err = relinkChunks(ctx, tx, m, list, func(c ChunkText) bool {
		return old[c.ID] || len(small.Match(c.Text)) > 0
	})
	return st, err
}

// neverLinks reports whether a name of these words links nothing whatever
// the text (an all-lowercase ambiguous name; see Build): no look-up for it.
func neverLinks(words []string, name string) bool {
	return Ambiguous(words) && !hasUpper(alnum(name))
}

// IndexNewChunks adds to chunk_terms the words of the chunks written
// since it last ran (ids above mention_state.terms_through), in batches,
// and returns how many: each chunk's text is read once for the index,
// never again for a look-up. tx must hold LockKey exclusive, so no writer
// holds an id it has not committed, and read committed (the default), so
// its reads see every chunk committed before the lock was taken.
func IndexNewChunks(ctx context.Context, tx Querier) (int, error) {
	var after int64
	if err := tx.QueryRow(ctx, "SELECT terms_through FROM search.mention_state").Scan(&after); err != nil {
		return 0, fmt.Errorf("read words index state: %w", err)
	}
	total := 0
	for {
		chunks, err := chunksAfter(ctx, tx, after, scanBatch)
		if err != nil {
			return total, err
		}
		if len(chunks) == 0 {
			return total, nil
		}
		ids, texts := make([]int64, len(chunks)), make([]string, len(chunks))
		for i, c := range chunks {
			ids[i], texts[i] = c.ID, c.Text
		}
		after = ids[len(ids)-1]
		flat, lo, hi := FlatTerms(texts)
		if _, err := tx.Exec(ctx, `
			WITH ins AS (
			    INSERT INTO search.chunk_terms (chunk_id, terms)
			    SELECT u.id, ($2::int[])[u.lo:u.hi] FROM unnest($1::bigint[], $3::int[], $4::int[]) AS u(id, lo, hi)
			    ON CONFLICT (chunk_id) DO NOTHING)
			UPDATE search.mention_state SET terms_through = $5`,
			ids, flat, lo, hi, after); err != nil {
			return total, fmt.Errorf("index chunk words: %w", err)
		}
		total += len(chunks)
	}
}

// chunksAfter reads up to limit chunks with ids above after, in id order.
func chunksAfter(ctx context.Context, tx Querier, after int64, limit int) ([]ChunkText, error) {
	rows, err := tx.Query(ctx, "SELECT id, text FROM search.chunks WHERE id > $1 ORDER BY id LIMIT $2", after, limit)
	if err != nil {
		return nil, fmt.Errorf("read chunks after %d: %w", after, err)
	}
	chunks, err := pgx.CollectRows(rows, pgx.RowToStructByPos[ChunkText])
	if err != nil {
		return nil, fmt.Errorf("read chunks after %d: %w", after, err)
	}
	return chunks, nil
}

// scanBatch is how many chunks one round of IndexNewChunks takes.
const scanBatch = 2000

// SyncNames takes names the vendor graph created or changed, inside tx:
// it takes LockKey exclusive, so no chunk is written meanwhile, stores the
// names (StoreNames), moves the graph version on, so every matcher built
// from the old names is rebuilt, and re-links only the chunks those names
// can appear in (RelinkEntities) with linker's matcher of the new graph.
// It returns what the re-link did and the new graph version.
func SyncNames(ctx context.Context, tx Querier, linker *Linker, names []EntityName) (RelinkStats, int64, error) {
	var st RelinkStats
	if err := LockExclusive(ctx, tx); err != nil {
		return st, 0, err
	}
	ids, err := StoreNames(ctx, tx, names)
	if err != nil {
		return st, 0, err
	}
	v, err := BumpGraphVersion(ctx, tx)
	if err != nil {
		return st, 0, err
	}
	m, _, err := linker.Matcher(ctx, tx)
	if err != nil {
		return st, 0, err
	}
	st, err = RelinkEntities(ctx, tx, m, ids)
	if err != nil {
		return st, 0, fmt.Errorf("re-link mentions: %w", err)
	}
	return st, v, nil
}
