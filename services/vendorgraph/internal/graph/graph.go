// Package graph reads the vendor graph: name resolution, "did you mean"
// candidates, a vendor's neighbourhood ranked by relevance, and counts.
package graph

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// UUID is a 16-byte id as stored.
type UUID = [16]byte

// HopDecay scales the strength of an entity reached in two hops.
const HopDecay = 0.5

// MaxNeighbourhood bounds the entities a depth-2 neighbourhood may hold; past
// it the call fails instead of loading a large part of the graph.
const MaxNeighbourhood = 20000

// ErrTooLarge means a depth-2 neighbourhood exceeds MaxNeighbourhood.
var ErrTooLarge = errors.New("neighbourhood too large")

// querier is what a read needs of a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Store runs the graph's read queries.
type Store struct {
	pool *pgxpool.Pool
}

// New returns a store over pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Vendor is a vendor entity as resolved by name.
type Vendor struct {
	ID        UUID
	Name      string
	Aliases   []string
	UpdatedAt time.Time
}

// ResolveExact returns the vendors whose normalized name or alias equals
// norm, by name; at most limit of them.
func (s *Store) ResolveExact(ctx context.Context, norm string, limit int) ([]Vendor, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT m.id, m.name, m.updated_at,
		       ARRAY(SELECT a.alias FROM vendor_aliases a WHERE a.entity_id = m.id ORDER BY a.alias)
		FROM (
			SELECT id, name, updated_at FROM entities WHERE normalized_name = $1 AND is_vendor
			UNION
			SELECT e.id, e.name, e.updated_at
			FROM vendor_aliases a JOIN entities e ON e.id = a.entity_id
			WHERE a.normalized_alias = $1 AND e.is_vendor
		) m
		ORDER BY m.name, m.id
		LIMIT $2`, norm, limit)
	if err != nil {
		return nil, fmt.Errorf("resolve vendor name: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Vendor, error) {
		var v Vendor
		err := r.Scan(&v.ID, &v.Name, &v.UpdatedAt, &v.Aliases)
		return v, err
	})
	if err != nil {
		return nil, fmt.Errorf("resolve vendor name: %w", err)
	}
	return out, nil
}

// Candidate is a vendor whose name or alias is close to a query.
type Candidate struct {
	ID   UUID
	Name string
	// Score is the best pg_trgm similarity between the query and the
	// vendor's normalized name or aliases, 0..1.
	Score float64
	// Prefix is true when the query starts the name or an alias.
	Prefix bool
}

// Candidates returns vendors whose normalized name or an alias starts with
// norm, or whose trigram similarity to norm is at least threshold; prefix
// matches first, then by score. threshold must be at least pg_trgm's
// similarity_threshold (0.3 by default): the % operator that lets the GIN
// indexes answer filters at that level first.
func (s *Store) Candidates(ctx context.Context, norm string, threshold float64, limit int) ([]Candidate, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT e.id, e.name, max(similarity(m.n, $1)) AS score, bool_or(m.n LIKE $2) AS prefix
		FROM (
			SELECT id, normalized_name AS n FROM entities
			WHERE is_vendor AND (normalized_name % $1 OR normalized_name LIKE $2)
			UNION ALL
			SELECT entity_id, normalized_alias FROM vendor_aliases
			WHERE normalized_alias % $1 OR normalized_alias LIKE $2
		) m JOIN entities e ON e.id = m.id AND e.is_vendor
		WHERE m.n LIKE $2 OR similarity(m.n, $1) >= $3
		GROUP BY e.id, e.name
		ORDER BY prefix DESC, score DESC, e.name, e.id
		LIMIT $4`, norm, norm+"%", threshold, limit)
	if err != nil {
		return nil, fmt.Errorf("find close vendor names: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Candidate, error) {
		var c Candidate
		var score float32
		err := r.Scan(&c.ID, &c.Name, &score, &c.Prefix)
		c.Score = Float(score)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("find close vendor names: %w", err)
	}
	return out, nil
}

