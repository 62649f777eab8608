package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/migrations"
	"github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/platform/testdb"
)

// migrate up gives each login role the password of its URL: a published
// placeholder there (secret.example.yaml's CHANGE_ME-search) would become a
// database password anyone can read. Outside development it is refused,
// naming the variable and not the password, before any role is touched.
func TestMigrateUpRefusesPublishedLoginPasswords(t *testing.T) {
	_, adminURL := testdb.New(t)
	login := func(user, password string) string {
		u, err := url.Parse(adminURL)
		require.NoError(t, err)
		u.User = url.UserPassword(user, password)
		return u.String()
	}
	// Roles are the server's, not the database's: one of this run's own.
	role := fmt.Sprintf("bmcis_secrets_test_%d", time.Now().UnixNano())
	published := []struct{ env, password string }{
		{migrations.Search.LoginURLEnv(), "CHANGE_ME-search"}, // deploy/k8s/secret.example.yaml
		{migrations.Auth.LoginURLEnv(), "dev-only-insecure-auth"},
		{migrations.BackupLoginURLEnv, "change-me-backup-0123456789abcdef"},
		{migrations.VendorGraph.LoginURLEnv(), "PASSWORD"}, // docs/DEPLOY.md's example URL
	}
	for _, tc := range published {
		t.Run(tc.env, func(t *testing.T) {
			t.Setenv("DATABASE_URL", adminURL)
			t.Setenv(tc.env, login(role, tc.password))
			code, out, errOut := ctlRun(t, "migrate", "up")
			require.Equal(t, exitUsage, code, "stdout: %s\nstderr: %s", out, errOut)
			require.True(t, strings.HasPrefix(errOut, "bmcisctl migrate: invalid configuration:\n"),
				"a configuration error, not a usage one: %s", errOut)
			require.NotContains(t, errOut, "usage")
			require.Contains(t, errOut, tc.env+": its password is a published placeholder")
			require.NotContains(t, errOut, tc.password)

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			conn, err := pgx.Connect(ctx, login(role, tc.password))
			if err == nil {
				conn.Close(ctx)
			}
			require.Error(t, err, "no role logs in with the published password")
		})
	}

	// The published migration role's password is refused the same way.
	t.Setenv("DATABASE_URL", login("postgres", "CHANGE_ME"))
	code, _, errOut := ctlRun(t, "migrate", "status")
	require.Equal(t, exitUsage, code, errOut)
	require.Equal(t, "bmcisctl migrate: invalid configuration:\n  DATABASE_URL: its password is a published placeholder; "+
		"use a generated one (openssl rand -hex 32), or set "+config.EnvAllowInsecureSecrets+"=true on a development machine\n", errOut)

	// The development switch lets the dev overlay's values through.
	t.Setenv("DATABASE_URL", adminURL)
	t.Setenv(config.EnvAllowInsecureSecrets, "true")
	t.Setenv(migrations.Search.LoginURLEnv(), login(role, "dev-only-insecure-search"))
	code, out, errOut := ctlRun(t, "migrate", "up")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "search: login role set up from "+migrations.Search.LoginURLEnv())
}

// migrate down refuses to drop tables holding rows unless --yes, naming
// them with their row counts; the rows the migrations seed (state rows,
// default tiers) do not count, so an empty stack rolls back unasked.
func TestMigrateDownRefusesToDropDataUnlessYes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, url := testdb.New(t)
	t.Setenv("DATABASE_URL", url)
	_, err := pool.Exec(ctx, `INSERT INTO vendorgraph.entities (id, name, normalized_name, entity_type, confidence, record_hash)
		VALUES (gen_random_uuid(), 'Acme', 'acme', 'vendor', 1, '\x00'), (gen_random_uuid(), 'Globex', 'globex', 'vendor', 1, '\x01')`)
	require.NoError(t, err)

	code, out, errOut := ctlRun(t, "migrate", "down", "0")
	require.Equal(t, exitUsage, code, errOut)
	require.Empty(t, out)
	require.Contains(t, errOut, "vendorgraph.entities (2 rows)")
	require.Contains(t, errOut, "--yes")
	require.NotContains(t, errOut, "search_state", "seeded rows are not data")
	var n int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM vendorgraph.entities").Scan(&n))
	require.Equal(t, 2, n, "nothing dropped")

	code, out, errOut = ctlRun(t, "migrate", "down", "0", "--yes")
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "schema version 0")

	// Migrated again and empty, it rolls back without asking.
	code, _, errOut = ctlRun(t, "migrate", "up")
	require.Equal(t, exitOK, code, errOut)
	code, _, errOut = ctlRun(t, "migrate", "down", "0")
	require.Equal(t, exitOK, code, errOut)
}
