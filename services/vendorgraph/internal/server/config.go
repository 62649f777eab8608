package server

import (
	"time"

	"github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/platform/pg"
)

// Config is the service's own configuration.
type Config struct {
	// CacheSize is the most GetVendor replies kept (BMCIS_VENDOR_CACHE_SIZE);
	// 0 turns the cache off.
	CacheSize int
	// CacheTTL is how long a reply is kept (BMCIS_VENDOR_CACHE_TTL).
	CacheTTL time.Duration
	// MatchThreshold is the least trigram similarity for a "did you mean"
	// candidate (BMCIS_VENDOR_MATCH_THRESHOLD).
	MatchThreshold float64
	// MaxImportLines bounds one import (BMCIS_VENDOR_IMPORT_MAX_LINES): an
	// import is validated in memory before it is written.
	MaxImportLines int
	// DBTimeout bounds the database work of one lookup (BMCIS_VENDOR_DB_TIMEOUT):
	// a database that stops answering gives UNAVAILABLE, never a hang.
	DBTimeout time.Duration
	// SearchAddr is the search service's gRPC address (BMCIS_SEARCH_ADDR):
	// an import sends it the names it changed.
	SearchAddr string
	// SearchToken is the credential vendorgraph presents to search
	// (BMCIS_VENDORGRAPH_TOKEN; search holds its digest as
	// BMCIS_VENDORGRAPH_TOKEN_SHA256).
	SearchToken string
}

// DefaultConfig is the configuration when no variable is set.
func DefaultConfig() Config {
	return Config{CacheSize: 1000, CacheTTL: 300 * time.Second, MatchThreshold: 0.4, MaxImportLines: 2_000_000,
		DBTimeout: pg.DefaultCallTimeout}
}

// LoadConfig reads the service's variables; problems are recorded in env.
func LoadConfig(env *config.Reader) Config {
	d := DefaultConfig()
	return Config{
		CacheSize: env.Int("BMCIS_VENDOR_CACHE_SIZE", d.CacheSize, 0, 1_000_000),
		CacheTTL:  env.Duration("BMCIS_VENDOR_CACHE_TTL", d.CacheTTL, time.Second, 24*time.Hour),
		// Below 0.3, pg_trgm's default similarity_threshold, the % operator
		// the indexes serve would already have dropped some candidates.
		MatchThreshold: env.Float("BMCIS_VENDOR_MATCH_THRESHOLD", d.MatchThreshold, 0.3, 1),
		MaxImportLines: env.Int("BMCIS_VENDOR_IMPORT_MAX_LINES", d.MaxImportLines, 1, 50_000_000),
		DBTimeout:      env.Duration("BMCIS_VENDOR_DB_TIMEOUT", d.DBTimeout, 100*time.Millisecond, time.Minute),
		SearchAddr:     env.Addr("BMCIS_SEARCH_ADDR", "127.0.0.1:50051"),
		SearchToken:    env.Secret("BMCIS_VENDORGRAPH_TOKEN", true, 16),
	}
}
