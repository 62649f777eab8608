package store

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/bmcis/knowledge/platform/mentions"
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
// first, then by count, then by name; at most perChunk each. Answers are
// kept per graph version (a chunk's links change only with the graph: a
// chunk id is never reused and is linked as it commits, or re-linked just
// after when the graph moved meanwhile, which notifies like an import), so
// a repeated page costs no database call.
func (s *Store) ChunkMentions(ctx context.Context, chunkIDs []int64, perChunk int) (map[int64][]Mention, error) {
	s.reads.ChunkMentions.Add(1)
	out := map[int64][]Mention{}
	if len(chunkIDs) == 0 {
		return out, nil
	}
	_, v, known := s.linker.Current()
	missing := chunkIDs
	if known {
		missing = s.mentions.chunks(v, perChunk, chunkIDs, out)
		if len(missing) == 0 {
			return out, nil
		}
	}
	read, err := s.readChunkMentions(ctx, missing, perChunk)
	if err != nil {
		return nil, err
	}
	for _, id := range missing {
		out[id] = read[id]
	}
	if known {
		s.mentions.putChunks(v, perChunk, missing, read)
	}
	return out, nil
}

func (s *Store) readChunkMentions(ctx context.Context, chunkIDs []int64, perChunk int) (map[int64][]Mention, error) {
	out := map[int64][]Mention{}
	rows, err := s.pool.Query(ctx, `
		SELECT chunk_id, entity_id, name, entity_type, is_vendor, mention_count FROM (
			SELECT m.chunk_id, e.entity_id::text AS entity_id, e.name, e.entity_type, e.is_vendor, m.mention_count,
			       row_number() OVER (PARTITION BY m.chunk_id ORDER BY e.is_vendor DESC, m.mention_count DESC, e.name, e.entity_id) AS n
			FROM entity_mentions m JOIN entity_names e ON e.entity_id = m.entity_id
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

// QueryVendors returns the vendors text names, most named first. It uses
// the matcher in memory, which the server's refresher keeps in step with
// the graph (GraphChanged, and a periodic version check); only before the
// first build does it read the graph.
func (s *Store) QueryVendors(ctx context.Context, text string) ([]Mention, error) {
	s.reads.QueryVendors.Add(1)
	m, v, ok := s.linker.Current()
	if !ok {
		var err error
		if m, v, err = s.linker.Matcher(ctx, s.pool); err != nil {
			return nil, err
		}
	}
	found := m.Match(text)
	if len(found) == 0 {
		return nil, nil
	}
	ids := slices.Sorted(maps.Keys(found))
	vendors, missing := s.mentions.vendors(v, ids)
	if len(missing) > 0 {
		rows, err := s.pool.Query(ctx, `SELECT entity_id::text, name, entity_type FROM entity_names
			WHERE entity_id = ANY($1::uuid[]) AND is_vendor`, missing)
		if err != nil {
			return nil, fmt.Errorf("read query vendors: %w", err)
		}
		read, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Mention, error) {
			v := Mention{IsVendor: true}
			err := r.Scan(&v.EntityID, &v.Name, &v.EntityType)
			return v, err
		})
		if err != nil {
			return nil, fmt.Errorf("read query vendors: %w", err)
		}
		s.mentions.putVendors(v, missing, read)
		vendors = append(vendors, read...)
	}
	out := make([]Mention, len(vendors))
	for i, vd := range vendors {
		vd.Count = found[vd.EntityID]
		out[i] = vd
	}
	slices.SortFunc(out, func(a, b Mention) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}

// GraphChanged delivers a signal when the graph may have changed: a
// notification on mentions.GraphChannel, or the listener's (re)connection
// (notifications may have been missed). The matcher's refresher waits on it.
func (s *Store) GraphChanged() <-chan struct{} { return s.graphKick }

func (s *Store) kickGraph() {
	select {
	case s.graphKick <- struct{}{}:
	default:
	}
}

// RefreshMatcher rebuilds the name matcher if the graph moved on.
func (s *Store) RefreshMatcher(ctx context.Context) error {
	_, _, err := s.linker.Matcher(ctx, s.pool)
	return err
}

// SyncEntityNames stores names the vendor graph created or changed in
// search's own copy and re-links the chunks they can appear in, in one
// transaction (mentions.SyncNames); on commit, every replica rebuilds its
// matcher (GraphChannel).
func (s *Store) SyncEntityNames(ctx context.Context, names []mentions.EntityName) (mentions.RelinkStats, int64, error) {
	var st mentions.RelinkStats
	var version int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if st, version, err = mentions.SyncNames(ctx, tx, s.linker, names); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "SELECT pg_notify($1, 'names')", mentions.GraphChannel); err != nil {
			return fmt.Errorf("notify graph change: %w", err)
		}
		return nil
	})
	if err != nil {
		return st, 0, fmt.Errorf("sync entity names: %w", err)
	}
	return st, version, nil
}
