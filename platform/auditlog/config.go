package auditlog

import (
	"time"

	"github.com/bmcis/knowledge/platform/config"
)

// Settings are an edge's audit settings, read the same way by the adapter
// and the gateway.
type Settings struct {
	// Enabled is BMCIS_AUDIT (default true): false records nothing.
	Enabled bool
	Config
}

// LoadSettings reads BMCIS_AUDIT, BMCIS_AUDIT_QUERY_TEXT,
// BMCIS_AUDIT_BUFFER, BMCIS_AUDIT_FLUSH_INTERVAL and the refusal limit's
// BMCIS_AUDIT_REFUSALS_PER_ADDRESS, BMCIS_AUDIT_REFUSAL_WINDOW and
// BMCIS_AUDIT_REFUSAL_ADDRESSES; problems are recorded in env.
func LoadSettings(env *config.Reader) Settings {
	return Settings{
		Enabled: env.Bool("BMCIS_AUDIT", true),
		Config: Config{
			QueryText:          env.Bool("BMCIS_AUDIT_QUERY_TEXT", true),
			BufferSize:         env.Int("BMCIS_AUDIT_BUFFER", DefaultBufferSize, 100, 10_000_000),
			FlushInterval:      env.Duration("BMCIS_AUDIT_FLUSH_INTERVAL", DefaultFlushInterval, 10*time.Millisecond, time.Minute),
			RefusalsPerAddress: env.Int("BMCIS_AUDIT_REFUSALS_PER_ADDRESS", DefaultRefusalsPerAddress, 1, 1_000_000),
			RefusalWindow:      env.Duration("BMCIS_AUDIT_REFUSAL_WINDOW", DefaultRefusalWindow, time.Second, 24*time.Hour),
			RefusalAddresses:   env.Int("BMCIS_AUDIT_REFUSAL_ADDRESSES", DefaultRefusalAddresses, 1, 10_000_000),
		},
	}
}

// Start returns the recorder the settings ask for, sending to a; nil
// (record nothing) when auditing is off.
func (s Settings) Start(a Appender) (*Recorder, error) {
	if !s.Enabled {
		return nil, nil
	}
	return New(a, s.Config)
}
