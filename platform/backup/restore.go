package backup

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/bmcis/knowledge/migrations"
)

// Refusals of a restore; each leaves the target untouched.
var (
	// ErrNewerRelease: the file's schema is newer than this release knows.
	ErrNewerRelease = errors.New("backup made by a newer release")
	// ErrOlderRelease: the target's schema is newer than the file's.
	ErrOlderRelease = errors.New("backup made by an older release")
	// ErrTargetBehind: the target has migrations to apply first.
	ErrTargetBehind = errors.New("target database not migrated to the backup's schema version")
	// ErrNotEmpty: the target holds data already.
	ErrNotEmpty = errors.New("target stack is not empty")
	// ErrShape: the target's tables differ from the file's at the same version.
	ErrShape = errors.New("target tables differ from the backup's")
)

// Verify reads a whole backup from r and returns its header, or the reason
// it is not a whole, intact backup this release reads (ErrDamaged,
// ErrNewerFormat).
func Verify(r io.Reader) (*Header, error) {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return nil, damaged("not a gzip stream: %v", err)
	}
	d := newDecoder(gz)
	h, err := d.readHeader()
	if err != nil {
		return nil, err
	}
	for _, t := range h.Tables {
		if err := d.readSegment(t, func(r io.Reader) error {
			_, err := io.Copy(io.Discard, r)
			return err
		}); err != nil {
			return nil, err
		}
	}
	if err := d.readTrailer(); err != nil {
		return nil, err
	}
	return h, nil
}

// Restore writes a backup into dbs, an empty stack migrated to the file's
// schema version, all or nothing. open is called twice: the whole file is
// read and checked first (format, checksum, every table's rows), then every
// target is checked (schema version, tables, emptiness) with its tables
// locked, and only then is anything written, in one transaction per
// database, committed when every table and sequence is in. Should a commit
// fail after another database's committed (the services on separate
// databases), the error says which ones hold the backup.
func Restore(ctx context.Context, open func() (io.ReadCloser, error), dbs []Database) (*Header, error) {
	if err := checkDatabases(dbs); err != nil {
		return nil, err
	}
	h, err := verifyFile(open)
	if err != nil {
		return nil, err
	}
	latest, err := migrations.LatestVersion()
	if err != nil {
		return nil, err
	}
	for _, d := range h.Databases {
		if d.SchemaVersion > latest {
			return nil, fmt.Errorf("%w (release %s, schema version %d; this release knows schema versions up to %d): restore it with that release",
				ErrNewerRelease, h.Release, d.SchemaVersion, latest)
		}
	}

	// Each schema of the file goes to the database given for it.
	fileSchemas := map[string][]Table{}
	for _, t := range h.Tables {
		fileSchemas[t.Schema] = append(fileSchemas[t.Schema], t)
	}
	targetOf := map[string]int{}
	for i, db := range dbs {
		for _, s := range db.Schemas {
			targetOf[s] = i
		}
	}
	for _, s := range sortedKeys(fileSchemas) {
		if _, ok := targetOf[s]; !ok {
			return nil, fmt.Errorf("the backup holds schema %s and no target database is given for it", s)
		}
	}

	snaps := make([]*snapshot, len(dbs))
	defer func() {
		for _, s := range snaps {
			if s != nil {
				s.close()
			}
		}
	}()
	var refusals []error
	for i, db := range dbs {
		var schemas []string
		for _, s := range db.Schemas {
			if _, ok := fileSchemas[s]; ok {
				schemas = append(schemas, s)
			}
		}
		if len(schemas) == 0 {
			continue
		}
		snap, err := begin(ctx, db)
		if err != nil {
			return nil, err
		}
		snaps[i] = snap
		if err := checkTarget(ctx, snap.tx, h, schemas, fileSchemas); err != nil {
			refusals = append(refusals, err)
		}
	}
	if err := errors.Join(refusals...); err != nil {
		return nil, err
	}

	txOf := func(schema string) pgx.Tx { return snaps[targetOf[schema]].tx }
	// Indexes are built once over the loaded tables rather than row by row
	// (an HNSW index fed 100k vectors one at a time takes many times
	// longer); those that back a constraint stay, since they check it.
	rebuild := map[int][]string{}
	for i, snap := range snaps {
		if snap == nil {
			continue
		}
		if rebuild[i], err = dropIndexes(ctx, snap.tx, dbs[i].Schemas); err != nil {
			return nil, err
		}
	}
	// The migrations' own rows give way to the file's.
	for i := len(h.Tables) - 1; i >= 0; i-- {
		t := h.Tables[i]
		if seeded[t.QualifiedName()] {
			if _, err := txOf(t.Schema).Exec(ctx, "DELETE FROM "+quoted(t.Schema, t.Name)); err != nil {
				return nil, fmt.Errorf("clear %s: %w", t.QualifiedName(), err)
			}
		}
	}
	if err := load(ctx, open, h, txOf); err != nil {
		return nil, err
	}
	for i, defs := range rebuild {
		if err := createIndexes(ctx, snaps[i].tx, defs); err != nil {
			return nil, err
		}
	}
	for _, s := range h.Sequences {
		if _, err := txOf(s.Schema).Exec(ctx, "SELECT setval($1::regclass, $2, $3)", quoted(s.Schema, s.Name), s.LastValue, s.IsCalled); err != nil {
			return nil, fmt.Errorf("set sequence %s.%s: %w", s.Schema, s.Name, err)
		}
	}
	var committed []string
	for i, snap := range snaps {
		if snap == nil {
			continue
		}
		if err := snap.tx.Commit(ctx); err != nil {
			if len(committed) > 0 {
				return nil, fmt.Errorf("commit the restore of %s: %w (the restore of %s committed: those schemas hold the backup, these do not)",
					strings.Join(dbs[i].Schemas, ", "), err, strings.Join(committed, ", "))
			}
			return nil, fmt.Errorf("commit the restore: %w (nothing was restored)", err)
		}
		committed = append(committed, dbs[i].Schemas...)
	}
	return h, nil
}

