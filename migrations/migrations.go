// Package migrations holds the versioned SQL schema and applies it with goose.
//
// The embedding column's dimension is fixed per deployment: the SQL reads it
// from BMCIS_EMBEDDING_DIMENSIONS (default 256) when a migration first runs.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/platform/pg"
)

//go:embed *.sql
var sqlFiles embed.FS

// DimensionsEnv names the variable that fixes the embedding column's size.
const DimensionsEnv = "BMCIS_EMBEDDING_DIMENSIONS"

// DefaultDimensions is the embedding size when DimensionsEnv is unset.
const DefaultDimensions = 256

// VersionTable is goose's record of the applied migrations.
const VersionTable = "public.goose_db_version"

// FS returns the embedded migration files.
func FS() fs.FS { return sqlFiles }

// Dimensions returns the embedding dimension the migrations will use, or an
// error naming the variable when it is not a valid size (pgvector's HNSW
// index takes at most 2,000 dimensions).
func Dimensions() (int, error) {
	v, ok := os.LookupEnv(DimensionsEnv)
	if !ok || v == "" {
		return DefaultDimensions, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 2000 {
		return 0, fmt.Errorf("%s: must be an integer from 1 to 2000, got %q", DimensionsEnv, v)
	}
	return n, nil
}

// LatestVersion is the newest migration this build holds: the schema
// version `migrate up` leads to.
func LatestVersion() (int64, error) {
	entries, err := fs.ReadDir(sqlFiles, ".")
	if err != nil {
		return 0, fmt.Errorf("list migrations: %w", err)
	}
	var latest int64
	for _, e := range entries {
		prefix, _, ok := strings.Cut(e.Name(), "_")
		if !ok || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		v, err := strconv.ParseInt(prefix, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("migration %s: no version number", e.Name())
		}
		latest = max(latest, v)
	}
	return latest, nil
}

// lockConflictRetries is how many more times Up runs a migration that lost
// a deadlock or a lock wait to the live services' writes, after
// lockConflictBackoff doubling: a migration's ALTERs take their tables one
// after another while the previous release keeps writing (a rolling
// upgrade), and PostgreSQL may pick the migration as the deadlock's victim.
const (
	lockConflictRetries = 5
	lockConflictBackoff = 200 * time.Millisecond
)

// Up applies every pending migration and returns the versions applied. A
// migration that loses to a concurrent transaction's locks is run again:
// a transactional one was rolled back whole, and those outside a
// transaction (00021) are written to be run again.
func Up(ctx context.Context, pool *pgxpool.Pool) ([]int64, error) {
	p, db, err := provider(pool)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var applied []int64
	wait := lockConflictBackoff
	for attempt := 0; ; attempt++ {
		results, err := p.Up(ctx)
		applied = append(applied, versions(results)...)
		if err == nil {
			return applied, nil
		}
		var partial *goose.PartialError
		if errors.As(err, &partial) {
			applied = append(applied, versions(partial.Applied)...)
		}
		if attempt == lockConflictRetries || !pg.IsLockConflict(err) {
			return applied, fmt.Errorf("migrate up: %w", err)
		}
		select {
		case <-ctx.Done():
			return applied, fmt.Errorf("migrate up: %w", err)
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// DownTo rolls back every migration above version (0 rolls back everything).
func DownTo(ctx context.Context, pool *pgxpool.Pool, version int64) ([]int64, error) {
	p, db, err := provider(pool)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	results, err := p.DownTo(ctx, version)
	if err != nil {
		return nil, fmt.Errorf("migrate down to %d: %w", version, err)
	}
	return versions(results), nil
}

// Status reports the current version and whether migrations are pending.
func Status(ctx context.Context, pool *pgxpool.Pool) (current int64, pending bool, err error) {
	p, db, err := provider(pool)
	if err != nil {
		return 0, false, err
	}
	defer db.Close()
	current, err = p.GetDBVersion(ctx)
	if err != nil {
		return 0, false, fmt.Errorf("read schema version: %w", err)
	}
	pending, err = p.HasPending(ctx)
	if err != nil {
		return 0, false, fmt.Errorf("check pending migrations: %w", err)
	}
	return current, pending, nil
}

func provider(pool *pgxpool.Pool) (*goose.Provider, *sql.DB, error) {
	if _, err := Dimensions(); err != nil {
		return nil, nil, err
	}
	db := stdlib.OpenDBFromPool(pool)
	// Named with its schema: a session whose search_path starts elsewhere
	// (a service role's, or the database default after 00012) still finds it.
	p, err := goose.NewProvider(goose.DialectPostgres, db, sqlFiles, goose.WithTableName(VersionTable))
	if err != nil {
		_ = db.Close()
		return nil, nil, fmt.Errorf("load migrations: %w", err)
	}
	return p, db, nil
}

func versions(results []*goose.MigrationResult) []int64 {
	out := make([]int64, 0, len(results))
	for _, r := range results {
		if r.Error != nil {
			continue
		}
		out = append(out, r.Source.Version)
	}
	return out
}

// RequireCurrent fails when migrations are pending, with the command that
// fixes it, so a service never runs against a schema it does not expect.
func RequireCurrent(ctx context.Context, pool *pgxpool.Pool) error {
	current, pending, err := Status(ctx, pool)
	if err != nil {
		return err
	}
	if pending {
		return fmt.Errorf("database schema is at version %d and migrations are pending: run `bmcisctl migrate up`", current)
	}
	return nil
}

// Connect opens a service's pool (pgvector types registered) and refuses a
// database whose schema has pending migrations, naming the command that fixes it.
func Connect(ctx context.Context, c pg.Config) (*pgxpool.Pool, error) {
	pool, err := pg.Connect(ctx, c)
	if err != nil {
		return nil, err
	}
	if err := RequireCurrent(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("check schema: %w", err)
	}
	return pool, nil
}

// ConnectService is Connect for svc: it also refuses a role that could
// reach past the service's own schema: a superuser, one that creates roles
// or databases, or one that is not a member of exactly svc's group among the
// service and backup groups (the migration role is a member of every group;
// another service's login is not of svc's). With c.AllowPrivileged
// (development) it connects anyway and logs one warning saying so.
func ConnectService(ctx context.Context, c pg.Config, svc Service, log *slog.Logger) (*pgxpool.Pool, error) {
	if _, err := ParseService(string(svc)); err != nil {
		return nil, err
	}
	// The role is checked on a plain connection before the pool, whose
	// connections need the migrated schema (the vector type): a superuser
	// URL of a database not yet migrated must be refused as privileged,
	// not sent to run `bmcisctl migrate` with it.
	user, why, fix, err := checkServiceRole(ctx, c, svc)
	if err != nil {
		return nil, err
	}
	if c.AllowPrivileged {
		// The role's name and what is wrong with it; never the URL.
		attrs := []any{"role", user}
		if why != "" {
			attrs = append(attrs, "refused_without_it", why)
		}
		log.Warn(pg.EnvAllowPrivilegedLogin+" is set: the database role is not held to the service's own (development only)", attrs...)
	} else if why != "" {
		// An operator who relied on the secrets switch, which allowed this
		// until it was split (docs/UPGRADE.md), is told it changed.
		var changed string
		if c.InsecureSecretsAllowed {
			changed = " (" + config.EnvAllowInsecureSecrets + " no longer allows this)"
		}
		return nil, fmt.Errorf("%s: %s, or set %s=true on a development machine%s", why, fix, pg.EnvAllowPrivilegedLogin, changed)
	}
	return Connect(ctx, c)
}

// checkServiceRole connects once, without the pool's type registration, and
// returns the login's name and, when it reaches past svc's own schema, what
// is wrong with it (why) and what a deployment does about it (fix); both are
// empty when the role is svc's own.
func checkServiceRole(ctx context.Context, c pg.Config, svc Service) (user, why, fix string, err error) {
	cc, err := pgx.ParseConfig(c.URL)
	if err != nil {
		return "", "", "", errors.New("parse DATABASE_URL: not a valid PostgreSQL connection string")
	}
	if c.ConnectTimeout > 0 {
		cc.ConnectTimeout = c.ConnectTimeout
	}
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return "", "", "", fmt.Errorf("connect to database: %w", err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	groups := []string{BackupRole}
	for _, s := range Services {
		groups = append(groups, s.GroupRole())
	}
	var privileged bool
	var memberOf []string
	if err := conn.QueryRow(ctx, `SELECT current_user, rolsuper OR rolcreaterole OR rolcreatedb OR rolbypassrls,
			ARRAY(SELECT g FROM unnest($1::text[]) AS g
			      WHERE EXISTS (SELECT 1 FROM pg_roles WHERE rolname = g) AND pg_has_role(current_user, g, 'MEMBER') ORDER BY g)
		FROM pg_roles WHERE rolname = current_user`, groups).Scan(&user, &privileged, &memberOf); err != nil {
		return "", "", "", fmt.Errorf("check database role: %w", err)
	}
	var others []string
	for _, g := range memberOf {
		if g != svc.GroupRole() {
			others = append(others, g)
		}
	}
	switch {
	case privileged:
		why = fmt.Sprintf("DATABASE_URL connects as %s, a superuser or a role that creates roles or databases", user)
		fix = "give the service its own role (docs/DEPLOY.md, \"Database roles\")"
	case !slices.Contains(memberOf, svc.GroupRole()):
		why = fmt.Sprintf("DATABASE_URL connects as %s, which is not a member of %s", user, svc.GroupRole())
		fix = fmt.Sprintf("give the %s service its own login (bmcisctl migrate up, from %s)", svc, svc.LoginURLEnv())
	case len(others) > 0:
		why = fmt.Sprintf("DATABASE_URL connects as %s, which is a member of %s too", user, strings.Join(others, ", "))
		fix = fmt.Sprintf("give the %s service a role of its own, a member of %s only (docs/DEPLOY.md, \"Database roles\")",
			svc, svc.GroupRole())
	}
	return user, why, fix, nil
}
