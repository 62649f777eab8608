package backup

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// afterTableHook, when set (tests), runs after each table is written: a
// test commits writes there to show the file keeps one snapshot.
var afterTableHook func(Table)

// Database is one database and the service schemas in it that a backup
// reads or a restore writes. The services share one database unless they
// were split onto servers of their own (docs/DEPLOY.md).
type Database struct {
	Pool    *pgxpool.Pool
	Schemas []string
}

// checkDatabases refuses a schema named twice or a database with none.
func checkDatabases(dbs []Database) error {
	if len(dbs) == 0 {
		return errors.New("no database given")
	}
	seen := map[string]bool{}
	for _, db := range dbs {
		if len(db.Schemas) == 0 {
			return errors.New("a database is given without a schema")
		}
		for _, s := range db.Schemas {
			if seen[s] {
				return fmt.Errorf("schema %s is given twice", s)
			}
			seen[s] = true
		}
	}
	return nil
}

// snapshot is one open transaction on one database.
type snapshot struct {
	conn *pgxpool.Conn
	tx   pgx.Tx
}

func (s *snapshot) close() {
	_ = s.tx.Rollback(context.Background())
	s.conn.Release()
}

// Write backs up every table and sequence of the databases' schemas to w
// and returns the header it wrote. Each database is read in one
// REPEATABLE READ READ ONLY transaction, so the file is the state of one
// moment per database while writers go on; when the services sit on
// separate databases, the snapshots are taken one after another, so the
// file is consistent per database (per service), not across them.
func Write(ctx context.Context, w io.Writer, dbs []Database, release string) (*Header, error) {
	if err := checkDatabases(dbs); err != nil {
		return nil, err
	}
	h := &Header{Format: FormatVersion, Release: release, CreatedAt: time.Now().UTC()}
	var all catalog
	txOf := map[string]pgx.Tx{} // schema -> its snapshot
	for _, db := range dbs {
		conn, err := db.Pool.Acquire(ctx)
		if err != nil {
			return nil, fmt.Errorf("connect: %w", err)
		}
		tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
		if err != nil {
			conn.Release()
			return nil, fmt.Errorf("begin snapshot: %w", err)
		}
		snap := &snapshot{conn, tx}
		defer snap.close()
		// The first query fixes the snapshot: everything below reads it.
		cat, err := readCatalog(ctx, tx, db.Schemas)
		if err != nil {
			return nil, err
		}
		version, err := schemaVersion(ctx, tx)
		if err != nil {
			return nil, err
		}
		if version == 0 {
			return nil, errors.New("the database is not migrated (schema version 0): nothing to back up")
		}
		for i := range cat.tables {
			t := &cat.tables[i]
			if err := tx.QueryRow(ctx, "SELECT count(*) FROM "+quoted(t.Schema, t.Name)).Scan(&t.Rows); err != nil {
				return nil, fmt.Errorf("count rows of %s: %w", t.QualifiedName(), err)
			}
		}
		// Sequences are not transactional: read after the snapshot, each
		// is at least what any row of it used, so a restored one hands out
		// no value twice.
		for i := range cat.sequences {
			s := &cat.sequences[i]
			if err := tx.QueryRow(ctx, "SELECT last_value, is_called FROM "+quoted(s.Schema, s.Name)).Scan(&s.LastValue, &s.IsCalled); err != nil {
				return nil, fmt.Errorf("read sequence %s.%s: %w", s.Schema, s.Name, err)
			}
		}
		for _, s := range db.Schemas {
			txOf[s] = tx
		}
		h.Databases = append(h.Databases, SnapshotInfo{Schemas: db.Schemas, SchemaVersion: version})
		all.merge(cat)
	}
	tables, err := all.ordered()
	if err != nil {
		return nil, err
	}
	for _, t := range tables {
		h.Tables = append(h.Tables, t.Table)
	}
	h.Sequences = all.sequences

	// The fastest level: a backup runs beside the services' traffic, and
	// vectors compress little at any level.
	gz, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	e := newEncoder(gz)
	if _, err := io.WriteString(e.out, Magic); err != nil {
		return nil, fmt.Errorf("write backup: %w", err)
	}
	if err := e.jsonFrame(h); err != nil {
		return nil, fmt.Errorf("write backup: %w", err)
	}
	for _, t := range tables {
		if err := e.jsonFrame(segment{Schema: t.Schema, Name: t.Name, Columns: t.Columns}); err != nil {
			return nil, fmt.Errorf("write backup: %w", err)
		}
		pw := &pieceWriter{e: e}
		sql := "COPY (SELECT " + columnList(t.Columns) + " FROM " + quoted(t.Schema, t.Name) + ") TO STDOUT"
		if _, err := txOf[t.Schema].Conn().PgConn().CopyTo(ctx, pw, sql); err != nil {
			return nil, fmt.Errorf("copy %s: %w", t.QualifiedName(), err)
		}
		if err := pw.flush(); err != nil {
			return nil, fmt.Errorf("write backup: %w", err)
		}
		if err := e.frame(nil); err != nil {
			return nil, fmt.Errorf("write backup: %w", err)
		}
		if pw.rows != t.Rows {
			return nil, fmt.Errorf("copy %s: %d rows copied, %d counted in the same snapshot", t.QualifiedName(), pw.rows, t.Rows)
		}
		if afterTableHook != nil {
			afterTableHook(t.Table)
		}
	}
	if err := e.finish(); err != nil {
		return nil, fmt.Errorf("write backup: %w", err)
	}
	if err := gz.Close(); err != nil {
		return nil, fmt.Errorf("write backup: %w", err)
	}
	return h, nil
}