func verifyFile(open func() (io.ReadCloser, error)) (*Header, error) {
	f, err := open()
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Verify(f)
}

// begin opens the restore's transaction on db. A service still writing
// there holds locks the restore waits for, a bounded time.
func begin(ctx context.Context, db Database) (*snapshot, error) {
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		conn.Release()
		return nil, fmt.Errorf("begin restore: %w", err)
	}
	if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '30s'"); err != nil {
		_ = tx.Rollback(ctx)
		conn.Release()
		return nil, fmt.Errorf("begin restore: %w", err)
	}
	return &snapshot{conn, tx}, nil
}

// checkTarget refuses a target whose schema version, tables or columns
// differ from the file's, or that holds rows beyond the migrations' own. It
// locks the tables first, so nothing writes them between the check and the
// restore.
func checkTarget(ctx context.Context, tx pgx.Tx, h *Header, schemas []string, fileSchemas map[string][]Table) error {
	current, err := schemaVersion(ctx, tx)
	if err != nil {
		return err
	}
	for _, s := range schemas {
		want, _ := h.SchemaVersion(s)
		switch {
		case current > want:
			return fmt.Errorf("%w (schema version %d; the target database of %s is at %d): upgrade path is: restore into that release, then migrate",
				ErrOlderRelease, want, s, current)
		case current < want:
			return fmt.Errorf("%w: the target database of %s is at schema version %d, the backup at %d: run `bmcisctl migrate up` on it first",
				ErrTargetBehind, s, current, want)
		}
	}
	cat, err := readCatalog(ctx, tx, schemas)
	if err != nil {
		return err
	}
	target := map[string]catalogTable{}
	for _, t := range cat.tables {
		target[t.QualifiedName()] = t
	}
	var differ []string
	var want []Table
	for _, s := range schemas {
		want = append(want, fileSchemas[s]...)
	}
	for _, t := range want {
		got, ok := target[t.QualifiedName()]
		switch {
		case !ok:
			differ = append(differ, t.QualifiedName()+" is missing")
		case !sameColumns(got.Columns, t.Columns):
			differ = append(differ, fmt.Sprintf("%s has columns %s, the backup %s", t.QualifiedName(),
				strings.Join(got.Columns, ","), strings.Join(t.Columns, ",")))
		}
		delete(target, t.QualifiedName())
	}
	for _, name := range sortedKeys(target) {
		differ = append(differ, name+" is not in the backup")
	}
	if len(differ) > 0 {
		return fmt.Errorf("%w: %s", ErrShape, strings.Join(differ, "; "))
	}
	names := make([]string, len(want))
	for i, t := range want {
		names[i] = quoted(t.Schema, t.Name)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE "+strings.Join(names, ", ")+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		return fmt.Errorf("lock the target's tables: %w", err)
	}
	var full []string
	for _, t := range want {
		if seeded[t.QualifiedName()] {
			continue
		}
		var has bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+quoted(t.Schema, t.Name)+")").Scan(&has); err != nil {
			return fmt.Errorf("check %s is empty: %w", t.QualifiedName(), err)
		}
		if has {
			full = append(full, t.QualifiedName())
		}
	}
	if len(full) > 0 {
		return fmt.Errorf("%w: %s hold rows; restore into a new, migrated database (`bmcisctl migrate up`) with the services stopped",
			ErrNotEmpty, strings.Join(full, ", "))
	}
	return nil
}

