// Package testdb gives each test its own migrated PostgreSQL database on the
// real server named by BMCIS_TEST_DATABASE_URL (`make test` sets it up). A
// migrated template database is built once per schema version, so a new test
// database is a fast file copy rather than a fresh migration.
package testdb

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bmcis/knowledge/migrations"
	"github.com/bmcis/knowledge/platform/pg"
)

// EnvURL names the variable holding an admin connection URL for tests.
const EnvURL = "BMCIS_TEST_DATABASE_URL"

// AdminURL returns the test server's admin URL or fails the test with the fix.
func AdminURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(EnvURL)
	if u == "" {
		t.Fatalf("%s is not set: run `make test`, or start the local database with "+
			"`deploy/local/db.sh start` and export the URL it prints", EnvURL)
	}
	return u
}

// New creates an empty, fully migrated database for this test, returns a pool
// on it (pgvector types registered) and its URL, and drops it when the test ends.
func New(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := AdminURL(t)

	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("connect to test server: %v", err)
	}
	defer conn.Close(ctx)

	tmpl, err := ensureTemplate(ctx, conn, admin)
	if err != nil {
		t.Fatalf("prepare template database: %v", err)
	}
	name := "bmcis_test_" + randomSuffix()
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{tmpl}.Sanitize()); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	// Fixtures and checks connect as the admin and name tables unqualified:
	// they see every service's schema. Services connect as their own roles
	// (ServiceURL), whose search_path is their schema alone.
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{name}.Sanitize()+" SET search_path = "+AdminSearchPath); err != nil {
		t.Fatalf("set test database search_path: %v", err)
	}
	url, err := withDatabase(admin, name)
	if err != nil {
		t.Fatalf("test database URL: %v", err)
	}
	pool, err := pg.Connect(ctx, pg.Config{URL: url, MaxConns: 8, ConnectTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("connect to test database: %v", err)
	}
	t.Cleanup(func() {
		pool.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Errorf("drop test database: %v", err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("drop test database: %v", err)
		}
	})
	return pool, url
}

// NewEmpty creates an empty database with no migrations applied, for tests of
// the migrations themselves.
func NewEmpty(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := AdminURL(t)
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("connect to test server: %v", err)
	}
	defer conn.Close(ctx)
	name := "bmcis_test_" + randomSuffix()
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Errorf("drop test database: %v", err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("drop test database: %v", err)
		}
	})
	url, err := withDatabase(admin, name)
	if err != nil {
		t.Fatalf("test database URL: %v", err)
	}
	return url
}

// ensureTemplate builds the migrated template for the current migration files
// once; an advisory lock keeps parallel test binaries from racing.
func ensureTemplate(ctx context.Context, conn *pgx.Conn, admin string) (string, error) {
	name, err := templateName()
	if err != nil {
		return "", err
	}
	const lockKey = 0x626d636973 // "bmcis"
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lockKey); err != nil {
		return "", fmt.Errorf("lock: %w", err)
	}
	defer func() { _, _ = conn.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", lockKey) }()

	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", fmt.Errorf("look up template: %w", err)
	}
	if exists {
		return name, nil
	}
	building := name + "_building"
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{building}.Sanitize()+" WITH (FORCE)"); err != nil {
		return "", fmt.Errorf("drop stale template: %w", err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{building}.Sanitize()); err != nil {
		return "", fmt.Errorf("create template: %w", err)
	}
	url, err := withDatabase(admin, building)
	if err != nil {
		return "", err
	}
	pool, err := pg.ConnectRaw(ctx, url)
	if err != nil {
		return "", err
	}
	_, err = migrations.Up(ctx, pool)
	pool.Close()
	if err != nil {
		return "", err
	}
	// Renamed only once complete, so a crash never leaves a half-built template.
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{building}.Sanitize()+" RENAME TO "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("publish template: %w", err)
	}
	return name, nil
}

// templateName changes whenever a migration file or the embedding dimension does.
func templateName() (string, error) {
	dims, err := migrations.Dimensions()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "dims=%d\n", dims)
	fsys := migrations.FS()
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return "", err
	}
	sort.Strings(names)
	for _, n := range names {
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\n%s\n", n, b)
	}
	return "bmcis_tmpl_" + hex.EncodeToString(h.Sum(nil))[:16], nil
}

// withDatabase points a connection URL (postgres://...) or a key=value
// connection string at another database.
func withDatabase(conn, db string) (string, error) {
	if strings.HasPrefix(conn, "postgres://") || strings.HasPrefix(conn, "postgresql://") {
		u, err := url.Parse(conn)
		if err != nil {
			return "", fmt.Errorf("parse %s: %w", EnvURL, err)
		}
		u.Path = "/" + db
		return u.String(), nil
	}
	// In key=value strings the last occurrence of a key wins.
	return conn + " dbname=" + db, nil
}

func randomSuffix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