// Node is an entity of a neighbourhood, without its bulky fields.
type Node struct {
	ID         UUID
	Name       string
	Type       string
	Confidence float64
	IsVendor   bool
	UpdatedAt  time.Time
	// Strength is how strongly the entity is tied to the vendor, 0..1.
	Strength float64
	// Relevance is Confidence × Strength.
	Relevance float64
	// Snippet and Attributes (raw JSON) ride along: a neighbourhood's
	// entities are mostly returned anyway, and this saves a round trip.
	Snippet    *string
	Attributes []byte
}

// Edge is a relationship of a neighbourhood, without its metadata.
type Edge struct {
	ID         UUID
	Source     UUID
	Target     UUID
	Type       string
	Confidence float64
	UpdatedAt  time.Time
	// Score orders relationships: Confidence × the lower relevance of its
	// two ends (the vendor counts 1).
	Score float64
	// Metadata is the raw JSON object.
	Metadata []byte
}

// Neighbourhood is a vendor's graph: every entity within depth hops, ranked,
// and every relationship among them and the vendor, ranked.
type Neighbourhood struct {
	Nodes       []Node
	Edges       []Edge
	EntityTypes map[string]int32
	EdgeTypes   map[string]int32
	LastUpdated time.Time
}

// Neighbourhood loads the vendor's neighbourhood at depth 1 or 2.
//
// Strength of an entity e one hop away is the noisy-OR of the confidences of
// the relationships between the vendor and e: 1 − Π(1 − c). Two hops away,
// it is HopDecay × max over intermediates m of strength(m) × noisy-OR of the
// relationships between m and e. Relevance is e.confidence × strength.
func (s *Store) Neighbourhood(ctx context.Context, v Vendor, depth int) (*Neighbourhood, error) {
	var strength map[UUID]float64
	var entitiesSQL, edgesSQL string
	var arg any
	// Every read of one neighbourhood sees one snapshot, so an import that
	// commits meanwhile never splits it (entities without their edges).
	var q querier = s.pool
	if depth >= 2 {
		tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
		if err != nil {
			return nil, fmt.Errorf("begin neighbourhood read: %w", err)
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		q = tx
		// Two hops need the first hop's strengths to find the second.
		if strength, err = directStrength(ctx, q, v.ID); err != nil {
			return nil, err
		}
		if err := addSecondHop(ctx, q, v.ID, strength); err != nil {
			return nil, err
		}
		ids := make([]UUID, 0, len(strength)+1)
		ids = append(ids, v.ID)
		for id := range strength {
			ids = append(ids, id)
		}
		arg = ids
		entitiesSQL = `WITH members AS (SELECT unnest($1::uuid[]) AS id) ` + entitiesOf
		edgesSQL = `WITH members AS (SELECT unnest($1::uuid[]) AS id) ` + edgesAmong
	} else {
		// One hop: the members come from the vendor's relationships in the
		// same statements, one round trip for both.
		arg = v.ID
		entitiesSQL = oneHop + entitiesOf
		edgesSQL = oneHop + edgesAmong
	}

	n := &Neighbourhood{EntityTypes: map[string]int32{}, EdgeTypes: map[string]int32{}, LastUpdated: v.UpdatedAt}
	batch := &pgx.Batch{}
	if depth < 2 {
		// One round trip still: the transaction travels in the batch.
		batch.Queue("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
	}
	batch.Queue(entitiesSQL, arg).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var nd Node
			var conf float32
			if err := rows.Scan(&nd.ID, &nd.Name, &nd.Type, &conf, &nd.IsVendor, &nd.UpdatedAt, &nd.Snippet, &nd.Attributes); err != nil {
				return err
			}
			if nd.UpdatedAt.After(n.LastUpdated) {
				n.LastUpdated = nd.UpdatedAt
			}
			if nd.ID == v.ID {
				continue
			}
			nd.Confidence = Float(conf)
			n.Nodes = append(n.Nodes, nd)
			n.EntityTypes[nd.Type]++
		}
		return rows.Err()
	})
	batch.Queue(edgesSQL, arg).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var e Edge
			var conf float32
			if err := rows.Scan(&e.ID, &e.Source, &e.Target, &e.Type, &conf, &e.UpdatedAt, &e.Metadata); err != nil {
				return err
			}
			e.Confidence = Float(conf)
			if e.UpdatedAt.After(n.LastUpdated) {
				n.LastUpdated = e.UpdatedAt
			}
			n.Edges = append(n.Edges, e)
			n.EdgeTypes[e.Type]++
		}
		return rows.Err()
	})
	if depth < 2 {
		batch.Queue("COMMIT")
	}
	if err := q.SendBatch(ctx, batch).Close(); err != nil {
		return nil, fmt.Errorf("load neighbourhood: %w", err)
	}
	if strength == nil {
		strength = strengthFromEdges(v.ID, n.Edges)
	}
	for i := range n.Nodes {
		nd := &n.Nodes[i]
		nd.Strength = strength[nd.ID]
		nd.Relevance = nd.Confidence * nd.Strength
	}
	rank(n, v.ID)
	return n, nil
}

