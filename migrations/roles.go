package migrations

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Service is a service that owns a schema of the database.
type Service string

// The services and their schemas (00012_service_schemas.sql).
const (
	Search      Service = "search"
	VendorGraph Service = "vendorgraph"
	Auth        Service = "auth"
)

// Services lists every service that owns a schema.
var Services = []Service{Search, VendorGraph, Auth}

// Schema is the schema holding the service's tables.
func (s Service) Schema() string { return string(s) }

// GroupRole is the NOLOGIN role the migrations grant the service's schema
// to; a deployment makes the service's LOGIN role a member of it.
func (s Service) GroupRole() string { return "bmcis_" + string(s) }

// SearchPath is the service's search_path: its own schema, then public for
// the extensions' types and functions (vector, pg_trgm).
func (s Service) SearchPath() string { return string(s) + ", public" }

// ParseService returns the service of a name.
func ParseService(name string) (Service, error) {
	s := Service(name)
	if !slices.Contains(Services, s) {
		return "", fmt.Errorf("unknown service %q (one of search, vendorgraph, auth)", name)
	}
	return s, nil
}

// Execer is a connection, a pool or a transaction.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// EnsureServiceLogin makes login a LOGIN role with password that is a
// member of the service's group role and starts in the service's schema:
// created when missing, its password and settings set again when present.
// It runs as the migration role (CREATEROLE, or a superuser), after
// `migrate up` created the group roles. The login is refused superuser,
// database and role creation whatever it had.
func EnsureServiceLogin(ctx context.Context, db Execer, svc Service, login, password string) error {
	if _, err := ParseService(string(svc)); err != nil {
		return err
	}
	return ensureLogin(ctx, db, svc.GroupRole(), svc.SearchPath(), login, password)
}

// BackupRole is the NOLOGIN role that reads every service schema and
// writes nothing (00018_backup_role.sql): what `bmcisctl backup` needs.
const BackupRole = "bmcis_backup"

// BackupLoginURLEnv names the variable with the backup's own database URL:
// `bmcisctl migrate up` sets up its login role from it, and `bmcisctl
// backup` connects with it (docs/BACKUP.md).
const BackupLoginURLEnv = "BMCIS_BACKUP_DATABASE_URL"

// EnsureBackupLogin is EnsureServiceLogin for the backup's login: a member
// of BackupRole, starting in every service schema.
func EnsureBackupLogin(ctx context.Context, db Execer, login, password string) error {
	return ensureLogin(ctx, db, BackupRole, "search, vendorgraph, auth, public", login, password)
}

func ensureLogin(ctx context.Context, db Execer, group, searchPath, login, password string) error {
	if login == "" || password == "" {
		return errors.New("ensure login role: login and password must be set")
	}
	role := pgx.Identifier{login}.Sanitize()
	// PASSWORD takes no bind parameter, and a statement can reach the
	// server's log (log_statement, or an error such as duplicate_object).
	// So the server is sent a SCRAM verifier computed here, as psql's
	// \password does, never the password; and CREATE ROLE runs only when
	// the role is missing, so a second run makes no failing statement.
	verifier, err := scramVerifier(password)
	if err != nil {
		return fmt.Errorf("ensure login role %s: %w", login, err)
	}
	pw := quoteLiteral(verifier)
	var exists bool
	if err := db.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)", login).Scan(&exists); err != nil {
		return fmt.Errorf("look up login role %s: %s", login, redact(err))
	}
	if !exists {
		_, err := db.Exec(ctx, "CREATE ROLE "+role+" LOGIN PASSWORD "+pw)
		var pgErr *pgconn.PgError
		// duplicate_object: another migrate up created it meanwhile.
		if err != nil && !(errors.As(err, &pgErr) && pgErr.Code == "42710") {
			return fmt.Errorf("create login role %s: %s", login, redact(err))
		}
	}
	stmts := []string{
		"ALTER ROLE " + role + " LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS INHERIT PASSWORD " + pw,
		"GRANT " + pgx.Identifier{group}.Sanitize() + " TO " + role,
		"ALTER ROLE " + role + " SET search_path = " + searchPath,
	}
	for _, s := range stmts {
		if _, err := db.Exec(ctx, s); err != nil {
			return fmt.Errorf("set up login role %s: %s", login, redact(err))
		}
	}
	return nil
}

// redact keeps a server error's message and code, never the statement
// (which carries the password).
func redact(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Message + " (SQLSTATE " + pgErr.Code + ")"
	}
	return "statement failed"
}

func quoteLiteral(s string) string {
	out := []byte{'\''}
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			out = append(out, '\'')
		}
		out = append(out, s[i])
	}
	return string(append(out, '\''))
}

// LoginURLEnv names the variable holding the service's own database URL
// (BMCIS_SEARCH_DATABASE_URL, ...): the service is given it as its
// DATABASE_URL, and `bmcisctl migrate up` sets up its login role from it.
func (s Service) LoginURLEnv() string { return loginURLEnv[s] }

