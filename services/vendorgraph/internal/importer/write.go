package importer

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// NotifyChannel is the PostgreSQL channel an import that changed the graph
// notifies on commit, so every vendorgraph replica drops its cached replies.
const NotifyChannel = "bmcis_vendorgraph_changed"

// importLockKey serializes imports: two concurrent upserts touching the same
// rows in different orders could deadlock, and imports are rare.
const importLockKey = 0x76677261706869 // "vgraphi"

// Counts is what a committed import changed.
type Counts struct {
	EntitiesCreated, EntitiesUpdated, EntitiesUnchanged                int
	RelationshipsCreated, RelationshipsUpdated, RelationshipsUnchanged int
	// How long each step took, for the import's log line.
	CopyTime, EntitiesTime, RelationshipsTime time.Duration
}

// Changed reports whether the import changed anything.
func (c Counts) Changed() bool {
	return c.EntitiesCreated+c.EntitiesUpdated+c.RelationshipsCreated+c.RelationshipsUpdated > 0
}

// Lock takes the import lock for the rest of tx.
func Lock(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(importLockKey)); err != nil {
		return fmt.Errorf("take import lock: %w", err)
	}
	return nil
}

// ExistingEntities returns which of ids are already in the graph.
func ExistingEntities(ctx context.Context, tx pgx.Tx, ids []UUID) (map[UUID]bool, error) {
	found := make(map[UUID]bool, len(ids))
	if len(ids) == 0 {
		return found, nil
	}
	rows, err := tx.Query(ctx, "SELECT id FROM entities WHERE id = ANY($1::uuid[])", ids)
	if err != nil {
		return nil, fmt.Errorf("look up referenced entities: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id UUID
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("scan referenced entity: %w", err)
		}
		found[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("look up referenced entities: %w", err)
	}
	return found, nil
}

// Write upserts a validated batch inside tx: rows are bulk-copied into
// temporary tables, then merged; a row whose record_hash is unchanged is not
// touched, so re-importing a file changes nothing (updated_at included).
// Aliases of a created or changed vendor are replaced by the file's list.
// When anything changed, a notification carrying origin (the writing
// replica's id) goes out on NotifyChannel at commit.
func Write(ctx context.Context, tx pgx.Tx, b *Batch, origin string) (Counts, error) {
	var c Counts
	start := time.Now()
	if _, err := tx.Exec(ctx, `
		CREATE TEMP TABLE import_entities (
			id uuid, name text, normalized_name text, entity_type text, confidence real,
			snippet text, attributes jsonb, is_vendor boolean, record_hash bytea) ON COMMIT DROP;
		CREATE TEMP TABLE import_aliases (entity_id uuid, alias text, normalized_alias text) ON COMMIT DROP;
		CREATE TEMP TABLE import_relationships (
			id uuid, source_id uuid, target_id uuid, relationship_type text, confidence real,
			metadata jsonb, record_hash bytea) ON COMMIT DROP;
		CREATE TEMP TABLE import_changed (id uuid PRIMARY KEY, inserted boolean) ON COMMIT DROP;`); err != nil {
		return c, fmt.Errorf("create import tables: %w", err)
	}

	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"import_entities"},
		[]string{"id", "name", "normalized_name", "entity_type", "confidence", "snippet", "attributes", "is_vendor", "record_hash"},
		pgx.CopyFromSlice(len(b.Entities), func(i int) ([]any, error) {
			e := &b.Entities[i]
			return []any{e.ID, e.Name, e.NormalizedName, e.Type, e.Confidence, e.Snippet, string(e.Attributes), e.IsVendor, e.Hash[:]}, nil
		})); err != nil {
		return c, fmt.Errorf("copy entities: %w", err)
	}
	var aliasRows [][]any
	for i := range b.Entities {
		e := &b.Entities[i]
		for _, a := range e.Aliases {
			aliasRows = append(aliasRows, []any{e.ID, a.Alias, a.Normalized})
		}
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"import_aliases"},
		[]string{"entity_id", "alias", "normalized_alias"}, pgx.CopyFromRows(aliasRows)); err != nil {
		return c, fmt.Errorf("copy aliases: %w", err)
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"import_relationships"},
		[]string{"id", "source_id", "target_id", "relationship_type", "confidence", "metadata", "record_hash"},
		pgx.CopyFromSlice(len(b.Relationships), func(i int) ([]any, error) {
			r := &b.Relationships[i]
			meta := "{}"
			if r.Metadata != nil {
				meta = string(r.Metadata)
			}
			return []any{r.ID, r.Source, r.Target, r.Type, r.Confidence, meta, r.Hash[:]}, nil
		})); err != nil {
		return c, fmt.Errorf("copy relationships: %w", err)
	}

	c.CopyTime = time.Since(start)
	start = time.Now()

	// xmax = 0 tells a freshly inserted row from an updated one; rows whose
	// hash did not change are filtered by the WHERE and not returned at all.
	// Rows go in file order (the temporary tables' scan order), not id order:
	// ids are random UUIDs, and a file that groups a vendor's records keeps
	// them on neighbouring pages, which GetVendor reads together. Imports are
	// serialized by the advisory lock, so the order needs no deadlock care.
	if _, err := tx.Exec(ctx, `
		WITH up AS (
			INSERT INTO entities AS e (id, name, normalized_name, entity_type, confidence, snippet,
			                           attributes, is_vendor, record_hash, updated_at)
			SELECT id, name, normalized_name, entity_type, confidence, snippet,
			       attributes, is_vendor, record_hash, now()
			FROM import_entities
			ON CONFLICT (id) DO UPDATE SET
				name = EXCLUDED.name, normalized_name = EXCLUDED.normalized_name,
				entity_type = EXCLUDED.entity_type, confidence = EXCLUDED.confidence,
				snippet = EXCLUDED.snippet, attributes = EXCLUDED.attributes,
				is_vendor = EXCLUDED.is_vendor, record_hash = EXCLUDED.record_hash,
				updated_at = EXCLUDED.updated_at
			WHERE e.record_hash <> EXCLUDED.record_hash
			RETURNING e.id, (e.xmax = 0) AS inserted)
		INSERT INTO import_changed SELECT id, inserted FROM up`); err != nil {
		return c, fmt.Errorf("upsert entities: %w", err)
	}
	if err := tx.QueryRow(ctx, `SELECT count(*) FILTER (WHERE inserted), count(*) FILTER (WHERE NOT inserted) FROM import_changed`).
		Scan(&c.EntitiesCreated, &c.EntitiesUpdated); err != nil {
		return c, fmt.Errorf("count entity changes: %w", err)
	}
	c.EntitiesUnchanged = len(b.Entities) - c.EntitiesCreated - c.EntitiesUpdated

	if c.EntitiesCreated+c.EntitiesUpdated > 0 {
		if _, err := tx.Exec(ctx, `
			DELETE FROM vendor_aliases a USING import_changed c
			WHERE a.entity_id = c.id AND NOT c.inserted`); err != nil {
			return c, fmt.Errorf("drop replaced aliases: %w", err)
		}
		if _, err := tx.Exec(ctx, `
			INSERT INTO vendor_aliases (entity_id, alias, normalized_alias)
			SELECT a.entity_id, a.alias, a.normalized_alias
			FROM import_aliases a JOIN import_changed c ON c.id = a.entity_id
			ON CONFLICT DO NOTHING`); err != nil {
			return c, fmt.Errorf("insert aliases: %w", err)
		}
	}

	c.EntitiesTime = time.Since(start)
	start = time.Now()

	if err := tx.QueryRow(ctx, `
		WITH up AS (
			INSERT INTO relationships AS r (id, source_id, target_id, relationship_type, confidence,
			                                metadata, record_hash, updated_at)
			SELECT id, source_id, target_id, relationship_type, confidence, metadata, record_hash, now()
			FROM import_relationships
			ON CONFLICT (id) DO UPDATE SET
				source_id = EXCLUDED.source_id, target_id = EXCLUDED.target_id,
				relationship_type = EXCLUDED.relationship_type, confidence = EXCLUDED.confidence,
				metadata = EXCLUDED.metadata, record_hash = EXCLUDED.record_hash,
				updated_at = EXCLUDED.updated_at
			WHERE r.record_hash <> EXCLUDED.record_hash
			RETURNING (r.xmax = 0) AS inserted)
		SELECT count(*) FILTER (WHERE inserted), count(*) FILTER (WHERE NOT inserted) FROM up`).
		Scan(&c.RelationshipsCreated, &c.RelationshipsUpdated); err != nil {
		return c, fmt.Errorf("upsert relationships: %w", err)
	}
	c.RelationshipsUnchanged = len(b.Relationships) - c.RelationshipsCreated - c.RelationshipsUpdated
	c.RelationshipsTime = time.Since(start)

	if c.Changed() {
		// Delivered to every listening replica when (and only if) tx commits.
		if _, err := tx.Exec(ctx, "SELECT pg_notify($1, $2)", NotifyChannel, origin); err != nil {
			return c, fmt.Errorf("notify replicas: %w", err)
		}
	}
	return c, nil
}

// analyzeThreshold is how many rows an import must create or change before
// it refreshes the planner's statistics itself: a first bulk load would
// otherwise be planned with an empty table's statistics until autovacuum
// catches up.
const analyzeThreshold = 10000

// Analyze refreshes planner statistics after a large import (see
// analyzeThreshold); it runs after the commit, outside the import's
// transaction. It reports whether it ran. The service's role does not own
// the graph's tables, so it asks vendorgraph.analyze_graph, which runs as
// their owner (00020_least_privilege.sql): its own ANALYZE would be
// skipped with a mere warning.
func Analyze(ctx context.Context, db interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, c Counts) (bool, error) {
	if c.EntitiesCreated+c.EntitiesUpdated+c.RelationshipsCreated+c.RelationshipsUpdated < analyzeThreshold {
		return false, nil
	}
	if _, err := db.Exec(ctx, "SELECT vendorgraph.analyze_graph()"); err != nil {
		return true, fmt.Errorf("analyze graph tables: %w", err)
	}
	return true, nil
}
