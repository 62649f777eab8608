package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Source is a named source with its live counts and its last sync.
type Source struct {
	Name       string
	Root       string
	Documents  int
	Chunks     int
	LastSyncAt time.Time // zero: no sync completed yet
	LastSync   SyncCounts
	Schedule
	// DefaultAccess is what documents without a list of their own get
	// (nil: everyone).
	DefaultAccess []string
}

// Schedule is how and when the service itself syncs a source (zero for a
// folder synced by bmcisctl).
type Schedule struct {
	Kind     string
	Settings map[string]string
	Every    time.Duration // 0: not scheduled (synced by a client, or on demand)
	// NextRunAt, LastRunAt: zero when none.
	NextRunAt, LastRunAt time.Time
	LastStatus           string // "", "ok", "failed"
	LastError            string
	Failures             int  // consecutive failed runs
	Running              bool // a replica holds the source's lease
}

// SyncCounts is what one sync did.
type SyncCounts struct {
	Written, Unchanged, Failed, Deleted int
}

// EnsureSource records a source (or updates its root) before its documents
// are written, so a sync cut short still shows in the list.
// A source the service syncs itself (one added by AddSource) is not a
// client's to sync: ErrScheduledSource.
func (s *Store) EnsureSource(ctx context.Context, name, root string) error {
	tag, err := s.pool.Exec(ctx, `INSERT INTO sources (name, root) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET root = EXCLUDED.root WHERE sources.settings = '{}'`, name, root)
	if err != nil {
		return fmt.Errorf("record source %q: %w", name, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrScheduledSource
	}
	return nil
}

// FinishSync records a completed sync of a source.
func (s *Store) FinishSync(ctx context.Context, name string, c SyncCounts) error {
	_, err := s.pool.Exec(ctx, `UPDATE sources SET last_sync_at = now(), last_written = $2, last_unchanged = $3,
		last_failed = $4, last_deleted = $5 WHERE name = $1`, name, c.Written, c.Unchanged, c.Failed, c.Deleted)
	if err != nil {
		return fmt.Errorf("record sync of %q: %w", name, err)
	}
	return nil
}

// SourceDocumentsExcept lists the external ids of source's documents that
// are not in keep: what a mirroring sync deletes.
func (s *Store) SourceDocumentsExcept(ctx context.Context, source string, keep []string) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT external_id FROM documents
		WHERE source = $1 AND NOT (external_id = ANY($2::text[])) ORDER BY external_id`, source, keep)
	if err != nil {
		return nil, fmt.Errorf("list documents of source %q: %w", source, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list documents of source %q: %w", source, err)
	}
	return ids, nil
}

// Sources lists every source by name with its document and chunk counts;
// when categories is non-nil only documents in those categories count, and
// only the sources holding at least one of them are listed (a scoped key
// does not learn the names of sources it cannot read). access, when not
// nil, is the caller's access set, and scopes the same way: only documents
// it may read count, and only sources holding one are listed.
func (s *Store) Sources(ctx context.Context, categories, access []string) ([]Source, error) {
	rows, err := s.pool.Query(ctx, `SELECT s.name, s.root, coalesce(d.docs, 0), coalesce(d.chunks, 0), s.last_sync_at,
			s.last_written, s.last_unchanged, s.last_failed, s.last_deleted, s.default_access, `+scheduleColumns+`
		FROM sources s LEFT JOIN (
			SELECT source, count(*) AS docs, sum(chunk_count) AS chunks FROM documents
			WHERE source <> '' AND ($1::text[] IS NULL OR category = ANY($1::text[])) AND `+AccessAllows("access", "$2")+` GROUP BY source
		) d ON d.source = s.name
		WHERE ($1::text[] IS NULL AND $2::text[] IS NULL) OR d.docs IS NOT NULL
		ORDER BY s.name`, categories, access)
	if err != nil {
		return nil, fmt.Errorf("list sources: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Source, error) {
		var src Source
		var last *time.Time
		sc := scheduleScan{}
		err := r.Scan(append([]any{&src.Name, &src.Root, &src.Documents, &src.Chunks, &last,
			&src.LastSync.Written, &src.LastSync.Unchanged, &src.LastSync.Failed, &src.LastSync.Deleted, &src.DefaultAccess}, sc.targets()...)...)
		if last != nil {
			src.LastSyncAt = *last
		}
		src.Schedule = sc.schedule()
		return src, err
	})
	if err != nil {
		return nil, fmt.Errorf("list sources: %w", err)
	}
	return out, nil
}

// SyncState is a source's last completed sync, for the service's metrics.
type SyncState struct {
	Name       string
	LastSyncAt time.Time // zero: no sync completed yet
	Failed     int       // documents the last completed sync could not ingest
}

// SyncStates lists every source's last completed sync, reading only the
// sources table (no document counts), so a metrics scrape stays cheap.
func (s *Store) SyncStates(ctx context.Context) ([]SyncState, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, last_sync_at, last_failed FROM sources ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list sync states: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (SyncState, error) {
		var st SyncState
		var last *time.Time
		err := r.Scan(&st.Name, &last, &st.Failed)
		if last != nil {
			st.LastSyncAt = *last
		}
		return st, err
	})
	if err != nil {
		return nil, fmt.Errorf("list sync states: %w", err)
	}
	return out, nil
}

// AccessAllows is the SQL condition "a caller with access set param may
// read a row whose access list is column": the set is NULL (an
// unrestricted caller), the list is NULL (everyone's), or they share a
// principal. The one SQL spelling of platform/access.Allows.
func AccessAllows(column, param string) string {
	return "(" + param + "::text[] IS NULL OR " + column + " IS NULL OR " + column + " && " + param + "::text[])"
}
