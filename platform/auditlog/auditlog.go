// Package auditlog is the edges' side of the audit trail (docs/AUDIT.md):
// the MCP adapter and the gateway Record every read they serve, and a
// background goroutine sends the entries in batches to the auth service
// (AuthService.AppendAuditEvents), which owns the trail.
//
// A read never waits on the audit and never fails because of it: Record
// copies the entry into a bounded buffer and returns. When the buffer is
// full, or auth cannot take a batch while the buffer fills up behind it,
// or auth refuses a batch as invalid (retrying would never succeed), the
// entries are dropped and counted (bmcis_audit_events_dropped_total, and a
// log line at most once a minute). So a crash loses at most the buffer
// (Config.BufferSize entries: those recorded in the last flush interval,
// more while auth is unreachable); Close sends what is left.
package auditlog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	"github.com/bmcis/knowledge/platform/docid"
)

// Outcome of a read that succeeded; a failed one records its error code.
const OK = "ok"

// MaxChunkIDs is the most chunk ids one entry holds: the auth service
// refuses a batch with an entry listing more, so the recorder keeps the
// first MaxChunkIDs.
const MaxChunkIDs = 1000

// MaxDocumentIDs is the most document ids one entry holds, likewise: the
// documents of at most MaxChunkIDs chunks.
const MaxDocumentIDs = MaxChunkIDs

// The most bytes of text an entry keeps: MaxText of a query or a target,
// MaxLabel of every other field. The auth service keeps no more; the edge
// cuts first, so that what a caller sends (a URL's path, thousands of ids
// asked for) never swells a batch past what the service takes, where the
// batch would be retried until the buffer filled and others' entries were
// dropped.
const (
	MaxText  = 4096
	MaxLabel = 256
)

// Cut keeps at most n bytes of s, ending on a character boundary.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Principal kinds.
const (
	KindAPIKey = "api_key"
	KindOAuth  = "oauth"
)

// Entry is one read, as the edge saw it.
type Entry struct {
	Time          time.Time
	Principal     string // key id or OAuth subject; never a secret
	PrincipalKind string // KindAPIKey, KindOAuth, or "" when unknown
	OAuthIssuer   string
	ClientAddress string
	ClientName    string
	Tool          string // tool name, "resources/read", or "GET /v1/chunks"
	Target        string // a kb:// URI or a REST path, when there is no query
	Query         string // the text; the recorder keeps only its hash when told
	ChunkIDs      []int64
	DocumentIDs   []string // the external ids of the documents returned, each once
	Outcome       string   // OK or an error code
	RequestID     string
}

// Appender is the auth service's append call (authv1.AuthServiceClient).
type Appender interface {
	AppendAuditEvents(ctx context.Context, in *authv1.AppendAuditEventsRequest, opts ...grpc.CallOption) (*authv1.AppendAuditEventsResponse, error)
}

// Config tunes a Recorder; zero fields take the defaults.
type Config struct {
	// QueryText keeps query text; false keeps only its SHA-256
	// (BMCIS_AUDIT_QUERY_TEXT).
	QueryText bool
	// BufferSize bounds the entries waiting to be sent (BMCIS_AUDIT_BUFFER;
	// default 10,000): what a crash can lose at most.
	BufferSize int
	// BatchSize is the most entries one append carries (default 500).
	BatchSize int
	// MaxBatchBytes bounds one append's estimated size in bytes (default
	// 1 MiB), well under gRPC's 4 MiB message limit: 500 entries naming
	// long document ids would pass it. An entry larger than the bound
	// alone is sent alone.
	MaxBatchBytes int
	// FlushInterval is the longest an entry waits before it is sent
	// (BMCIS_AUDIT_FLUSH_INTERVAL; default 1s).
	FlushInterval time.Duration
	// Timeout bounds each append call (default 5s).
	Timeout time.Duration
	// RefusalsPerAddress bounds the refusals (IsRefusal: no credential
	// verified) recorded per client address in each RefusalWindow
	// (BMCIS_AUDIT_REFUSALS_PER_ADDRESS, default 20); the rest are counted
	// (bmcis_audit_refusals_suppressed_total) and, when the address's
	// window ends, stand in the trail as one summary entry.
	RefusalsPerAddress int
	// RefusalWindow is how long an address's window lasts from its first
	// refusal (BMCIS_AUDIT_REFUSAL_WINDOW, default 1m).
	RefusalWindow time.Duration
	// RefusalAddresses bounds the addresses whose windows are kept
	// (BMCIS_AUDIT_REFUSAL_ADDRESSES, default 10,000); the least recently
	// refused is forgotten first, its summary written.
	RefusalAddresses int
	// Registerer takes the recorder's counters; nil keeps them private.
	Registerer prometheus.Registerer
	Logger     *slog.Logger
}

