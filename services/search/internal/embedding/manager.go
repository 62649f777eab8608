// Package embedding runs the embedding lifecycle around the providers of
// package embed: which model is active, training and persisting the
// builtin model, embedding chunks after ingestion (the sweep), re-embedding
// everything (reindex), and refusing to start when stored vectors cannot
// be compared with the configured model.
//
// Lifecycle (see docs/SEARCH.md):
//   - Chunks are always written without a vector; the sweep that runs at
//     the end of every ingestion stream embeds them, under one advisory
//     lock for the whole deployment.
//   - builtin: when no model is active, the sweep trains one on every stored
//     chunk, persists it in embedding_models, embeds every chunk and
//     activates it, all before the stream is answered. With a model active,
//     new chunks are embedded with it. `bmcisctl reindex` retrains.
//   - openai / ollama: the first sweep registers the configured model and
//     activates it; `bmcisctl reindex` re-embeds everything with it.
//   - Big writes (at least BulkMin chunks and BulkPercent of the table) drop
//     the HNSW index and rebuild it afterwards, which is an order of
//     magnitude faster than pgvector's one-at-a-time graph inserts.
package embedding

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/services/search/internal/analysis"
	"github.com/bmcis/knowledge/services/search/internal/embed"
	"github.com/bmcis/knowledge/services/search/internal/store"
)

// Providers.
const (
	ProviderBuiltin = "builtin"
	ProviderOpenAI  = "openai"
	ProviderOllama  = "ollama"
)

// Config configures the embedder.
type Config struct {
	// Provider is builtin, openai or ollama (BMCIS_EMBEDDER).
	Provider string
	// URL, Model and APIKey configure the HTTP providers
	// (BMCIS_EMBEDDER_URL, BMCIS_EMBEDDER_MODEL, BMCIS_EMBEDDER_API_KEY).
	URL    string
	Model  string
	APIKey string
	// Dims is the deployment's vector size (BMCIS_EMBEDDING_DIMENSIONS).
	Dims int
	// BatchSize is texts per HTTP request (BMCIS_EMBEDDER_BATCH_SIZE).
	BatchSize int
	// Timeout bounds one HTTP attempt (BMCIS_EMBEDDER_TIMEOUT).
	Timeout time.Duration
	// QueryTimeout bounds embedding one query, retries included.
	QueryTimeout time.Duration
	// MinTrainChunks is the least number of chunks the builtin model is
	// trained on (BMCIS_BUILTIN_MIN_TRAIN_CHUNKS).
	MinTrainChunks int
	// BulkMin and BulkPercent decide when a sweep rebuilds the HNSW index
	// instead of inserting into it.
	BulkMin     int
	BulkPercent int
	// MaintenanceMem is maintenance_work_mem for index builds.
	MaintenanceMem string
	// Builtin configures training (zero value: the measured defaults).
	Builtin embed.BuiltinConfig
	// RetrainGrowth and RetrainCoverage are the builtin model's retrain
	// rule (freshness.go); 0 turns each part off.
	RetrainGrowth   float64
	RetrainCoverage float64
}

// DefaultConfig is the configuration with no variable set.
func DefaultConfig() Config {
	return Config{
		Provider: ProviderBuiltin, Dims: 256, BatchSize: 128, Timeout: 30 * time.Second, QueryTimeout: 2 * time.Second,
		MinTrainChunks: 2, BulkMin: 2000, BulkPercent: 20, MaintenanceMem: "512MB",
		Builtin:       builtinDefaults(256),
		RetrainGrowth: DefaultRetrainGrowth, RetrainCoverage: DefaultRetrainCoverage,
	}
}

// builtinDefaults is the measured LSA configuration with the service's
// training sample cap: 20,000 chunks keeps training under a minute on two
// cores (the SVD is linear in the sample) while every chunk still gets a
// vector. Contrastive fine-tuning follows the SVD on the same sample, its
// pairs capped per epoch (embed.DefaultContrastiveConfig), so its time
// does not grow past a sample of about 6,000 chunks.
func builtinDefaults(dims int) embed.BuiltinConfig {
	b := embed.DefaultBuiltinConfig()
	b.Dims = dims
	b.MaxTrainDocs = 20_000
	return b
}