// restoreMaintenanceMem is the memory an index build of the restore may
// use (PostgreSQL's default, 64 MB, makes a large HNSW build spill).
const restoreMaintenanceMem = "256MB"

// dropIndexes drops the indexes of the schemas' tables that back no
// constraint, in tx, and returns their definitions.
func dropIndexes(ctx context.Context, tx pgx.Tx, schemas []string) ([]string, error) {
	rows, err := tx.Query(ctx, `SELECT n.nspname, ic.relname, pg_get_indexdef(i.indexrelid)
		FROM pg_index i
		JOIN pg_class ic ON ic.oid = i.indexrelid
		JOIN pg_class c ON c.oid = i.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = ANY($1) AND c.relkind IN ('r', 'p')
		  AND NOT EXISTS (SELECT 1 FROM pg_constraint con WHERE con.conindid = i.indexrelid)
		ORDER BY 1, 2`, schemas)
	if err != nil {
		return nil, fmt.Errorf("list indexes: %w", err)
	}
	type index struct{ schema, name, def string }
	idx, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (index, error) {
		var x index
		return x, r.Scan(&x.schema, &x.name, &x.def)
	})
	if err != nil {
		return nil, fmt.Errorf("list indexes: %w", err)
	}
	defs := make([]string, 0, len(idx))
	for _, x := range idx {
		if _, err := tx.Exec(ctx, "DROP INDEX "+quoted(x.schema, x.name)); err != nil {
			return nil, fmt.Errorf("drop index %s.%s for the load: %w", x.schema, x.name, err)
		}
		defs = append(defs, x.def)
	}
	return defs, nil
}

// createIndexes builds the indexes dropIndexes dropped.
func createIndexes(ctx context.Context, tx pgx.Tx, defs []string) error {
	if _, err := tx.Exec(ctx, "SELECT set_config('maintenance_work_mem', $1, true)", restoreMaintenanceMem); err != nil {
		return fmt.Errorf("set maintenance_work_mem: %w", err)
	}
	for _, def := range defs {
		if _, err := tx.Exec(ctx, def); err != nil {
			return fmt.Errorf("rebuild index (%s): %w", def, err)
		}
	}
	return nil
}

func sameColumns(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// load reads the file again and copies each table into its database's
// transaction; the checksum is checked again at the end, so a file changed
// since it was verified is not committed.
func load(ctx context.Context, open func() (io.ReadCloser, error), verified *Header, txOf func(string) pgx.Tx) error {
	f, err := open()
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return damaged("not a gzip stream: %v", err)
	}
	d := newDecoder(gz)
	h, err := d.readHeader()
	if err != nil {
		return err
	}
	if !reflect.DeepEqual(h, verified) {
		return damaged("the file changed while it was being restored")
	}
	for _, t := range h.Tables {
		sql := "COPY " + quoted(t.Schema, t.Name) + " (" + columnList(t.Columns) + ") FROM STDIN"
		if err := d.readSegment(t, func(r io.Reader) error {
			_, err := txOf(t.Schema).Conn().PgConn().CopyFrom(ctx, r, sql)
			return err
		}); err != nil {
			return fmt.Errorf("restore %s: %w", t.QualifiedName(), err)
		}
	}
	return d.readTrailer()
}
