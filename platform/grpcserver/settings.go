package grpcserver

import (
	"crypto/tls"
	"time"

	"github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/platform/rpcauth"
	"github.com/bmcis/knowledge/platform/tlsconfig"
	"github.com/bmcis/knowledge/platform/tracing"
)

// Settings are what every service binary shares: where it listens, how it
// logs, how it shuts down, and the internal token callers must present.
type Settings struct {
	// Name is the service name used in logs and metrics ("search").
	Name string
	// GRPCAddr is the gRPC listen address (BMCIS_GRPC_ADDR).
	GRPCAddr string
	// MetricsAddr serves /metrics and /healthz over HTTP (BMCIS_METRICS_ADDR);
	// empty disables it.
	MetricsAddr string
	// Profiling serves Go's profiles (/debug/pprof/) beside the metrics
	// (BMCIS_PPROF, off by default). Anyone who reaches the metrics
	// address can then take one, and a CPU profile or trace costs CPU
	// while it runs: turn it on while profiling.
	Profiling bool
	// LogLevel is debug, info, warn or error (BMCIS_LOG_LEVEL).
	LogLevel string
	// Credentials are the digests of the caller credentials the service
	// accepts, per role (BMCIS_READ_TOKEN_SHA256, BMCIS_ADAPTER_TOKEN_SHA256,
	// BMCIS_INGEST_TOKEN_SHA256, BMCIS_ADMIN_TOKEN_SHA256). A call's credential arrives in
	// ServiceTokenHeader; rpcauth's table says which roles may call what.
	// Empty turns the checks off (unit-test harnesses only: Main requires them).
	Credentials rpcauth.Credentials
	// DrainDelay is how long the server reports NOT_SERVING before it stops
	// accepting calls, so load balancers move away first (BMCIS_SHUTDOWN_DRAIN).
	DrainDelay time.Duration
	// ShutdownTimeout bounds the wait for in-flight calls (BMCIS_SHUTDOWN_TIMEOUT).
	ShutdownTimeout time.Duration
	// TLS, when set, serves gRPC over TLS (platform/tlsconfig's variables).
	TLS *tls.Config
	// Tracing says where spans go (OTEL_* variables, platform/tracing).
	Tracing tracing.Config
}

// Defaults are a service's own default listen addresses.
type Defaults struct {
	GRPCAddr    string
	MetricsAddr string
	// RequireCredentials makes at least one role credential mandatory.
	RequireCredentials bool
}

// LoadSettings reads the shared settings; problems are recorded in env.
func LoadSettings(env *config.Reader, name string, d Defaults) Settings {
	return Settings{
		Name:            name,
		GRPCAddr:        env.Addr("BMCIS_GRPC_ADDR", d.GRPCAddr),
		MetricsAddr:     env.Addr("BMCIS_METRICS_ADDR", d.MetricsAddr),
		Profiling:       env.Bool("BMCIS_PPROF", false),
		LogLevel:        env.Enum("BMCIS_LOG_LEVEL", "info", "debug", "info", "warn", "error"),
		Credentials:     loadCredentials(env, d.RequireCredentials),
		TLS:             loadTLS(env),
		Tracing:         tracing.LoadConfig(env),
		DrainDelay:      env.Duration("BMCIS_SHUTDOWN_DRAIN", 2*time.Second, 0, 5*time.Minute),
		ShutdownTimeout: env.Duration("BMCIS_SHUTDOWN_TIMEOUT", 20*time.Second, time.Second, 10*time.Minute),
	}
}

// credentialEnv names the variable holding each role's credential digest.
var credentialEnv = map[rpcauth.Role]string{
	rpcauth.Read:    "BMCIS_READ_TOKEN_SHA256",
	rpcauth.Adapter: "BMCIS_ADAPTER_TOKEN_SHA256",
	rpcauth.Ingest:  "BMCIS_INGEST_TOKEN_SHA256",
	rpcauth.Admin:   "BMCIS_ADMIN_TOKEN_SHA256",
	// Set on search only: vendorgraph's credential for calling it.
	rpcauth.VendorGraph: "BMCIS_VENDORGRAPH_TOKEN_SHA256",
}

// CredentialEnv names the variable holding a role's credential digest.
func CredentialEnv(r rpcauth.Role) string { return credentialEnv[r] }

// loadCredentials reads each role's digest. The digest of a published
// credential (config.SecretDigest) would let anyone in, and two roles sharing
// one credential would give its holder both: both refused outside development.
func loadCredentials(env *config.Reader, required bool) rpcauth.Credentials {
	creds := rpcauth.Credentials{}
	seen := map[rpcauth.Digest]rpcauth.Role{}
	// A digest set but refused has its own message; "none configured" would
	// send the operator looking for a missing variable.
	refused := false
	for _, role := range rpcauth.Roles {
		name := CredentialEnv(role)
		v := env.SecretDigest(name)
		if v == "" {
			continue
		}
		d, err := rpcauth.ParseDigest(v)
		if err != nil {
			env.Failf(name, "%v", err)
			refused = true
			continue
		}
		if other, dup := seen[d]; dup && !env.InsecureSecretsAllowed() {
			env.Failf(name, "is the same credential as %s: each role needs its own", CredentialEnv(other))
		}
		seen[d] = role
		creds[role] = d
	}
	if required && len(creds) == 0 && !refused {
		env.Failf(CredentialEnv(rpcauth.Read), "no caller credential is configured: set the SHA-256 of at least one role's credential")
	}
	return creds
}

// loadTLS reads the server's certificate files, if any.
func loadTLS(env *config.Reader) *tls.Config {
	cfg, err := tlsconfig.Server(env.String(tlsconfig.EnvCertFile, ""), env.String(tlsconfig.EnvKeyFile, ""),
		env.String(tlsconfig.EnvClientCAFile, ""))
	if err != nil {
		env.Failf(tlsconfig.EnvCertFile, "%v", err)
	}
	return cfg
}
