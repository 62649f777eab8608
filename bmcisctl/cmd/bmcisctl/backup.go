package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bmcis/knowledge/migrations"
	"github.com/bmcis/knowledge/platform/backup"
	"github.com/bmcis/knowledge/platform/pg"
	"github.com/bmcis/knowledge/platform/version"
)

func init() {
	commands["backup"] = command{
		summary: "write every table of the service schemas to FILE, in one snapshot; uses BMCIS_BACKUP_DATABASE_URL or DATABASE_URL",
		run:     runBackup,
	}
	commands["restore"] = command{
		summary: "restore a backup FILE into an empty, migrated stack, all or nothing; uses DATABASE_URL",
		run:     runRestore,
	}
}

// splitURLEnv names the variable with the database of one service's schema
// when the services run on separate databases (docs/BACKUP.md); unset, the
// schema is in the command's main database.
func splitURLEnv(svc migrations.Service) string {
	return "DATABASE_URL_" + strings.ToUpper(string(svc))
}

// Where backup and restore read their main database from, for their help
// and their messages.
var (
	backupDatabaseFrom  = migrations.BackupLoginURLEnv + " (the read-only backup login) or else DATABASE_URL"
	restoreDatabaseFrom = "DATABASE_URL (the migration role: it writes every schema)"
)

const databaseHelp = "  The schemas are in the database of %s; when the services run on separate databases,\n" +
	"  DATABASE_URL_SEARCH, DATABASE_URL_VENDORGRAPH and DATABASE_URL_AUTH name each one's (docs/BACKUP.md).\n"

// openDatabases connects to the database of every service schema: the one
// main names, or the service's own (splitURLEnv). Services on one URL share
// one connection pool, so they are read in one snapshot and restored in one
// transaction. mainFrom says where main is read from, for the message when
// no database is set.
func openDatabases(ctx context.Context, main, mainFrom string) ([]backup.Database, func(), error) {
	var dbs []backup.Database
	byURL := map[string]int{}
	var pools []*pgxpool.Pool
	closeAll := func() {
		for _, p := range pools {
			p.Close()
		}
	}
	for _, svc := range migrations.Services {
		url := envOr(splitURLEnv(svc), main)
		if url == "" {
			closeAll()
			hint := credentialsFileHint()
			if _, err := loadCredentialsFile(); err != nil {
				hint = err.Error()
			}
			return nil, nil, usageErrorf("no database for the %s schema: set %s, or %s for that schema alone "+
				"(in the environment, or in the credentials file: %s)", svc, mainFrom, splitURLEnv(svc), hint)
		}
		if i, ok := byURL[url]; ok {
			dbs[i].Schemas = append(dbs[i].Schemas, svc.Schema())
			continue
		}
		pool, err := pg.ConnectRaw(ctx, url)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("database of the %s schema: %w", svc, err)
		}
		pools = append(pools, pool)
		byURL[url] = len(dbs)
		dbs = append(dbs, backup.Database{Pool: pool, Schemas: []string{svc.Schema()}})
	}
	return dbs, closeAll, nil
}

// backupResult is what a backup wrote or a restore read, as -o json|yaml
// shows it.
type backupResult struct {
	Action        string  `json:"action"`
	File          string  `json:"file"`
	Format        int     `json:"format"`
	Release       string  `json:"release"`
	CreatedAt     string  `json:"created_at"`
	SchemaVersion int64   `json:"schema_version"`
	Databases     int     `json:"databases"`
	Tables        int     `json:"tables"`
	Rows          int64   `json:"rows"`
	Bytes         int64   `json:"bytes"`
	Seconds       float64 `json:"seconds"`
}

func newBackupResult(action, file string, h *backup.Header, size int64, took time.Duration) backupResult {
	var v int64
	for _, d := range h.Databases {
		v = max(v, d.SchemaVersion)
	}
	return backupResult{Action: action, File: file, Format: h.Format, Release: h.Release,
		CreatedAt: h.CreatedAt.Format(time.RFC3339), SchemaVersion: v, Databases: len(h.Databases),
		Tables: len(h.Tables), Rows: h.Rows(), Bytes: size, Seconds: took.Seconds()}
}

func runBackup(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("backup", stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bmcisctl backup [--force] FILE")
		fmt.Fprintln(stderr, "  Writes every table and sequence of the search, vendorgraph and auth schemas to FILE (gzip), read in one")
		fmt.Fprintln(stderr, "  snapshot while the services go on writing, with the schema version, row counts and a checksum.")
		fmt.Fprintln(stderr, "  FILE appears only once it is whole; - writes to standard output. Redis is not in it (docs/BACKUP.md).")
		fmt.Fprintln(stderr, "  An existing FILE is refused unless --force, which replaces it only once the new backup is whole.")
		fmt.Fprintf(stderr, databaseHelp, backupDatabaseFrom)
	}
	force := fs.Bool("force", false, "replace FILE if it exists (once the new backup is whole)")
	output := outputFlag(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErrorf("backup takes exactly one FILE, got %d arguments", fs.NArg())
	}
	file := fs.Arg(0)
	// Found before the snapshot is read, not at the rename after it.
	if st, err := os.Stat(file); err == nil && st.IsDir() {
		return usageErrorf("%s is a directory: give the backup file's path (e.g. %s)", file, filepath.Join(file, "bmcis.backup"))
	} else if err == nil && file != "-" && !*force {
		return errBackupExists(file)
	}
	dbs, closeAll, err := openDatabases(ctx, envOr(migrations.BackupLoginURLEnv, envOr("DATABASE_URL", "")), backupDatabaseFrom)
	if err != nil {
		return err
	}
	defer closeAll()

	start := time.Now()
	var h *backup.Header
	var size int64
	if file == "-" {
		cw := &countingWriter{w: stdout}
		if h, err = backup.Write(ctx, cw, dbs, version.Version); err != nil {
			return err
		}
		size = cw.n
		// The file went to standard output: the result goes to stderr.
		stdout = stderr
	} else {
		if h, size, err = writeBackupFile(ctx, file, dbs, *force); err != nil {
			return err
		}
	}
	res := newBackupResult("backup", file, h, size, time.Since(start))
	return writeResult(stdout, *output, res, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "backed up %d tables (%d rows, schema version %d) to %s: %d bytes in %.1fs\n",
			res.Tables, res.Rows, res.SchemaVersion, file, size, res.Seconds)
		return err
	})
}