// Defaults of Config.
const (
	DefaultBufferSize    = 10_000
	DefaultBatchSize     = 500
	DefaultMaxBatchBytes = 1 << 20
	DefaultFlushInterval = time.Second
	DefaultTimeout       = 5 * time.Second
)

// Reasons an entry is dropped (the counter's label).
const (
	DropBufferFull  = "buffer_full"  // Record found the buffer full
	DropAppendError = "append_error" // auth could not take appends (a retryable code) while the buffer filled
	DropRefused     = "refused"      // auth refused the batch's content (INVALID_ARGUMENT, OUT_OF_RANGE): no retry changes that
	DropClosed      = "closed"       // recorded after Close, or left when Close's deadline passed
)

// Recorder buffers entries and sends them to auth. A nil *Recorder records
// nothing (auditing off).
type Recorder struct {
	cfg      Config
	appender Appender
	buf      chan Entry
	stop     chan struct{}
	done     chan struct{}
	closed   atomic.Bool
	once     sync.Once
	closeCtx atomic.Pointer[context.Context]

	appended prometheus.Counter
	// refusals limits the entries of unauthenticated refusals per address;
	// suppressed counts those it kept out.
	refusals   *refusalLimiter
	suppressed prometheus.Counter
	dropped    *prometheus.CounterVec
	droppedN   atomic.Int64

	logMu      sync.Mutex
	lastLog    time.Time
	unreported int64
}

// New returns a recorder sending to a and starts its sender; Close stops it.
func New(a Appender, cfg Config) (*Recorder, error) {
	if cfg.BufferSize <= 0 {
		cfg.BufferSize = DefaultBufferSize
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.MaxBatchBytes <= 0 {
		cfg.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = DefaultFlushInterval
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.RefusalsPerAddress <= 0 {
		cfg.RefusalsPerAddress = DefaultRefusalsPerAddress
	}
	if cfg.RefusalWindow <= 0 {
		cfg.RefusalWindow = DefaultRefusalWindow
	}
	if cfg.RefusalAddresses <= 0 {
		cfg.RefusalAddresses = DefaultRefusalAddresses
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	r := &Recorder{
		cfg: cfg, appender: a,
		refusals: newRefusalLimiter(cfg.RefusalsPerAddress, cfg.RefusalWindow, cfg.RefusalAddresses),
		suppressed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bmcis_audit_refusals_suppressed_total",
			Help: "Refusals (no credential verified) over the per-address limit, not recorded one by one: each address's window ends with one entry counting them.",
		}),
		buf:  make(chan Entry, cfg.BufferSize),
		stop: make(chan struct{}),
		done: make(chan struct{}),
		appended: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bmcis_audit_events_appended_total",
			Help: "Audit entries the auth service stored.",
		}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bmcis_audit_events_dropped_total",
			Help: "Audit entries dropped, by reason (buffer_full, append_error, refused, closed).",
		}, []string{"reason"}),
	}
	for _, reason := range []string{DropBufferFull, DropAppendError, DropRefused, DropClosed} {
		r.dropped.WithLabelValues(reason) // shown at 0 before the first drop
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{r.appended, r.dropped, r.suppressed} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, err
			}
		}
	}
	go r.run()
	return r, nil
}

// Record queues e; it never blocks and never fails the read. A zero
// e.Time is now. A refusal (IsRefusal) over its address's limit is only
// counted, and summarised when the address's window ends.
func (r *Recorder) Record(e Entry) {
	if r == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	if IsRefusal(e) {
		allowed, due := r.refusals.allow(e, time.Now())
		for _, s := range due {
			r.queue(s)
		}
		if !allowed {
			r.suppressed.Inc()
			return
		}
	}
	r.queue(e)
}

// queue puts e in the buffer, or counts it dropped.
func (r *Recorder) queue(e Entry) {
	if r.closed.Load() {
		r.drop(DropClosed, 1)
		return
	}
	select {
	case r.buf <- e:
	default:
		r.drop(DropBufferFull, 1)
	}
}

// Dropped is how many entries were dropped so far.
func (r *Recorder) Dropped() int64 {
	if r == nil {
		return 0
	}
	return r.droppedN.Load()
}

// Close stops accepting entries and sends what the buffer holds, giving up
// (and counting the rest as dropped) when ctx ends.
func (r *Recorder) Close(ctx context.Context) {
	if r == nil {
		return
	}
	r.once.Do(func() {
		r.closeCtx.Store(&ctx)
		r.closed.Store(true)
		close(r.stop)
	})
	<-r.done
}