// LoadConfig reads the embedder variables; problems are recorded in env.
func LoadConfig(env *config.Reader) Config {
	d := DefaultConfig()
	c := d
	c.Provider = env.Enum("BMCIS_EMBEDDER", d.Provider, ProviderBuiltin, ProviderOpenAI, ProviderOllama)
	c.URL = env.String("BMCIS_EMBEDDER_URL", "")
	c.Model = env.String("BMCIS_EMBEDDER_MODEL", "")
	c.APIKey = env.Secret("BMCIS_EMBEDDER_API_KEY", false, 1)
	c.Dims = env.Int("BMCIS_EMBEDDING_DIMENSIONS", d.Dims, 1, 2000)
	c.BatchSize = env.Int("BMCIS_EMBEDDER_BATCH_SIZE", d.BatchSize, 1, 4096)
	c.Timeout = env.Duration("BMCIS_EMBEDDER_TIMEOUT", d.Timeout, 100*time.Millisecond, 10*time.Minute)
	c.QueryTimeout = env.Duration("BMCIS_EMBEDDER_QUERY_TIMEOUT", d.QueryTimeout, 10*time.Millisecond, time.Minute)
	c.MinTrainChunks = env.Int("BMCIS_BUILTIN_MIN_TRAIN_CHUNKS", d.MinTrainChunks, 2, 10_000_000)
	c.BulkMin = env.Int("BMCIS_SEARCH_BULK_MIN_CHUNKS", d.BulkMin, 1, 100_000_000)
	c.BulkPercent = env.Int("BMCIS_SEARCH_BULK_PERCENT", d.BulkPercent, 0, 100)
	// A graph that outgrows maintenance_work_mem is built on disk, several
	// times slower: about 1.5 GB holds 1M 256-dimension vectors.
	c.MaintenanceMem = env.String("BMCIS_SEARCH_INDEX_BUILD_MEMORY", d.MaintenanceMem)
	c.Builtin = builtinDefaults(c.Dims)
	c.Builtin.MaxTrainDocs = env.Int("BMCIS_BUILTIN_MAX_TRAIN_CHUNKS", c.Builtin.MaxTrainDocs, 100, 10_000_000)
	// 0 switches back to plain LSA (the model before issue 14's training).
	c.Builtin.Contrastive.Epochs = env.Int("BMCIS_BUILTIN_CONTRASTIVE_EPOCHS", c.Builtin.Contrastive.Epochs, 0, 100)
	// 0: no sub-word rows (the model before issue 14's sixth round).
	if n := env.Int("BMCIS_BUILTIN_SUBWORD_N", c.Builtin.Contrastive.Subwords.N, 0, embed.MaxSubwordN); n == 1 {
		env.Failf("BMCIS_BUILTIN_SUBWORD_N", "must be 0 (off) or 2-%d", embed.MaxSubwordN)
	} else {
		c.Builtin.Contrastive.Subwords.N = n
	}
	c.RetrainGrowth = env.Float("BMCIS_BUILTIN_RETRAIN_GROWTH", d.RetrainGrowth, 0, 1000)
	c.RetrainCoverage = env.Float("BMCIS_BUILTIN_RETRAIN_COVERAGE", d.RetrainCoverage, 0, 1)
	if c.Provider != ProviderBuiltin {
		if c.URL == "" {
			env.Failf("BMCIS_EMBEDDER_URL", "required when BMCIS_EMBEDDER=%s", c.Provider)
		} else if !strings.HasPrefix(c.URL, "http://") && !strings.HasPrefix(c.URL, "https://") {
			env.Failf("BMCIS_EMBEDDER_URL", "must start with http:// or https://")
		}
		if c.Model == "" {
			env.Failf("BMCIS_EMBEDDER_MODEL", "required when BMCIS_EMBEDDER=%s", c.Provider)
		}
	}
	return c
}

// Active is the model queries and new chunks are embedded with.
type Active struct {
	// Row is the embedding_models id.
	Row      int64
	ModelID  string
	Provider string
	Dims     int
	Embedder embed.Embedder
	// Builtin is the model itself when the provider is builtin.
	Builtin *embed.Builtin
	// TrainedAt is when the model was registered.
	TrainedAt time.Time
}

// Manager owns the active model.
type Manager struct {
	st     *store.Store
	cfg    Config
	log    *slog.Logger
	an     *analysis.Analyzer
	remote embed.Embedder
	cur    atomic.Pointer[Active]
	// unusable is the active model row this replica could not load, and
	// why (nil: it could, or none is active); set writes it with cur.
	unusable atomic.Pointer[unusableModel]
	// changed is closed and replaced whenever cur changes (Changed).
	changedMu sync.Mutex
	changed   chan struct{}
}

