package grpcserver

import (
	"time"

	"github.com/bmcis/knowledge/platform/config"
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
	// LogLevel is debug, info, warn or error (BMCIS_LOG_LEVEL).
	LogLevel string
	// ServiceToken, when set, must arrive in ServiceTokenHeader on every call
	// except health checks and reflection (BMCIS_SERVICE_TOKEN).
	ServiceToken string
	// DrainDelay is how long the server reports NOT_SERVING before it stops
	// accepting calls, so load balancers move away first (BMCIS_SHUTDOWN_DRAIN).
	DrainDelay time.Duration
	// ShutdownTimeout bounds the wait for in-flight calls (BMCIS_SHUTDOWN_TIMEOUT).
	ShutdownTimeout time.Duration
}

// Defaults are a service's own default listen addresses.
type Defaults struct {
	GRPCAddr    string
	MetricsAddr string
	// RequireServiceToken makes BMCIS_SERVICE_TOKEN mandatory.
	RequireServiceToken bool
}

// LoadSettings reads the shared settings; problems are recorded in env.
func LoadSettings(env *config.Reader, name string, d Defaults) Settings {
	return Settings{
		Name:            name,
		GRPCAddr:        env.Addr("BMCIS_GRPC_ADDR", d.GRPCAddr),
		MetricsAddr:     env.Addr("BMCIS_METRICS_ADDR", d.MetricsAddr),
		LogLevel:        env.Enum("BMCIS_LOG_LEVEL", "info", "debug", "info", "warn", "error"),
		ServiceToken:    env.Secret("BMCIS_SERVICE_TOKEN", d.RequireServiceToken, 16),
		DrainDelay:      env.Duration("BMCIS_SHUTDOWN_DRAIN", 2*time.Second, 0, 5*time.Minute),
		ShutdownTimeout: env.Duration("BMCIS_SHUTDOWN_TIMEOUT", 20*time.Second, time.Second, 10*time.Minute),
	}
}