func (r *Recorder) run() {
	defer close(r.done)
	batch := make([]Entry, 0, r.cfg.BatchSize)
	batchBytes := 0
	tick := time.NewTicker(r.cfg.FlushInterval)
	defer tick.Stop()
	for {
		select {
		case e := <-r.buf:
			batch = append(batch, e)
			batchBytes += entryBytes(e)
			if len(batch) < r.cfg.BatchSize && batchBytes < r.cfg.MaxBatchBytes {
				continue
			}
		case <-tick.C:
			r.queueSummaries(false)
		case <-r.stop:
			r.queueSummaries(true)
			r.drain(batch)
			// What a Record racing Close queued after the drain is lost:
			// count it.
			r.drop(DropClosed, len(r.buf))
			return
		}
		for rest := batch; len(rest) > 0; {
			n := batchLen(rest, r.cfg.BatchSize, r.cfg.MaxBatchBytes)
			r.send(rest[:n])
			rest = rest[n:]
		}
		batch, batchBytes = batch[:0], 0
	}
}

// queueSummaries queues the summaries of the refusal windows that have
// ended (all of them at Close), past the closed flag: Close sends them.
func (r *Recorder) queueSummaries(all bool) {
	for _, s := range r.refusals.due(time.Now(), all) {
		select {
		case r.buf <- s:
		default:
			r.drop(DropBufferFull, 1)
		}
	}
}

// drain sends the batch and everything buffered, within Close's context.
func (r *Recorder) drain(batch []Entry) {
	ctx := *r.closeCtx.Load()
	for {
		for len(batch) < r.cfg.BatchSize {
			select {
			case e := <-r.buf:
				batch = append(batch, e)
				continue
			default:
			}
			break
		}
		if len(batch) == 0 {
			return
		}
		for rest := batch; len(rest) > 0; {
			n := batchLen(rest, r.cfg.BatchSize, r.cfg.MaxBatchBytes)
			if ctx.Err() != nil {
				r.drop(DropClosed, len(rest)) // run counts what the buffer still holds
				return
			}
			r.sendOnce(ctx, rest[:n])
			rest = rest[n:]
		}
		batch = batch[:0]
	}
}

// batchLen is how many of entries, from the first, the next append
// carries: at most maxEntries, and no more than maxBytes by entryBytes'
// estimate, but always at least one (an entry over the bound goes alone).
func batchLen(entries []Entry, maxEntries, maxBytes int) int {
	size := 0
	for i, e := range entries {
		if i == maxEntries {
			return i
		}
		size += entryBytes(e)
		if size > maxBytes && i > 0 {
			return i
		}
	}
	return len(entries)
}

// entryBytes estimates e's size on the wire, as event will cut it: its
// text, 8 bytes a chunk id, and each field's few bytes of tag and length
// (entryOverhead, a generous round figure). An estimate is enough: the
// bound sits far below what gRPC refuses.
func entryBytes(e Entry) int {
	const entryOverhead, perID = 64, 3
	n := entryOverhead
	for _, s := range []string{e.Principal, e.PrincipalKind, e.OAuthIssuer, e.ClientAddress, e.ClientName, e.Tool, e.Outcome, e.RequestID} {
		n += min(len(s), MaxLabel)
	}
	n += min(len(e.Target), MaxText)
	if e.Query != "" {
		n += min(len(e.Query), MaxText) + sha256.Size*2
	}
	n += min(len(e.ChunkIDs), MaxChunkIDs) * 8
	for _, d := range e.DocumentIDs[:min(len(e.DocumentIDs), MaxDocumentIDs)] {
		n += min(len(d), docid.MaxBytes) + perID
	}
	return n
}

// send appends a batch, retrying with backoff while the buffer has room
// for what arrives meanwhile; once it is full, the batch is dropped so the
// newest entries keep their place. A batch auth refuses for good is
// dropped at once: retrying it would only hold up the entries behind it.
func (r *Recorder) send(batch []Entry) {
	backoff := 100 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), r.cfg.Timeout)
		err := r.append(ctx, batch)
		cancel()
		if err == nil {
			return
		}
		if !retryable(err) {
			r.drop(DropRefused, len(batch))
			r.logDrop("the auth service refused an audit batch", err)
			return
		}
		if len(r.buf) >= cap(r.buf) {
			r.drop(DropAppendError, len(batch))
			r.logDrop("the audit buffer is full while the auth service refuses appends", err)
			return
		}
		select {
		case <-r.stop:
			// Shutting down: one last try, within Close's deadline.
			r.sendOnce(*r.closeCtx.Load(), batch)
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// sendOnce appends a batch once (at shutdown), dropping it on failure.
func (r *Recorder) sendOnce(ctx context.Context, batch []Entry) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	if err := r.append(ctx, batch); err != nil {
		if !retryable(err) {
			r.drop(DropRefused, len(batch))
			r.logDrop("the auth service refused an audit batch", err)
			return
		}
		r.drop(DropClosed, len(batch))
		r.logDrop("audit entries could not be sent at shutdown", err)
	}
}