// oneHop defines members: the vendor ($1) and every entity it has a
// relationship with.
const oneHop = `WITH members AS (
	SELECT $1::uuid AS id
	UNION SELECT target_id FROM relationships WHERE source_id = $1
	UNION SELECT source_id FROM relationships WHERE target_id = $1) `

// entitiesOf reads the members, bulky fields included: most are returned.
const entitiesOf = `SELECT e.id, e.name, e.entity_type, e.confidence, e.is_vendor, e.updated_at, e.snippet, e.attributes
	FROM entities e WHERE e.id = ANY(ARRAY(SELECT id FROM members))`

// edgesAmong reads every relationship whose two ends are members: one
// bitmap scan of the source index for all members at once (a join would
// probe the index once per member), then a hashed semi-join on the target.
const edgesAmong = `SELECT r.id, r.source_id, r.target_id, r.relationship_type, r.confidence, r.updated_at, r.metadata
	FROM relationships r
	WHERE r.source_id = ANY(ARRAY(SELECT id FROM members))
	  AND EXISTS (SELECT 1 FROM members t WHERE t.id = r.target_id)`

// strengthFromEdges is the one-hop strength (see Neighbourhood) from the
// relationships that touch the vendor.
func strengthFromEdges(vendor UUID, edges []Edge) map[UUID]float64 {
	miss := map[UUID]float64{}
	for _, e := range edges {
		var other UUID
		switch vendor {
		case e.Source:
			other = e.Target
		case e.Target:
			other = e.Source
		default:
			continue
		}
		m, ok := miss[other]
		if !ok {
			m = 1
		}
		miss[other] = m * (1 - e.Confidence)
	}
	strength := make(map[UUID]float64, len(miss))
	for id, m := range miss {
		strength[id] = 1 - m
	}
	return strength
}

// rank orders nodes by relevance and edges by score, ties by name and id so
// replies are stable.
func rank(n *Neighbourhood, vendor UUID) {
	slices.SortFunc(n.Nodes, func(a, b Node) int {
		if a.Relevance != b.Relevance {
			if a.Relevance > b.Relevance {
				return -1
			}
			return 1
		}
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return compareUUID(a.ID, b.ID)
	})
	weight := make(map[UUID]float64, len(n.Nodes)+1)
	weight[vendor] = 1
	for _, nd := range n.Nodes {
		weight[nd.ID] = nd.Relevance
	}
	for i := range n.Edges {
		e := &n.Edges[i]
		e.Score = e.Confidence * math.Min(weight[e.Source], weight[e.Target])
	}
	slices.SortFunc(n.Edges, func(a, b Edge) int {
		if a.Score != b.Score {
			if a.Score > b.Score {
				return -1
			}
			return 1
		}
		return compareUUID(a.ID, b.ID)
	})
}

