package pg_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/platform/deadaddr"
	"github.com/bmcis/knowledge/platform/pg"
	"github.com/bmcis/knowledge/platform/testdb"
)

func TestConnectRegistersVectorType(t *testing.T) {
	pool, _ := testdb.New(t)
	var dims int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT vector_dims('[1,2,3]'::vector)").Scan(&dims))
	require.Equal(t, 3, dims)
	require.False(t, pg.IsUnavailable(nil))
}

// A database that is down answers UNAVAILABLE by itself, never a hang: Connect
// returns before the caller's (generous) deadline, which only guards the test.
func TestDeadDatabaseIsUnavailableFast(t *testing.T) {
	addr := deadaddr.Loopback(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := pg.Connect(ctx, pg.Config{
		URL:            "postgres://postgres:s3cret-password@" + addr + "/x?sslmode=disable",
		ConnectTimeout: 500 * time.Millisecond,
	})
	require.Error(t, err)
	require.NoError(t, ctx.Err(), "Connect waited for the caller's deadline instead of failing")
	require.NotContains(t, err.Error(), "s3cret-password")
	st, ok := pg.ClassifyError(err)
	require.True(t, ok, "error %v should be classified as unavailable", err)
	require.Equal(t, codes.Unavailable, st.Code())
}

func TestLoadConfigValidates(t *testing.T) {
	env := config.FromMap(map[string]string{"DATABASE_URL": "postgres://u:topsecret@host:notaport/db"})
	pg.LoadConfig(env)
	require.ErrorContains(t, env.Err(), "DATABASE_URL: not a valid PostgreSQL connection string")
	require.NotContains(t, env.Err().Error(), "topsecret")

	env = config.FromMap(nil)
	pg.LoadConfig(env)
	require.ErrorContains(t, env.Err(), "DATABASE_URL: required but not set")

	// A published placeholder password fails closed, without being repeated;
	// the development flag lets it through.
	placeholder := "postgres://bmcis_search_login:CHANGE_ME-search@db:5432/bmcis"
	env = config.FromMap(map[string]string{"DATABASE_URL": placeholder})
	pg.LoadConfig(env)
	require.ErrorContains(t, env.Err(), "DATABASE_URL: its password is a published placeholder")
	require.NotContains(t, env.Err().Error(), "CHANGE_ME-search")
	env = config.FromMap(map[string]string{"DATABASE_URL": placeholder, config.EnvAllowInsecureSecrets: "true"})
	require.False(t, pg.LoadConfig(env).AllowPrivileged, "the secrets switch is not the privileged-login one")
	require.NoError(t, env.Err())

	// The privileged-login switch is a boolean; anything else is refused,
	// not read as false.
	env = config.FromMap(map[string]string{"DATABASE_URL": "postgres://bmcis@db:5432/bmcis", pg.EnvAllowPrivilegedLogin: "maybe"})
	pg.LoadConfig(env)
	require.ErrorContains(t, env.Err(), pg.EnvAllowPrivilegedLogin+": must be true or false")
}

// The dev overlay's and the Secret template's database passwords are
// published: outside development LoadConfig refuses a DATABASE_URL carrying
// one, without echoing it; a generated password passes.
func TestLoadConfigRefusesPublishedPassword(t *testing.T) {
	for _, published := range []string{
		"postgres://bmcis:dev-only-insecure-password@postgres:5432/bmcis?sslmode=disable",     // deploy/k8s/overlays/dev
		"postgres://bmcis:CHANGE_ME@postgres.example.internal:5432/bmcis?sslmode=verify-full", // deploy/k8s/secret.example.yaml
		"host=postgres user=bmcis password=dev-only-insecure-password dbname=bmcis",           // the same, as a keyword string
	} {
		env := config.FromMap(map[string]string{"DATABASE_URL": published})
		pg.LoadConfig(env)
		require.ErrorContains(t, env.Err(), "DATABASE_URL: its password is a published placeholder", published)
		require.NotContains(t, env.Err().Error(), "dev-only-insecure-password")
		require.NotContains(t, env.Err().Error(), "CHANGE_ME")

		env = config.FromMap(map[string]string{"DATABASE_URL": published, config.EnvAllowInsecureSecrets: "true"})
		pg.LoadConfig(env)
		require.NoError(t, env.Err(), "the development flag accepts it")
	}
	for _, fine := range []string{
		"postgres://bmcis:3f9a1c0d5e7b2a4c6e8f0a1b3c5d7e9f@db:5432/bmcis",
		"postgres://bmcis@db:5432/bmcis", // no password: certificate or peer authentication
	} {
		env := config.FromMap(map[string]string{"DATABASE_URL": fine})
		pg.LoadConfig(env)
		require.NoError(t, env.Err(), fine)
	}
}

func TestLostConnectionIsUnavailable(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"unexpected EOF mid-query", fmt.Errorf("read rows: %w", io.ErrUnexpectedEOF), true},
		{"closed connection", errors.New("conn closed"), true},
		{"reset", fmt.Errorf("write: %w", syscall.ECONNRESET), true},
		{"bad query", &pgconn.PgError{Code: "42601", Message: "syntax error"}, false},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"connection exception class", &pgconn.PgError{Code: "08006"}, true},
		{"plain error", errors.New("no rows"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, pg.IsUnavailable(tc.err))
		})
	}
}

func TestCallError(t *testing.T) {
	live := context.Background()
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	bad := status.Error(codes.NotFound, "no vendor")
	tests := []struct {
		name   string
		parent context.Context
		err    error
		want   codes.Code
	}{
		{"our deadline, caller still waiting", live, fmt.Errorf("query: %w", context.DeadlineExceeded), codes.Unavailable},
		{"caller gone", gone, fmt.Errorf("query: %w", context.DeadlineExceeded), codes.Unknown},
		{"lost connection", live, fmt.Errorf("read: %w", io.ErrUnexpectedEOF), codes.Unavailable},
		{"deliberate status passes", live, bad, codes.NotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, status.Code(pg.CallError(tc.parent, tc.err)))
		})
	}
	require.NoError(t, pg.CallError(live, nil))

	// The database cause travels as a typed reason, not only as words.
	st := status.Convert(pg.CallError(live, io.ErrUnexpectedEOF))
	require.Len(t, st.Details(), 1)
	info, ok := st.Details()[0].(*errdetails.ErrorInfo)
	require.True(t, ok)
	require.Equal(t, pg.ReasonUnavailable, info.GetReason())
}
