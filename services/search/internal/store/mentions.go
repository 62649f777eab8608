package store

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5"
)

// Mention is an entity a chunk or a query names.
type Mention struct {
	EntityID   string
	Name       string
	EntityType string
	IsVendor   bool
	Count      int
}

// ChunkMentions returns, per chunk, the entities it mentions: vendors
// first, then by count, then by name; at most perChunk each.
func (s *Store) ChunkMentions(ctx context.Context, chunkIDs []int64, perChunk int) (map[int64][]Mention, error) {
	out := map[int64][]Mention{}
	if len(chunkIDs) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `
		SELECT chunk_id, entity_id, name, entity_type, is_vendor, mention_count FROM (
			SELECT m.chunk_id, e.id::text AS entity_id, e.name, e.entity_type, e.is_vendor, m.mention_count,
			       row_number() OVER (PARTITION BY m.chunk_id ORDER BY e.is_vendor DESC, m.mention_count DESC, e.name, e.id) AS n
			FROM entity_mentions m JOIN entities e ON e.id = m.entity_id
			WHERE m.chunk_id = ANY($1::bigint[])) ranked
		WHERE n <= $2 ORDER BY chunk_id, n`, chunkIDs, perChunk)
	if err != nil {
		return nil, fmt.Errorf("read chunk mentions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var c int64
		var m Mention
		if err := rows.Scan(&c, &m.EntityID, &m.Name, &m.EntityType, &m.IsVendor, &m.Count); err != nil {
			return nil, fmt.Errorf("read chunk mentions: %w", err)
		}
		out[c] = append(out[c], m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read chunk mentions: %w", err)
	}
	return out, nil
}

// QueryVendors returns the vendors text names, most named first. The
// matcher is rebuilt first if the graph moved on (one row read when it did
// not; the server's refresher makes a rebuild here rare).
func (s *Store) QueryVendors(ctx context.Context, text string) ([]Mention, error) {
	m, _, err := s.linker.Matcher(ctx, s.pool)
	if err != nil {
		return nil, err
	}
	found := m.Match(text)
	if len(found) == 0 {
		return nil, nil
	}
	ids := slices.Sorted(maps.Keys(found))
	rows, err := s.pool.Query(ctx, `SELECT id::text, name, entity_type FROM entities
		WHERE id = ANY($1::uuid[]) AND is_vendor ORDER BY name`, ids)
	if err != nil {
		return nil, fmt.Errorf("read query vendors: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Mention, error) {
		v := Mention{IsVendor: true}
		err := r.Scan(&v.EntityID, &v.Name, &v.EntityType)
		v.Count = found[v.EntityID]
		return v, err
	})
	if err != nil {
		return nil, fmt.Errorf("read query vendors: %w", err)
	}
	slices.SortStableFunc(out, func(a, b Mention) int { return b.Count - a.Count })
	return out, nil
}

// RefreshMatcher rebuilds the name matcher if the graph moved on.
func (s *Store) RefreshMatcher(ctx context.Context) error {
	_, _, err := s.linker.Matcher(ctx, s.pool)
	return err
}