// retryable reports whether an append that failed with err may succeed
// later. Only a refusal of the batch's content (INVALID_ARGUMENT,
// OUT_OF_RANGE) answers the same to the same batch; anything else, auth
// down, overloaded or failing to write (a database fault, a revoked grant,
// a credential being rotated), is the server's or an operator's to fix,
// and the entries wait for it while the buffer has room.
func retryable(err error) bool {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.OutOfRange:
		return false
	}
	return true
}

func (r *Recorder) append(ctx context.Context, batch []Entry) error {
	req := &authv1.AppendAuditEventsRequest{Events: make([]*authv1.AuditEvent, len(batch))}
	for i, e := range batch {
		req.Events[i] = r.event(e)
	}
	if _, err := r.appender.AppendAuditEvents(ctx, req); err != nil {
		return err
	}
	r.appended.Add(float64(len(batch)))
	return nil
}

// event is the wire form of e; the query's hash is taken here, off the
// read's path.
//
// Text a caller chooses (a User-Agent, a decoded URL path, a query) may
// hold bytes that are not UTF-8, which proto refuses to send: the whole
// batch would fail. Such bytes become U+FFFD, and text is cut to MaxText
// or MaxLabel; the query's hash is of the whole query.
func (r *Recorder) event(e Entry) *authv1.AuditEvent {
	txt := label
	long := func(s string) string { return Cut(strings.ToValidUTF8(s, "\uFFFD"), MaxText) }
	ids := e.ChunkIDs
	if len(ids) > MaxChunkIDs {
		ids = ids[:MaxChunkIDs]
	}
	var docs []string
	if n := min(len(e.DocumentIDs), MaxDocumentIDs); n > 0 {
		docs = make([]string, n)
		for i, d := range e.DocumentIDs[:n] {
			docs[i] = Cut(strings.ToValidUTF8(d, "\uFFFD"), docid.MaxBytes)
		}
	}
	ev := &authv1.AuditEvent{
		Time: timestamppb.New(e.Time), Principal: txt(e.Principal), PrincipalKind: txt(e.PrincipalKind),
		OauthIssuer: txt(e.OAuthIssuer), ClientAddress: txt(e.ClientAddress), ClientName: txt(e.ClientName),
		Tool: txt(e.Tool), Target: long(e.Target), ChunkIds: ids, DocumentIds: docs, Outcome: txt(e.Outcome), RequestId: txt(e.RequestID),
	}
	if e.Query != "" {
		ev.QuerySha256 = QueryHash(e.Query)
		if r.cfg.QueryText {
			ev.Query = long(e.Query)
		}
	}
	return ev
}

// label is s as the trail keeps a label field: valid UTF-8, cut to
// MaxLabel.
func label(s string) string { return Cut(strings.ToValidUTF8(s, "\uFFFD"), MaxLabel) }

// QueryHash is the SHA-256 of a query's text in hex, as the trail keeps it.
func QueryHash(q string) string {
	sum := sha256.Sum256([]byte(q))
	return hex.EncodeToString(sum[:])
}

func (r *Recorder) drop(reason string, n int) {
	if n <= 0 {
		return
	}
	r.dropped.WithLabelValues(reason).Add(float64(n))
	r.droppedN.Add(int64(n))
	if reason == DropBufferFull {
		r.logDrop("the audit buffer is full", nil)
	}
}

// logDrop says entries are being lost, at most once a minute, with how
// many since the last line.
func (r *Recorder) logDrop(msg string, err error) {
	r.logMu.Lock()
	defer r.logMu.Unlock()
	now := time.Now()
	total := r.droppedN.Load()
	if !r.lastLog.IsZero() && now.Sub(r.lastLog) < time.Minute {
		return
	}
	attrs := []any{"dropped_since_last_report", total - r.unreported, "dropped_total", total}
	if err != nil {
		attrs = append(attrs, "error", err.Error())
	}
	r.cfg.Logger.Warn(msg+": audit entries are being dropped", attrs...)
	r.lastLog, r.unreported = now, total
}

// DroppedCounter is the counter of entries dropped for reason.
func (r *Recorder) DroppedCounter(reason string) prometheus.Counter {
	return r.dropped.WithLabelValues(reason)
}
