package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Errors of the scheduled-source calls.
var (
	ErrSourceExists = errors.New("a source of that name exists")
	// ErrSourceBusy: another run (on this or another replica) holds the
	// source's lease.
	ErrSourceBusy = errors.New("the source is being synced")
	// ErrScheduledSource: a client's sync stream named a source the
	// service syncs itself.
	ErrScheduledSource = errors.New("the source is synced by the service (bmcisctl sources), not by a client")
)

const scheduleColumns = `s.kind, s.settings, s.schedule_seconds, s.next_run_at, s.last_run_at, s.last_status,
	s.last_error, s.consecutive_failures, coalesce(s.lease_until > now(), false)`

type scheduleScan struct {
	sc         Schedule
	settings   []byte
	every      int
	next, last *time.Time
}

func (x *scheduleScan) targets() []any {
	return []any{&x.sc.Kind, &x.settings, &x.every, &x.next, &x.last, &x.sc.LastStatus, &x.sc.LastError, &x.sc.Failures, &x.sc.Running}
}

func (x *scheduleScan) schedule() Schedule {
	sc := x.sc
	sc.Settings = map[string]string{}
	_ = json.Unmarshal(x.settings, &sc.Settings) // a CHECK keeps it an object
	sc.Every = time.Duration(x.every) * time.Second
	if x.next != nil {
		sc.NextRunAt = *x.next
	}
	if x.last != nil {
		sc.LastRunAt = *x.last
	}
	return sc
}

// NewSource is a source the service syncs.
type NewSource struct {
	Name, Kind, Root string
	Settings         map[string]string
	Every            time.Duration // 0: on demand only
	// DefaultAccess is what its documents get (nil: everyone).
	DefaultAccess []string
}

// AddSource records a source the service syncs; its first run is due now.
func (s *Store) AddSource(ctx context.Context, n NewSource) error {
	settings, err := json.Marshal(n.Settings)
	if err != nil {
		return fmt.Errorf("add source %q: %w", n.Name, err)
	}
	var next *time.Time
	if n.Every > 0 {
		now := time.Now()
		next = &now
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO sources (name, root, kind, settings, schedule_seconds, next_run_at, default_access)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, n.Name, n.Root, n.Kind, settings, int(n.Every/time.Second), next, accessArg(n.DefaultAccess))
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		return ErrSourceExists
	}
	if err != nil {
		return fmt.Errorf("add source %q: %w", n.Name, err)
	}
	return nil
}

// Claimed is a source whose lease a run holds.
type Claimed struct {
	Name     string
	Kind     string
	Settings map[string]string
	Cursor   []byte
	Every    time.Duration
	Failures int
}

const claimedColumns = `name, kind, settings, cursor, schedule_seconds, consecutive_failures`

func scanClaimed(row pgx.Row) (Claimed, error) {
	var c Claimed
	var settings []byte
	var every int
	if err := row.Scan(&c.Name, &c.Kind, &settings, &c.Cursor, &every, &c.Failures); err != nil {
		return c, err
	}
	c.Every = time.Duration(every) * time.Second
	c.Settings = map[string]string{}
	_ = json.Unmarshal(settings, &c.Settings)
	return c, nil
}

// ClaimDue takes the lease of one scheduled source that is due and not
// leased (ok false: none), until now+lease.
func (s *Store) ClaimDue(ctx context.Context, owner string, lease time.Duration) (Claimed, bool, error) {
	c, err := scanClaimed(s.pool.QueryRow(ctx, `UPDATE sources SET lease_owner = $1, lease_until = now() + $2::interval
		WHERE name = (SELECT name FROM sources
			WHERE schedule_seconds > 0 AND next_run_at <= now() AND (lease_until IS NULL OR lease_until < now())
			ORDER BY next_run_at LIMIT 1 FOR UPDATE SKIP LOCKED)
		RETURNING `+claimedColumns, owner, lease.String()))
	if errors.Is(err, pgx.ErrNoRows) {
		return c, false, nil
	}
	if err != nil {
		return c, false, fmt.Errorf("claim a due source: %w", err)
	}
	return c, true, nil
}

