package testdb

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bmcis/knowledge/migrations"
)

// AdminSearchPath is the search_path of the admin's connections to a test
// database: every service's schema, so fixtures name tables unqualified.
const AdminSearchPath = "search, vendorgraph, auth, public"

// LoginRole is the LOGIN role tests connect as for a service: one per
// service and server, shared by every test database (each grants the
// service's group role, through its template).
func LoginRole(svc migrations.Service) string { return "bmcis_test_" + string(svc) }

// loginsReady remembers the servers and services whose login role this
// process has set up already.
var loginsReady sync.Map // "host:port/service" -> true

// ServiceURL returns dbURL (an admin URL of a migrated database) as the
// service's own login role would connect, creating that role on the
// server first if needed. Its password is derived from the admin's, so it
// is stable across test processes and published nowhere.
func ServiceURL(t testing.TB, dbURL string, service string) string {
	t.Helper()
	u, err := ServiceURLErr(dbURL, service)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// ServiceURLErr is ServiceURL for callers without a test at hand.
func ServiceURLErr(dbURL, service string) (string, error) {
	svc, err := migrations.ParseService(service)
	if err != nil {
		return "", err
	}
	u, err := url.Parse(dbURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("testdb: service URL: %s must be a postgres:// URL", EnvURL)
	}
	adminPassword, _ := u.User.Password()
	sum := sha256.Sum256([]byte("bmcis-test-login\x00" + adminPassword + "\x00" + string(svc)))
	password := hex.EncodeToString(sum[:16])
	key := u.Host + "/" + string(svc)
	if _, ok := loginsReady.Load(key); !ok {
		if err := ensureLogin(dbURL, svc, password); err != nil {
			return "", err
		}
		loginsReady.Store(key, true)
	}
	u.User = url.UserPassword(LoginRole(svc), password)
	return u.String(), nil
}

// ensureLogin sets up the service's login role under an advisory lock on
// the server's postgres database: roles are server-wide, and test
// processes set them up concurrently.
func ensureLogin(dbURL string, svc migrations.Service, password string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adminURL, err := withDatabase(dbURL, "postgres")
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("testdb: connect to set up %s's login: %w", svc, err)
	}
	defer conn.Close(context.Background())
	const lockKey = 0x626d636973_0020 // "bmcis" 32
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lockKey); err != nil {
		return fmt.Errorf("testdb: lock logins: %w", err)
	}
	defer func() { _, _ = conn.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", lockKey) }()
	if err := migrations.EnsureServiceLogin(ctx, conn, svc, LoginRole(svc), password); err != nil {
		return fmt.Errorf("testdb: %w", err)
	}
	return nil
}
