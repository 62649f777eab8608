package backup

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
)

// seeded are the tables the migrations fill themselves (a singleton state
// row, the default rate-limit tiers): a freshly migrated stack has rows in
// them, so they do not make it "non-empty", and a restore replaces their
// rows with the file's. TestSeededTablesAreTheMigrationsOwn keeps this list
// equal to what a fresh migration leaves.
var seeded = map[string]bool{
	"search.search_state":   true,
	"search.mention_state":  true,
	"auth.rate_limit_tiers": true,
}

// Seeded reports whether the migrations fill the table (schema.name)
// themselves: its rows are not an operator's data (bmcisctl migrate down
// drops it unasked).
func Seeded(qualifiedName string) bool { return seeded[qualifiedName] }

// catalogTable is a table as the catalog shows it. A partitioned table is
// read and loaded through its parent (COPY (SELECT ...) and COPY FROM route
// the rows), so its partitions are not listed.
type catalogTable struct {
	Table
	oid uint32
}

// foreignKey says table from references table to (schema.name).
type foreignKey struct{ from, to string }

// catalog is what one database holds in the given schemas.
type catalog struct {
	tables    []catalogTable
	keys      []foreignKey
	sequences []Sequence
}

// readCatalog lists the tables,
// their columns (generated ones are computed again on restore, so left
// out), their foreign keys and the sequences of schemas.
func readCatalog(ctx context.Context, q pgx.Tx, schemas []string) (*catalog, error) {
	rows, err := q.Query(ctx, `SELECT c.oid, n.nspname, c.relname
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = ANY($1) AND c.relkind IN ('r', 'p') AND NOT c.relispartition
		ORDER BY n.nspname, c.relname`, schemas)
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	var cat catalog
	for rows.Next() {
		var t catalogTable
		if err := rows.Scan(&t.oid, &t.Schema, &t.Name); err != nil {
			rows.Close()
			return nil, fmt.Errorf("list tables: %w", err)
		}
		cat.tables = append(cat.tables, t)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	for i := range cat.tables {
		t := &cat.tables[i]
		rows, err := q.Query(ctx, `SELECT attname FROM pg_attribute
			WHERE attrelid = $1 AND attnum > 0 AND NOT attisdropped AND attgenerated = ''
			ORDER BY attnum`, t.oid)
		if err != nil {
			return nil, fmt.Errorf("list columns of %s: %w", t.QualifiedName(), err)
		}
		if t.Columns, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return nil, fmt.Errorf("list columns of %s: %w", t.QualifiedName(), err)
		}
	}
	rows, err = q.Query(ctx, `SELECT n.nspname || '.' || c.relname, fn.nspname || '.' || f.relname
		FROM pg_constraint con
		JOIN pg_class c ON c.oid = con.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		JOIN pg_class f ON f.oid = con.confrelid JOIN pg_namespace fn ON fn.oid = f.relnamespace
		WHERE con.contype = 'f' AND n.nspname = ANY($1)`, schemas)
	if err != nil {
		return nil, fmt.Errorf("list foreign keys: %w", err)
	}
	if cat.keys, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (foreignKey, error) {
		var k foreignKey
		return k, r.Scan(&k.from, &k.to)
	}); err != nil {
		return nil, fmt.Errorf("list foreign keys: %w", err)
	}
	rows, err = q.Query(ctx, `SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = ANY($1) AND c.relkind = 'S' ORDER BY 1, 2`, schemas)
	if err != nil {
		return nil, fmt.Errorf("list sequences: %w", err)
	}
	if cat.sequences, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Sequence, error) {
		var s Sequence
		return s, r.Scan(&s.Schema, &s.Name)
	}); err != nil {
		return nil, fmt.Errorf("list sequences: %w", err)
	}
	return &cat, nil
}

// merge adds another database's catalog (the services on separate databases).
func (c *catalog) merge(o *catalog) {
	c.tables = append(c.tables, o.tables...)
	c.keys = append(c.keys, o.keys...)
	c.sequences = append(c.sequences, o.sequences...)
	sort.Slice(c.tables, func(i, j int) bool { return c.tables[i].QualifiedName() < c.tables[j].QualifiedName() })
}

// ordered returns the tables so that each comes after every table it
// references (a table referencing itself, such as a key's rotated_from, is
// loaded by one COPY, whose checks run at its end).
func (c *catalog) ordered() ([]catalogTable, error) {
	byName := map[string]int{}
	for i, t := range c.tables {
		byName[t.QualifiedName()] = i
	}
	deps := make([]map[int]bool, len(c.tables))
	for _, k := range c.keys {
		from, ok1 := byName[k.from]
		to, ok2 := byName[k.to]
		if !ok1 || !ok2 || from == to {
			continue // a reference outside the schemas is the target's to keep
		}
		if deps[from] == nil {
			deps[from] = map[int]bool{}
		}
		deps[from][to] = true
	}
	out := make([]catalogTable, 0, len(c.tables))
	done := make([]bool, len(c.tables))
	for len(out) < len(c.tables) {
		progressed := false
		// Tables are in name order: the first ready one goes next, so the
		// order is the same on every run.
		for i, t := range c.tables {
			if done[i] {
				continue
			}
			ready := true
			for d := range deps[i] {
				if !done[d] {
					ready = false
					break
				}
			}
			if ready {
				done[i] = true
				out = append(out, t)
				progressed = true
				break
			}
		}
		if !progressed {
			var left []string
			for i, t := range c.tables {
				if !done[i] {
					left = append(left, t.QualifiedName())
				}
			}
			return nil, fmt.Errorf("the foreign keys among %s form a cycle: no order loads them", strings.Join(left, ", "))
		}
	}
	return out, nil
}

// schemaVersion is the database's migration version, read in the snapshot
// (goose's provider deletes a version's row when it rolls it back). A
// database migrate up never ran on has no version table: that is version 0,
// which the callers refuse with what to run, and querying the missing table
// would abort the transaction.
func schemaVersion(ctx context.Context, q pgx.Tx) (int64, error) {
	var migrated bool
	if err := q.QueryRow(ctx, `SELECT to_regclass('public.goose_db_version') IS NOT NULL`).Scan(&migrated); err != nil {
		return 0, fmt.Errorf("look for the schema version table: %w", err)
	}
	if !migrated {
		return 0, nil
	}
	var v int64
	if err := q.QueryRow(ctx, `SELECT COALESCE(max(version_id), 0) FROM public.goose_db_version`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// quoted is schema.name, quoted for SQL.
func quoted(schema, name string) string { return pgx.Identifier{schema, name}.Sanitize() }

// columnList is the columns, quoted for SQL.
func columnList(cols []string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = pgx.Identifier{c}.Sanitize()
	}
	return strings.Join(q, ", ")
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