// Claim takes the lease of the named source the service syncs:
// ErrNotFound when there is none (or it is a client's), ErrSourceBusy when
// another run holds it.
func (s *Store) Claim(ctx context.Context, name, owner string, lease time.Duration) (Claimed, error) {
	c, err := scanClaimed(s.pool.QueryRow(ctx, `UPDATE sources SET lease_owner = $2, lease_until = now() + $3::interval
		WHERE name = $1 AND settings <> '{}' AND (lease_until IS NULL OR lease_until < now())
		RETURNING `+claimedColumns, name, owner, lease.String()))
	if errors.Is(err, pgx.ErrNoRows) {
		var exists bool
		if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM sources WHERE name = $1 AND settings <> '{}')`, name).Scan(&exists); err != nil {
			return c, fmt.Errorf("claim source %q: %w", name, err)
		}
		if exists {
			return c, ErrSourceBusy
		}
		return c, ErrNotFound
	}
	if err != nil {
		return c, fmt.Errorf("claim source %q: %w", name, err)
	}
	return c, nil
}

// RunResult is what a run of a scheduled source did.
type RunResult struct {
	Counts SyncCounts
	// Err is the failure in words ("" : the run succeeded); a failed run
	// keeps the last cursor and the documents.
	Err    string
	Cursor []byte // the kind's new state (successful runs)
	// NextRunAt is when the source is due again (zero: not scheduled).
	NextRunAt time.Time
}

// FinishRun records a run and releases the lease, when owner still holds
// it (a run that outlived its lease records nothing).
func (s *Store) FinishRun(ctx context.Context, name, owner string, r RunResult) error {
	var next *time.Time
	if !r.NextRunAt.IsZero() {
		next = &r.NextRunAt
	}
	var err error
	if r.Err == "" {
		_, err = s.pool.Exec(ctx, `UPDATE sources SET lease_owner = NULL, lease_until = NULL, cursor = $3, next_run_at = $4,
				last_run_at = now(), last_status = 'ok', last_error = '', consecutive_failures = 0,
				last_sync_at = now(), last_written = $5, last_unchanged = $6, last_failed = $7, last_deleted = $8
			WHERE name = $1 AND lease_owner = $2`, name, owner, r.Cursor, next,
			r.Counts.Written, r.Counts.Unchanged, r.Counts.Failed, r.Counts.Deleted)
	} else {
		_, err = s.pool.Exec(ctx, `UPDATE sources SET lease_owner = NULL, lease_until = NULL, next_run_at = $4,
				last_run_at = now(), last_status = 'failed', last_error = $3, consecutive_failures = consecutive_failures + 1
			WHERE name = $1 AND lease_owner = $2`, name, owner, r.Err, next)
	}
	if err != nil {
		return fmt.Errorf("record run of source %q: %w", name, err)
	}
	return nil
}

// Release gives a source's lease back without recording a run.
func (s *Store) Release(ctx context.Context, name, owner string) error {
	if _, err := s.pool.Exec(ctx, `UPDATE sources SET lease_owner = NULL, lease_until = NULL
		WHERE name = $1 AND lease_owner = $2`, name, owner); err != nil {
		return fmt.Errorf("release source %q: %w", name, err)
	}
	return nil
}

// SourceDocuments lists the external ids of a source's documents.
func (s *Store) SourceDocuments(ctx context.Context, source string) ([]string, error) {
	return s.SourceDocumentsExcept(ctx, source, []string{})
}

// DropSource deletes a source's row, when owner holds its lease (its
// documents are deleted first, one by one, through DeleteDocument).
func (s *Store) DropSource(ctx context.Context, name, owner string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM sources WHERE name = $1 AND (lease_owner = $2 OR settings = '{}')`, name, owner)
	if err != nil {
		return fmt.Errorf("remove source %q: %w", name, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}
