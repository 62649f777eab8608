package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bmcis/knowledge/migrations"
	"github.com/bmcis/knowledge/platform/backup"
	"github.com/bmcis/knowledge/platform/pg"
)

func init() {
	commands["migrate"] = command{
		summary:  "apply (up), roll back (down VERSION) or show (status) the schema; uses DATABASE_URL",
		run:      runMigrate,
		complete: subcommands("up", "down", "status"),
	}
}

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("migrate", stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bmcisctl migrate up | down VERSION [--yes] | status")
		fmt.Fprintln(stderr, "  down rolls back to VERSION, at most the current version (0 drops every table: all data). It refuses")
		fmt.Fprintln(stderr, "  to drop tables holding rows, naming them and their row counts, unless --yes (back up first: bmcisctl backup).")
		fmt.Fprintln(stderr, "  DATABASE_URL names the database; BMCIS_EMBEDDING_DIMENSIONS fixes the vector size (default 256).")
		fmt.Fprintln(stderr, "  up also sets up each service's login role from BMCIS_SEARCH_DATABASE_URL, BMCIS_VENDORGRAPH_DATABASE_URL")
		fmt.Fprintln(stderr, "  and BMCIS_AUTH_DATABASE_URL, when set (user, password; member of the service's group role),")
		fmt.Fprintln(stderr, "  and the backup's read-only login role from BMCIS_BACKUP_DATABASE_URL, when set (docs/BACKUP.md).")
	}
	yes := fs.Bool("yes", false, "down: drop tables holding rows (refused without it)")
	output := outputFlag(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	// The whole command line is checked before the database is touched.
	rest := fs.Args()
	action := "up"
	if len(rest) > 0 {
		action, rest = rest[0], rest[1:]
	}
	target := int64(-1)
	switch action {
	case "up", "status":
		if len(rest) != 0 {
			return usageErrorf("migrate %s takes no arguments, got %q", action, strings.Join(rest, " "))
		}
	case "down":
		// No default: a bare "down" would roll back to 0 and drop all data.
		if len(rest) != 1 {
			return usageErrorf("migrate down needs exactly one VERSION to roll back to (see migrate status; 0 drops all data)")
		}
		v, err := strconv.ParseInt(rest[0], 10, 64)
		if err != nil || v < 0 {
			return usageErrorf("VERSION must be a non-negative integer, got %q", rest[0])
		}
		target = v
	default:
		return usageErrorf("unknown migrate action %q (want up, down VERSION or status)", action)
	}
	url := envOr("DATABASE_URL", "")
	if url == "" {
		return usageErrorf("DATABASE_URL is not set")
	}
	if err := refusePublishedPasswords(); err != nil {
		return err
	}
	pool, err := pg.ConnectRaw(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()

	switch action {
	case "up":
		applied, err := migrations.Up(ctx, pool)
		if err != nil {
			return err
		}
		current, _, err := migrations.Status(ctx, pool)
		if err != nil {
			return err
		}
		// Each service's own login role, from its URL (docs/DEPLOY.md, "Database roles").
		logins, err := migrations.EnsureServiceLogins(ctx, pool, pool.Config().ConnConfig.User, func(name string) string { return envOr(name, "") })
		if err != nil {
			return err
		}
		backupLogin, err := migrations.EnsureBackupLoginFrom(ctx, pool, pool.Config().ConnConfig.User, func(name string) string { return envOr(name, "") })
		if err != nil {
			return err
		}
		res := migrateResult{Action: action, Migrations: applied, SchemaVersion: current, LoginRoles: []string{}}
		for _, svc := range logins {
			res.LoginRoles = append(res.LoginRoles, fmt.Sprint(svc))
		}
		if backupLogin {
			res.LoginRoles = append(res.LoginRoles, "backup")
		}
		return writeResult(stdout, *output, res, func(w io.Writer) error {
			fmt.Fprintf(w, "applied %d migration(s); schema version %d\n", len(applied), current)
			for _, svc := range logins {
				fmt.Fprintf(w, "%s: login role set up from %s\n", svc, svc.LoginURLEnv())
			}
			if backupLogin {
				fmt.Fprintf(w, "backup: read-only login role set up from %s\n", migrations.BackupLoginURLEnv)
			}
			return nil
		})
	case "down":
		current, _, err := migrations.Status(ctx, pool)
		if err != nil {
			return err
		}
		if target > current {
			return usageErrorf("the schema is at version %d: down rolls back to a VERSION at most that, got %d", current, target)
		}
		if !*yes {
			full, err := tablesDownWouldEmpty(ctx, pool, current, target)
			if err != nil {
				return err
			}
			if len(full) > 0 {
				return usageErrorf("migrate down %d would drop tables holding rows: %s; nothing was done. "+
					"Back them up first (bmcisctl backup FILE), then run it again with --yes", target, strings.Join(full, ", "))
			}
		}
		rolled, err := migrations.DownTo(ctx, pool, target)
		if err != nil {
			return err
		}
		if current, _, err = migrations.Status(ctx, pool); err != nil {
			return err
		}
		res := migrateResult{Action: action, Migrations: rolled, SchemaVersion: current}
		return writeResult(stdout, *output, res, func(w io.Writer) error {
			_, err := fmt.Fprintf(w, "rolled back %d migration(s); schema version %d\n", len(rolled), current)
			return err
		})
	case "status":
		current, pending, err := migrations.Status(ctx, pool)
		if err != nil {
			return err
		}
		res := migrateResult{Action: action, SchemaVersion: current, Pending: &pending}
		return writeResult(stdout, *output, res, func(w io.Writer) error {
			_, err := fmt.Fprintf(w, "schema version %d; pending migrations: %t\n", current, pending)
			return err
		})
	}
	return nil
}

// migrateResult is what a migrate action did or found, as -o json|yaml
// shows it: the versions applied (up) or rolled back (down).
type migrateResult struct {
	Action        string   `json:"action"`
	Migrations    []int64  `json:"migrations,omitempty"`
	SchemaVersion int64    `json:"schema_version"`
	Pending       *bool    `json:"pending,omitempty"`
	LoginRoles    []string `json:"login_roles,omitempty"`
}

// refusePublishedPasswords refuses, outside development, a published
// placeholder as the password of the migration role's URL or of a login
// URL: up would make the latter a database password anyone can read
// (platform/config's check, the services' own). Nothing is touched first.
func refusePublishedPasswords() error {
	env := cliEnv()
	names := []string{"DATABASE_URL"}
	for _, svc := range migrations.Services {
		names = append(names, svc.LoginURLEnv())
	}
	names = append(names, migrations.BackupLoginURLEnv)
	for _, name := range names {
		v := env.String(name, "")
		if v == "" {
			continue
		}
		// A URL that does not parse is refused where it is used, by name.
		if cfg, err := pgconn.ParseConfig(v); err == nil {
			env.URLPassword(name, cfg.Password)
		}
	}
	return env.Err()
}

var (
	// What a migration's Down section drops: tables by name (qualified or
	// not: a migration before the schema split names them unqualified, and
	// the split's own Down moves them back first), and whole schemas.
	downDropTable  = regexp.MustCompile(`(?i)\bDROP\s+TABLE\s+(?:IF\s+EXISTS\s+)?([a-z0-9_."]+(?:\s*,\s*[a-z0-9_."]+)*)`)
	downDropSchema = regexp.MustCompile(`(?i)\bDROP\s+SCHEMA\s+(?:IF\s+EXISTS\s+)?([a-z0-9_"]+)`)
	migrationFile  = regexp.MustCompile(`^(\d+)_.*\.sql$`)
)

// tablesDownWouldEmpty lists the tables a rollback from current to target
// drops that hold rows an operator put there (the migrations' seeded rows
// left out), as "schema.table (N rows)". It reads the Down sections of the
// migrations rolled back; table names are unique across the schemas, so a
// name identifies a table wherever it lives now.
func tablesDownWouldEmpty(ctx context.Context, pool *pgxpool.Pool, current, target int64) ([]string, error) {
	files, err := fs.ReadDir(migrations.FS(), ".")
	if err != nil {
		return nil, fmt.Errorf("read the migrations: %w", err)
	}
	var names, schemas []string
	for _, f := range files {
		m := migrationFile.FindStringSubmatch(f.Name())
		if m == nil {
			continue
		}
		v, _ := strconv.ParseInt(m[1], 10, 64)
		if v <= target || v > current {
			continue
		}
		b, err := fs.ReadFile(migrations.FS(), f.Name())
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", f.Name(), err)
		}
		_, down, _ := strings.Cut(string(b), "-- +goose Down")
		for _, d := range downDropTable.FindAllStringSubmatch(down, -1) {
			for _, n := range strings.Split(d[1], ",") {
				n = strings.Trim(strings.TrimSpace(n), `"`)
				names = append(names, n[strings.LastIndex(n, ".")+1:])
			}
		}
		for _, d := range downDropSchema.FindAllStringSubmatch(down, -1) {
			schemas = append(schemas, strings.Trim(d[1], `"`))
		}
	}
	if len(names) == 0 && len(schemas) == 0 {
		return nil, nil
	}
	rows, err := pool.Query(ctx, `SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition
		  AND n.nspname IN ('public', 'search', 'vendorgraph', 'auth')
		  AND (c.relname = ANY($1) OR n.nspname = ANY($2))
		ORDER BY 1, 2`, names, schemas)
	if err != nil {
		return nil, fmt.Errorf("list the tables down drops: %w", err)
	}
	tables, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var schema, name string
		err := r.Scan(&schema, &name)
		return pgx.Identifier{schema, name}.Sanitize(), err
	})
	if err != nil {
		return nil, fmt.Errorf("list the tables down drops: %w", err)
	}
	var full []string
	for _, t := range tables {
		plain := strings.ReplaceAll(t, `"`, "")
		if backup.Seeded(plain) {
			continue
		}
		var n int64
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+t).Scan(&n); err != nil {
			return nil, fmt.Errorf("count the rows of %s: %w", plain, err)
		}
		if n > 0 {
			full = append(full, fmt.Sprintf("%s (%d rows)", plain, n))
		}
	}
	return full, nil
}