func compareUUID(a, b UUID) int { return slices.Compare(a[:], b[:]) }

// directStrength returns the one-hop strengths (see Neighbourhood), for
// the depth-2 path, which needs them before it knows the members.
func directStrength(ctx context.Context, q querier, vendor UUID) (map[UUID]float64, error) {
	rows, err := q.Query(ctx, `
		SELECT source_id, target_id, confidence FROM relationships WHERE source_id = $1 OR target_id = $1`, vendor)
	if err != nil {
		return nil, fmt.Errorf("load vendor relationships: %w", err)
	}
	var edges []Edge
	var e Edge
	var conf float32
	_, err = pgx.ForEachRow(rows, []any{&e.Source, &e.Target, &conf}, func() error {
		e.Confidence = Float(conf)
		edges = append(edges, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load vendor relationships: %w", err)
	}
	return strengthFromEdges(vendor, edges), nil
}

// addSecondHop adds the entities two hops from the vendor to strength.
func addSecondHop(ctx context.Context, q querier, vendor UUID, strength map[UUID]float64) error {
	first := make([]UUID, 0, len(strength))
	for id := range strength {
		first = append(first, id)
	}
	rows, err := q.Query(ctx, `
		SELECT source_id, target_id, confidence FROM relationships
		WHERE source_id = ANY($1::uuid[]) OR target_id = ANY($1::uuid[])`, first)
	if err != nil {
		return fmt.Errorf("load second hop: %w", err)
	}
	type pair struct{ via, to UUID }
	miss := map[pair]float64{}
	var src, tgt UUID
	var conf float32
	_, err = pgx.ForEachRow(rows, []any{&src, &tgt, &conf}, func() error {
		for _, p := range [2]pair{{src, tgt}, {tgt, src}} {
			if _, inFirst := strength[p.to]; inFirst || p.to == vendor {
				continue
			}
			if _, viaFirst := strength[p.via]; !viaFirst {
				continue
			}
			m, ok := miss[p]
			if !ok {
				m = 1
			}
			miss[p] = m * (1 - Float(conf))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("load second hop: %w", err)
	}
	second := map[UUID]float64{}
	for p, m := range miss {
		st := HopDecay * strength[p.via] * (1 - m)
		if cur, ok := second[p.to]; !ok || st > cur {
			second[p.to] = st
		}
	}
	if len(strength)+len(second) > MaxNeighbourhood {
		return fmt.Errorf("%w: %d entities within two hops, at most %d", ErrTooLarge, len(strength)+len(second), MaxNeighbourhood)
	}
	for id, st := range second {
		strength[id] = st
	}
	return nil
}

// Status counts the graph.
type Status struct {
	Vendors, Entities, Relationships int64
	LastUpdated                      *time.Time
}

// Status counts vendors, entities and relationships.
func (s *Store) Status(ctx context.Context) (Status, error) {
	var st Status
	var entUpdated, relUpdated *time.Time
	err := s.pool.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM entities WHERE is_vendor),
		       (SELECT count(*) FROM entities),
		       (SELECT count(*) FROM relationships),
		       (SELECT max(updated_at) FROM entities),
		       (SELECT max(updated_at) FROM relationships)`).
		Scan(&st.Vendors, &st.Entities, &st.Relationships, &entUpdated, &relUpdated)
	if err != nil {
		return st, fmt.Errorf("count graph: %w", err)
	}
	st.LastUpdated = entUpdated
	if relUpdated != nil && (st.LastUpdated == nil || relUpdated.After(*st.LastUpdated)) {
		st.LastUpdated = relUpdated
	}
	return st, nil
}

// Float turns a stored real into the float64 with the same shortest decimal
// form, so 0.95 stored as a real reads back as 0.95, not 0.949999988.
func Float(f float32) float64 {
	v, err := strconv.ParseFloat(strconv.FormatFloat(float64(f), 'g', -1, 32), 64)
	if err != nil {
		return float64(f)
	}
	return v
}
