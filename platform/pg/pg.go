// Package pg opens PostgreSQL pools with the pgvector types registered on
// every connection, and tells lost-database errors apart from the rest.
package pg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	pgxvec "github.com/pgvector/pgvector-go/pgx"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bmcis/knowledge/platform/config"
)

// Config says where the database is and how to reach it.
type Config struct {
	// URL is a libpq connection string or URL (DATABASE_URL).
	URL string
	// MaxConns caps the pool (DATABASE_MAX_CONNS).
	MaxConns int
	// ConnectTimeout bounds each connection attempt (DATABASE_CONNECT_TIMEOUT),
	// so a dead database answers UNAVAILABLE quickly instead of hanging.
	ConnectTimeout time.Duration
	// AllowPrivileged lets a service connect as a superuser or a role wider
	// than its own: development only (EnvAllowPrivilegedLogin;
	// migrations.ConnectService).
	AllowPrivileged bool
	// InsecureSecretsAllowed is config.EnvAllowInsecureSecrets, which once
	// allowed a privileged login too: kept only so that the refusal can say
	// it no longer does.
	InsecureSecretsAllowed bool
}

// EnvAllowPrivilegedLogin lets a service on a development machine connect
// as a superuser or a role wider than its own. It is apart from
// config.EnvAllowInsecureSecrets: a machine that needs placeholder secrets
// must not thereby run a service as the superuser.
const EnvAllowPrivilegedLogin = "BMCIS_ALLOW_PRIVILEGED_DB_LOGIN"

// LoadConfig reads the database settings; problems are recorded in env.
func LoadConfig(env *config.Reader) Config {
	c := Config{
		URL:                    env.Required("DATABASE_URL"),
		MaxConns:               env.Int("DATABASE_MAX_CONNS", 10, 1, 1000),
		ConnectTimeout:         env.Duration("DATABASE_CONNECT_TIMEOUT", 2*time.Second, 100*time.Millisecond, time.Minute),
		AllowPrivileged:        env.Bool(EnvAllowPrivilegedLogin, false),
		InsecureSecretsAllowed: env.InsecureSecretsAllowed(),
	}
	if c.URL != "" {
		pc, err := pgxpool.ParseConfig(c.URL)
		if err != nil {
			// pgx's message can quote the URL, password included: say less.
			env.Failf("DATABASE_URL", "not a valid PostgreSQL connection string")
		} else {
			// Each service's role has a generated password (docs/DEPLOY.md).
			env.URLPassword("DATABASE_URL", pc.ConnConfig.Password)
		}
	}
	return c
}

// Connect opens a pool and checks the database answers. pgvector's types are
// registered on every new connection, so the vector extension must exist
// (the first migration creates it).
func Connect(ctx context.Context, c Config) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(c.URL)
	if err != nil {
		return nil, errors.New("parse DATABASE_URL: not a valid PostgreSQL connection string")
	}
	if c.MaxConns > 0 {
		pc.MaxConns = int32(c.MaxConns)
	}
	if c.ConnectTimeout > 0 {
		pc.ConnConfig.ConnectTimeout = c.ConnectTimeout
	}
	// Queries made inside a traced call get spans (platform/tracing); the
	// statement is recorded, its arguments never are.
	pc.ConnConfig.Tracer = otelpgx.NewTracer()
	pc.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		if err := pgxvec.RegisterTypes(ctx, conn); err != nil {
			return fmt.Errorf("register pgvector types (is the vector extension installed? run `bmcisctl migrate`): %w", err)
		}
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("open database pool: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, c.ConnectTimeout+time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to database: %w", err)
	}
	return pool, nil
}

// ConnectRaw opens a pool without registering pgvector types, for tools that
// run before the extension exists (migrations, test database set-up).
func ConnectRaw(ctx context.Context, url string) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, errors.New("parse DATABASE_URL: not a valid PostgreSQL connection string")
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("open database pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to database: %w", err)
	}
	return pool, nil
}

// IsLockConflict reports whether err is a statement that lost to another
// transaction's locks: chosen as a deadlock's victim (40P01), out of lock
// wait (55P03) or a serialization failure (40001). The transaction was
// rolled back, so running it again is safe and will likely succeed.
func IsLockConflict(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "40P01", "55P03", "40001":
		return true
	}
	return false
}

// IsUnavailable reports whether err means the database could not be reached
// or the connection was lost (also mid-query), as opposed to a bad query.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return true
	}
	// A context error is the caller's or the call's own deadline, not the
	// database (context.DeadlineExceeded would pass for a net.Error below).
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		strings.Contains(err.Error(), "conn closed") {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08: connection exception; 57P01-57P03: shutdown and
		// cannot-connect-now.
		return len(pgErr.Code) == 5 && (pgErr.Code[:2] == "08" ||
			pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03")
	}
	return pgconn.SafeToRetry(err)
}

// ReasonUnavailable is the ErrorInfo reason on every UNAVAILABLE caused by
// the database, so callers (the MCP adapter's DB_CONNECTION) need not read
// messages.
const ReasonUnavailable = "DATABASE_UNAVAILABLE"

// ErrorDomain is the ErrorInfo domain of database errors.
const ErrorDomain = "db.bmcis"

// unavailable builds the UNAVAILABLE status with its typed reason.
func unavailable(msg string) *status.Status {
	st := status.New(codes.Unavailable, msg)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: ReasonUnavailable, Domain: ErrorDomain}); err == nil {
		return d
	}
	return st
}

// ClassifyError maps a lost database to UNAVAILABLE for grpcserver.WithClassifier.
func ClassifyError(err error) (*status.Status, bool) {
	if IsUnavailable(err) {
		return unavailable("database unavailable; retry shortly"), true
	}
	return nil, false
}

// DefaultCallTimeout bounds one database call of a request, so a database that
// accepts connections but stops answering costs a caller seconds, not forever.
const DefaultCallTimeout = 1500 * time.Millisecond

// CallError turns a failed database call into what the caller should see. A
// deadline that expired while the caller (parent) was still waiting is the
// database not answering, so UNAVAILABLE; a lost database is UNAVAILABLE;
// anything else is returned unchanged.
func CallError(parent context.Context, err error) error {
	if err == nil {
		return nil
	}
	if parent.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return unavailable("database did not answer in time; retry shortly").Err()
	}
	if IsUnavailable(err) {
		return unavailable("database unavailable; retry shortly").Err()
	}
	return err
}