// loginURLEnv is written out so that each name can be found as it is set.
var loginURLEnv = map[Service]string{
	Search:      "BMCIS_SEARCH_DATABASE_URL",
	VendorGraph: "BMCIS_VENDORGRAPH_DATABASE_URL",
	Auth:        "BMCIS_AUTH_DATABASE_URL",
}

// EnsureServiceLogins sets up the login role of every service whose URL
// getenv returns (LoginURLEnv), with that URL's user and password, and
// returns the services it set up. A URL connecting as the migration role
// itself is refused: a service must not hold the DDL's credential.
func EnsureServiceLogins(ctx context.Context, db Execer, migrationUser string, getenv func(string) string) ([]Service, error) {
	type login struct {
		svc            Service
		user, password string
	}
	var logins []login
	seen := map[string]Service{}
	// Every URL is checked before any role is touched.
	for _, svc := range Services {
		v := getenv(svc.LoginURLEnv())
		if v == "" {
			continue
		}
		cfg, err := pgconn.ParseConfig(v)
		if err != nil {
			return nil, fmt.Errorf("%s: not a PostgreSQL connection URL", svc.LoginURLEnv())
		}
		switch other, dup := seen[cfg.User]; {
		case cfg.User == migrationUser:
			return nil, fmt.Errorf("%s connects as the migration role %s: give the service a role of its own", svc.LoginURLEnv(), migrationUser)
		case dup:
			return nil, fmt.Errorf("%s and %s name the same role %s: each service needs its own", other.LoginURLEnv(), svc.LoginURLEnv(), cfg.User)
		case cfg.Password == "":
			return nil, fmt.Errorf("%s has no password: the service's role gets the one it names", svc.LoginURLEnv())
		}
		seen[cfg.User] = svc
		logins = append(logins, login{svc, cfg.User, cfg.Password})
	}
	var done []Service
	for _, l := range logins {
		if err := EnsureServiceLogin(ctx, db, l.svc, l.user, l.password); err != nil {
			return done, err
		}
		done = append(done, l.svc)
	}
	return done, nil
}

// EnsureBackupLoginFrom sets up the backup's login role from the URL in
// BackupLoginURLEnv (getenv), when set, and reports whether it did. Like a
// service's, it must be a role of its own: not the migration role, not a
// service's.
func EnsureBackupLoginFrom(ctx context.Context, db Execer, migrationUser string, getenv func(string) string) (bool, error) {
	v := getenv(BackupLoginURLEnv)
	if v == "" {
		return false, nil
	}
	cfg, err := pgconn.ParseConfig(v)
	if err != nil {
		return false, fmt.Errorf("%s: not a PostgreSQL connection URL", BackupLoginURLEnv)
	}
	switch {
	case cfg.User == migrationUser:
		return false, fmt.Errorf("%s connects as the migration role %s: give the backup a read-only role of its own", BackupLoginURLEnv, migrationUser)
	case cfg.Password == "":
		return false, fmt.Errorf("%s has no password: the backup's role gets the one it names", BackupLoginURLEnv)
	}
	for _, svc := range Services {
		if u := getenv(svc.LoginURLEnv()); u != "" {
			if sc, err := pgconn.ParseConfig(u); err == nil && sc.User == cfg.User {
				return false, fmt.Errorf("%s and %s name the same role %s: the backup needs its own", svc.LoginURLEnv(), BackupLoginURLEnv, cfg.User)
			}
		}
	}
	if err := EnsureBackupLogin(ctx, db, cfg.User, cfg.Password); err != nil {
		return false, err
	}
	return true, nil
}

// Grant is what a service's role holds on a table of its schema that it
// does not own: table privileges, plus UPDATE of some columns only.
type Grant struct {
	Privileges    []string
	UpdateColumns []string
}

// NotOwned are the tables of the service schemas that belong to the
// migration role rather than to their service's group, each with exactly
// what the service's role holds on it: what its SQL uses, nothing more
// (00016_audit_events.sql, 00020_least_privilege.sql). Every other table
// of a service schema is its service group's: search's, which rebuilds
// its indexes and VACUUMs them as their owner.
var NotOwned = map[string]Grant{
	// Keys are created, read, revoked, expired (rotation) and stamped
	// with their last use; their digest, scopes and groups never change.
	"auth.api_keys":       {Privileges: []string{"SELECT", "INSERT"}, UpdateColumns: []string{"expires_at", "last_used_at", "revoked_at"}},
	"auth.api_key_limits": {Privileges: []string{"SELECT", "INSERT"}},
	// Read by foreign key checks only, which run as the table's owner.
	"auth.rate_limit_tiers": {},
	// The audit trail is append-only for auth.
	"auth.audit_events": {Privileges: []string{"SELECT", "INSERT"}},
	// An import upserts entities and relationships and replaces a changed
	// vendor's aliases; nothing is deleted from the graph.
	"vendorgraph.entities":       {Privileges: []string{"SELECT", "INSERT", "UPDATE"}},
	"vendorgraph.relationships":  {Privileges: []string{"SELECT", "INSERT", "UPDATE"}},
	"vendorgraph.vendor_aliases": {Privileges: []string{"SELECT", "INSERT", "DELETE"}},
}