// New returns a manager; for HTTP providers it builds the client now.
func New(st *store.Store, cfg Config, an *analysis.Analyzer, log *slog.Logger) (*Manager, error) {
	if cfg.Builtin.Dims == 0 {
		cfg.Builtin = builtinDefaults(cfg.Dims)
	}
	m := &Manager{st: st, cfg: cfg, log: log, an: an}
	hc := embed.HTTPConfig{BaseURL: cfg.URL, Model: cfg.Model, Dims: cfg.Dims, APIKey: cfg.APIKey, BatchSize: cfg.BatchSize, Timeout: cfg.Timeout}
	var err error
	switch cfg.Provider {
	case ProviderBuiltin:
	case ProviderOpenAI:
		m.remote, err = embed.NewOpenAI(hc)
	case ProviderOllama:
		m.remote, err = embed.NewOllama(hc)
	default:
		err = fmt.Errorf("unknown embedder provider %q", cfg.Provider)
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Config returns the configuration.
func (m *Manager) Config() Config { return m.cfg }

// unusableModel is an active model row this replica cannot load.
type unusableModel struct {
	row int64
	// reason is for callers: it names no model, setting or command.
	reason string
}

// set makes a the model in use (nil: none), records why when a is nil
// because the active row cannot be loaded (u), and wakes Changed's waiters.
func (m *Manager) set(a *Active, u *unusableModel) {
	m.changedMu.Lock()
	defer m.changedMu.Unlock()
	// The reason is stored before cur becomes nil and cleared after a model
	// is set, so a reader sees no model without a reason only in the
	// instant a model comes back (and then says "no model is active yet").
	if a == nil {
		m.unusable.Store(u)
	}
	prev := m.cur.Swap(a)
	if a != nil {
		m.unusable.Store(nil)
	}
	if prev == a {
		return
	}
	if m.changed != nil {
		close(m.changed)
	}
	m.changed = make(chan struct{})
}

// Changed returns a channel closed when the model in use next changes.
// Read it before Current, so a change between the two is not missed.
func (m *Manager) Changed() <-chan struct{} {
	m.changedMu.Lock()
	defer m.changedMu.Unlock()
	if m.changed == nil {
		m.changed = make(chan struct{})
	}
	return m.changed
}

// Unusable says, in words fit for any caller, why this replica could not
// load the active model ("" when it could, or none is active). The log has
// the details (ids, settings, the command that fixes it).
func (m *Manager) Unusable() string {
	if u := m.unusable.Load(); u != nil {
		return u.reason
	}
	return ""
}

// unusableReason sorts a failure to load the active model for callers.
func unusableReason(err error) string {
	switch {
	case errors.Is(err, embed.ErrNewerModel):
		return "was written by a newer release than this replica's (the replica needs upgrading)"
	case errors.Is(err, embed.ErrOlderModel):
		return "is of an older version than this replica's release embeds with (the model needs retraining)"
	case errors.Is(err, ErrIncompatible):
		return "does not match this replica's embedding configuration"
	default:
		return "could not be loaded"
	}
}

// Current returns the active model, or nil when none is usable yet.
func (m *Manager) Current() *Active { return m.cur.Load() }

// Describe names the configured provider and, when active, the model.
func (m *Manager) Describe() (provider, model string, dims int) {
	if a := m.Current(); a != nil {
		return a.Provider, a.ModelID, a.Dims
	}
	model = ""
	if m.remote != nil {
		model = m.remote.ModelID()
	}
	return m.cfg.Provider, model, m.cfg.Dims
}

// ErrIncompatible means stored vectors cannot be compared with the
// configured model; the message names the fix.
var ErrIncompatible = errors.New("stored embeddings do not match the configured embedder")

// CheckCompatible refuses a configuration whose vectors would not be
// comparable with the stored ones: another column dimension, or an active
// model of another provider, model or dimension.
func (m *Manager) CheckCompatible(ctx context.Context) error {
	colDims, err := m.st.EmbeddingColumnDims(ctx)
	if err != nil {
		return err
	}
	if colDims != m.cfg.Dims {
		return fmt.Errorf("%w: chunks.embedding holds %d-dimension vectors but BMCIS_EMBEDDING_DIMENSIONS=%d; "+
			"run `bmcisctl reindex` with this configuration to resize the column and re-embed every chunk "+
			"(or set BMCIS_EMBEDDING_DIMENSIONS=%d)", ErrIncompatible, colDims, m.cfg.Dims, colDims)
	}
	active, err := m.st.ActiveModel(ctx)
	if err != nil {
		return err
	}
	return m.compatible(active)
}

func (m *Manager) compatible(active *store.Model) error {
	if active == nil {
		return nil
	}
	want := m.cfg.Provider
	if m.remote != nil {
		want = m.remote.ModelID()
	}
	ok := active.Dimensions == m.cfg.Dims && active.Provider == m.cfg.Provider &&
		(m.remote == nil || active.ModelID == m.remote.ModelID())
	if !ok {
		return fmt.Errorf("%w: the active embedding model is %s (%s, %d dimensions) but this service is configured for %s "+
			"(BMCIS_EMBEDDER=%s, %d dimensions); run `bmcisctl reindex` with this configuration to re-embed every chunk, "+
			"or configure the service for the stored model", ErrIncompatible, active.ModelID, active.Provider, active.Dimensions,
			want, m.cfg.Provider, m.cfg.Dims)
	}
	return nil
}

// Sync loads the active model when it is not the one in use (activeRow 0:
// none). An active model this replica cannot load disables vector search
// and is reported once (the error), not at every sync.
func (m *Manager) Sync(ctx context.Context, activeRow int64) (bool, error) {
	cur := m.Current()
	if cur != nil && cur.Row == activeRow {
		return false, nil
	}
	if u := m.unusable.Load(); cur == nil && u != nil && u.row == activeRow {
		return false, nil // reported when it was found unusable
	}
	if activeRow == 0 {
		m.set(nil, nil)
		return cur != nil, nil
	}
	row, err := m.modelRow(ctx, activeRow)
	if err != nil {
		return false, err
	}
	a, err := m.activate(row)
	if err != nil {
		m.set(nil, &unusableModel{row: activeRow, reason: unusableReason(err)})
		return true, err
	}
	m.set(a, nil)
	return true, nil
}

// modelRow reads the active model's row id with its parameters.
func (m *Manager) modelRow(ctx context.Context, id int64) (*store.Model, error) {
	row, err := m.st.ModelByID(ctx, id)
	if err != nil {
		return nil, err
	}
	if row == nil {
		return nil, fmt.Errorf("active embedding model %d vanished", id)
	}
	return row, nil
}

// activate builds the embedder of a stored model row.
func (m *Manager) activate(row *store.Model) (*Active, error) {
	if err := m.compatible(row); err != nil {
		return nil, err
	}
	a := &Active{Row: row.ID, ModelID: row.ModelID, Provider: row.Provider, Dims: row.Dimensions, TrainedAt: row.CreatedAt}
	if row.Provider == ProviderBuiltin {
		b, err := embed.UnmarshalBuiltin(row.Params)
		if errors.Is(err, embed.ErrNewerModel) {
			// Reindexing with this release would replace it with an older model.
			return nil, fmt.Errorf("load builtin model %s: %w (upgrade this replica to the release that wrote it)", row.ModelID, err)
		}
		if err != nil {
			return nil, fmt.Errorf("load builtin model %s: %w (run `bmcisctl reindex`)", row.ModelID, err)
		}
		a.Embedder = pad(b, row.Dimensions)
		a.Builtin = b
	} else {
		a.Embedder = m.remote
	}
	return a, nil
}

// EmbedQuery embeds a query with the active model; nil when none is active
// or the query has no known term (a zero vector ranks nothing).
func (m *Manager) EmbedQuery(ctx context.Context, q string) ([]float32, *Active, error) {
	a := m.Current()
	if a == nil {
		return nil, nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.QueryTimeout)
	defer cancel()
	vecs, err := a.Embedder.Embed(ctx, []string{q})
	if err != nil {
		return nil, a, fmt.Errorf("embed query: %w", err)
	}
	if len(vecs) != 1 || isZero(vecs[0]) {
		return nil, a, nil
	}
	return vecs[0], a, nil
}

func isZero(v []float32) bool {
	for _, x := range v {
		if x != 0 {
			return false
		}
	}
	return true
}

// padded zero-pads a builtin model's vectors to the column size: on a small
// corpus the SVD can keep fewer components than asked, and zeros change no
// cosine.
type padded struct {
	embed.Embedder
	dims int
}

func pad(e embed.Embedder, dims int) embed.Embedder {
	if e.Dimensions() >= dims {
		return e
	}
	return padded{Embedder: e, dims: dims}
}

func (p padded) Dimensions() int { return p.dims }

func (p padded) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	vecs, err := p.Embedder.Embed(ctx, texts)
	if err != nil {
		return nil, err
	}
	for i, v := range vecs {
		if len(v) < p.dims {
			w := make([]float32, p.dims)
			copy(w, v)
			vecs[i] = w
		}
	}
	return vecs, nil
}