// insufficientPrivilege is PostgreSQL's SQLSTATE for "permission denied".
const insufficientPrivilege = "42501"

// errBackupExists refuses to overwrite a backup without --force.
func errBackupExists(file string) error {
	return usageErrorf("%s exists: give another FILE, or --force to replace it", file)
}

// writeBackupFile writes the backup beside file and moves it into place
// once whole, so a failed backup leaves no file that looks like one. Unless
// replace, a file that appeared at that name meanwhile is kept and the
// backup refused.
func writeBackupFile(ctx context.Context, file string, dbs []backup.Database, replace bool) (*backup.Header, int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".*.partial")
	if err != nil {
		return nil, 0, fmt.Errorf("create backup file: %w", err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	cw := &countingWriter{w: tmp}
	h, err := backup.Write(ctx, cw, dbs, version.Version)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, 0, err
	}
	if err := placeBackupFile(tmp.Name(), file, replace); err != nil {
		return nil, 0, err
	}
	return h, cw.n, nil
}

// placeBackupFile moves the whole backup tmp to file. Without replace it
// links rather than renames: the link fails if file exists, with no moment
// between a check and the move. Where the filesystem has no hard links, it
// checks, then renames.
func placeBackupFile(tmp, file string, replace bool) error {
	if !replace {
		err := os.Link(tmp, file)
		switch {
		case err == nil:
			_ = os.Remove(tmp)
			return nil
		case errors.Is(err, fs.ErrExist):
			return errBackupExists(file)
		}
		if _, err := os.Lstat(file); err == nil {
			return errBackupExists(file)
		}
	}
	if err := os.Rename(tmp, file); err != nil {
		return fmt.Errorf("create backup file: %w", err)
	}
	return nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

func runRestore(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("restore", stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bmcisctl restore FILE")
		fmt.Fprintln(stderr, "  Restores a backup into an empty stack migrated to the backup's schema version (`bmcisctl migrate up`),")
		fmt.Fprintln(stderr, "  with the services stopped; start them afterwards. All or nothing: the whole file is checked first")
		fmt.Fprintln(stderr, "  (format, checksum, row counts), then the target (schema version, tables, empty), then it is written")
		fmt.Fprintln(stderr, "  in one transaction per database. A damaged or truncated file, one from a newer release, and a")
		fmt.Fprintln(stderr, "  target holding data are refused with nothing written.")
		fmt.Fprintf(stderr, databaseHelp, restoreDatabaseFrom)
	}
	output := outputFlag(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErrorf("restore takes exactly one FILE, got %d arguments", fs.NArg())
	}
	file := fs.Arg(0)
	if file == "-" {
		return usageErrorf("restore reads FILE twice (checks it whole, then writes it): give a file, not -")
	}
	st, err := os.Stat(file)
	if err != nil {
		return fmt.Errorf("read backup: %w", err)
	}
	if st.IsDir() {
		// Opening one succeeds and reading it fails, which the restore
		// would report as a damaged file.
		return fmt.Errorf("read backup: %s is a directory, not a backup file (bmcisctl backup FILE writes one)", file)
	}
	dbs, closeAll, err := openDatabases(ctx, envOr("DATABASE_URL", ""), restoreDatabaseFrom)
	if err != nil {
		return err
	}
	defer closeAll()
	start := time.Now()
	h, err := backup.Restore(ctx, func() (io.ReadCloser, error) {
		f, err := os.Open(file)
		if err != nil {
			return nil, fmt.Errorf("read backup: %w", err)
		}
		return f, nil
	}, dbs)
	if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == insufficientPrivilege {
		// The role cannot write (or lock) every table: the backup's
		// read-only login, say, which backup itself uses.
		return fmt.Errorf("%w: run restore as the migration role: set DATABASE_URL to it (as for migrate up), "+
			"not to %s's read-only login or a service's", err, migrations.BackupLoginURLEnv)
	}
	if err != nil {
		return err
	}
	res := newBackupResult("restore", file, h, st.Size(), time.Since(start))
	return writeResult(stdout, *output, res, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "restored %d tables (%d rows, schema version %d, made %s by release %s) from %s in %.1fs; start the services\n",
			res.Tables, res.Rows, res.SchemaVersion, res.CreatedAt, res.Release, file, res.Seconds)
		return err
	})
}
