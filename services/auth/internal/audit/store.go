// Package audit is the auth service's audit trail (docs/AUDIT.md): it
// appends the reads the edges report to auth.audit_events, lists them for
// operators, and prunes what is older than the retention through the
// database function that alone may delete (00016_audit_events.sql).
package audit

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Event is one stored read.
type Event struct {
	ID            int64
	Time          time.Time
	RecordedAt    time.Time
	Edge          string
	Principal     string
	PrincipalKind string
	OAuthIssuer   string
	ClientAddress string
	ClientName    string
	Tool          string
	Target        string
	// Query is nil when only its hash was kept.
	Query       *string
	QuerySHA256 string
	ChunkIDs    []int64
	// DocumentIDs are the external ids of the documents returned.
	DocumentIDs []string
	Outcome     string
	RequestID   string
}

// Filter selects events for List.
type Filter struct {
	Since     time.Time // zero: no bound
	Principal string
	Tool      string
	// DocumentID keeps the events whose answer returned this document.
	DocumentID string
	Limit      int
	// Before continues a listing: only events older than this position.
	Before *Position
}

// Position is where a page ended: events are ordered by (time, id) descending.
type Position struct {
	Time time.Time
	ID   int64
}

// ErrBadToken is a page token this service did not issue.
var ErrBadToken = errors.New("invalid page token")

// Token encodes p for the next page.
func (p Position) Token() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(p.Time.UnixMicro(), 10) + "." + strconv.FormatInt(p.ID, 10)))
}

// ParseToken reads a Token.
func ParseToken(s string) (*Position, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, ErrBadToken
	}
	t, id, ok := strings.Cut(string(b), ".")
	if !ok {
		return nil, ErrBadToken
	}
	us, err1 := strconv.ParseInt(t, 10, 64)
	n, err2 := strconv.ParseInt(id, 10, 64)
	if err1 != nil || err2 != nil {
		return nil, ErrBadToken
	}
	return &Position{Time: time.UnixMicro(us).UTC(), ID: n}, nil
}

// Store reads and appends auth.audit_events.
type Store struct{ pool *pgxpool.Pool }

// NewStore returns a store on pool (the auth service's role).
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Append stores events in one statement: all or none.
func (s *Store) Append(ctx context.Context, events []Event) error {
	if len(events) == 0 {
		return nil
	}
	rows := make([][]any, len(events))
	for i, e := range events {
		ids, docs := e.ChunkIDs, e.DocumentIDs
		if ids == nil {
			ids = []int64{}
		}
		if docs == nil {
			docs = []string{}
		}
		rows[i] = []any{e.Time, e.Edge, e.Principal, e.PrincipalKind, e.OAuthIssuer, e.ClientAddress, e.ClientName,
			e.Tool, e.Target, e.Query, e.QuerySHA256, ids, docs, e.Outcome, e.RequestID}
	}
	// COPY is one round trip however large the batch, and atomic.
	_, err := s.pool.CopyFrom(ctx, pgx.Identifier{"auth", "audit_events"},
		[]string{"occurred_at", "edge", "principal", "principal_kind", "oauth_issuer", "client_address", "client_name",
			"tool", "target", "query", "query_sha256", "chunk_ids", "document_ids", "outcome", "request_id"},
		pgx.CopyFromRows(rows))
	if err != nil {
		return fmt.Errorf("append %d audit events: %w", len(events), err)
	}
	return nil
}

// List returns up to f.Limit events matching f, newest first.
func (s *Store) List(ctx context.Context, f Filter) ([]Event, error) {
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if !f.Since.IsZero() {
		where = append(where, "occurred_at >= "+arg(f.Since))
	}
	if f.Principal != "" {
		where = append(where, "principal = "+arg(f.Principal))
	}
	if f.Tool != "" {
		where = append(where, "tool = "+arg(f.Tool))
	}
	if f.DocumentID != "" {
		// Containment, which the GIN index on document_ids serves (00021).
		where = append(where, "document_ids @> ARRAY["+arg(f.DocumentID)+"::text]")
	}
	if f.Before != nil {
		where = append(where, "(occurred_at, id) < ("+arg(f.Before.Time)+", "+arg(f.Before.ID)+")")
	}
	q := `SELECT id, occurred_at, recorded_at, edge, principal, principal_kind, oauth_issuer, client_address,
		client_name, tool, target, query, query_sha256, chunk_ids, document_ids, outcome, request_id FROM auth.audit_events`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY occurred_at DESC, id DESC LIMIT " + arg(f.Limit)
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list audit events: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Event, error) {
		var e Event
		err := r.Scan(&e.ID, &e.Time, &e.RecordedAt, &e.Edge, &e.Principal, &e.PrincipalKind, &e.OAuthIssuer,
			&e.ClientAddress, &e.ClientName, &e.Tool, &e.Target, &e.Query, &e.QuerySHA256, &e.ChunkIDs, &e.DocumentIDs, &e.Outcome, &e.RequestID)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("list audit events: %w", err)
	}
	return out, nil
}

// Prune deletes the events recorded longer than keep ago (at least a day:
// the database function refuses less) and returns how many.
func (s *Store) Prune(ctx context.Context, keep time.Duration) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, "SELECT auth.prune_audit_events($1)", keep).Scan(&n); err != nil {
		return 0, fmt.Errorf("prune audit events older than %s: %w", keep, err)
	}
	return n, nil
}

// RunRetention prunes every interval until ctx ends; keep 0 keeps
// everything (nothing runs).
func (s *Store) RunRetention(ctx context.Context, keep, interval time.Duration, log *slog.Logger) {
	if keep <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		n, err := s.Prune(ctx, keep)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("audit retention: pruning failed; retrying at the next interval", "error", err.Error())
		case n > 0:
			log.Info("audit retention: pruned events", "deleted", n, "retention", keep.String())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
