package keys

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrNotFound means no key has the id.
var ErrNotFound = errors.New("key not found")

// Limits are a key's own limits by tier name (platform/ratelimit); a tier
// absent or zero uses the service default.
type Limits map[string]int64

// Scopes limit what a key may read; an empty list leaves that kind open.
type Scopes struct {
	Categories []string
	Tools      []string
}

// AllowsTool reports whether the key may use tool.
func (s Scopes) AllowsTool(tool string) bool {
	return len(s.Tools) == 0 || slices.Contains(s.Tools, tool)
}

// Key is a stored key: everything but the secret, plus the secret's hash.
type Key struct {
	ID     string
	Name   string
	Owner  string
	Limits Limits
	Scopes Scopes
	// Groups are the key's caller groups (platform/access bare names,
	// sorted): its access set is everyone plus group:G for each.
	Groups []string
	// User is the caller's user id, for an OAuth caller (its token's
	// subject; not stored): its access set holds user:User too.
	User        string
	Hash        []byte
	RotatedFrom string
	CreatedAt   time.Time
	LastUsedAt  *time.Time
	ExpiresAt   *time.Time
	RevokedAt   *time.Time
}

// Status is what a key is worth at a given time.
type Status int

// Statuses, in the order they are checked.
const (
	Active Status = iota
	Revoked
	Expired
)

// StatusAt reports the key's status at now. Revocation wins over expiry: it
// is the deliberate act, and the clearer message.
func (k *Key) StatusAt(now time.Time) Status {
	switch {
	case k.RevokedAt != nil && !k.RevokedAt.After(now):
		return Revoked
	case k.ExpiresAt != nil && !k.ExpiresAt.After(now):
		return Expired
	}
	return Active
}

// Store keeps keys in PostgreSQL (table api_keys).
type Store struct {
	pool *pgxpool.Pool
}

// NewStore returns a store on pool.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// keyColumns reads a key row and its per-tier limits (table api_key_limits).
const keyColumns = `key_id, secret_hash, name, owner,
	ARRAY(SELECT l.tier FROM api_key_limits l WHERE l.key_id = api_keys.key_id ORDER BY l.tier),
	ARRAY(SELECT l.limit_value FROM api_key_limits l WHERE l.key_id = api_keys.key_id ORDER BY l.tier),
	rotated_from, created_at, last_used_at, expires_at, revoked_at, scope_categories, scope_tools, groups`

// querier is what both a pool and a transaction offer.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func scanKey(row pgx.Row) (*Key, error) {
	var (
		k           Key
		tiers       []string
		values      []int32
		rotatedFrom *string
	)
	err := row.Scan(&k.ID, &k.Hash, &k.Name, &k.Owner, &tiers, &values,
		&rotatedFrom, &k.CreatedAt, &k.LastUsedAt, &k.ExpiresAt, &k.RevokedAt,
		&k.Scopes.Categories, &k.Scopes.Tools, &k.Groups)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	if len(tiers) > 0 {
		k.Limits = make(Limits, len(tiers))
		for i, t := range tiers {
			k.Limits[t] = int64(values[i])
		}
	}
	if rotatedFrom != nil {
		k.RotatedFrom = *rotatedFrom
	}
	return &k, nil
}

// nonNil stores an absent list as the empty array the columns require.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Get returns the key with id, or ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (*Key, error) {
	k, err := get(ctx, s.pool, id, false)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("load key %s: %w", id, err)
	}
	return k, err
}

func get(ctx context.Context, q querier, id string, forUpdate bool) (*Key, error) {
	sql := `SELECT ` + keyColumns + ` FROM api_keys WHERE key_id = $1`
	if forUpdate {
		sql += ` FOR UPDATE`
	}
	return scanKey(q.QueryRow(ctx, sql, id))
}

// errDuplicateID is returned by insert when the random key id already exists.
var errDuplicateID = errors.New("duplicate key id")

// insert writes the key and its own limits in one statement (a zero limit,
// "the service default", is not stored).
func insert(ctx context.Context, q querier, k *Key) error {
	tiers, values := []string{}, []int64{}
	for t, v := range k.Limits {
		if v > 0 {
			tiers, values = append(tiers, t), append(values, v)
		}
	}
	row := q.QueryRow(ctx, `WITH k AS (
			INSERT INTO api_keys (key_id, secret_hash, name, owner, rotated_from, created_at, expires_at,
				scope_categories, scope_tools, groups)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $12)
			ON CONFLICT (key_id) DO NOTHING
			RETURNING key_id),
		l AS (
			INSERT INTO api_key_limits (key_id, tier, limit_value)
			SELECT k.key_id, t.tier, t.v FROM k, unnest($10::text[], $11::int[]) AS t(tier, v))
		SELECT key_id FROM k`,
		k.ID, k.Hash, k.Name, k.Owner, nullString(k.RotatedFrom), k.CreatedAt, k.ExpiresAt,
		nonNil(k.Scopes.Categories), nonNil(k.Scopes.Tools), tiers, values, nonNil(k.Groups))
	var id string
	if err := row.Scan(&id); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return errDuplicateID
		}
		return err
	}
	return nil
}

// Insert stores a new key.
func (s *Store) Insert(ctx context.Context, k *Key) error {
	if err := insert(ctx, s.pool, k); err != nil {
		return fmt.Errorf("insert key %s: %w", k.ID, err)
	}
	return nil
}

// List returns keys newest first, optionally of one owner, optionally only
// those active at now.
func (s *Store) List(ctx context.Context, owner string, includeInactive bool, now time.Time) ([]*Key, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+keyColumns+` FROM api_keys
		WHERE ($1 = '' OR owner = $1)
		  AND ($2 OR ((revoked_at IS NULL OR revoked_at > $3) AND (expires_at IS NULL OR expires_at > $3)))
		ORDER BY created_at DESC, key_id`, owner, includeInactive, now)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	defer rows.Close()
	var out []*Key
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, fmt.Errorf("list keys: %w", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	return out, nil
}

// Revoke marks the key revoked at now, unless it already was (the earlier
// time stays), and returns it.
func (s *Store) Revoke(ctx context.Context, id string, now time.Time) (*Key, error) {
	k, err := scanKey(s.pool.QueryRow(ctx, `UPDATE api_keys
		SET revoked_at = COALESCE(revoked_at, $2)
		WHERE key_id = $1
		RETURNING `+keyColumns, id, now))
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("revoke key %s: %w", id, err)
	}
	return k, err
}

// rotate runs fn on the locked old key inside a transaction; fn returns the
// new key to insert and the old key's new expiry and revocation time.
func (s *Store) rotate(ctx context.Context, id string,
	fn func(old *Key) (next *Key, expiresAt, revokedAt *time.Time, err error),
) (next, prev *Key, err error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("rotate key %s: begin: %w", id, err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	old, err := get(ctx, tx, id, true)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("rotate key %s: load: %w", id, err)
	}
	next, expiresAt, revokedAt, err := fn(old)
	if err != nil {
		return nil, nil, err
	}
	if err := insert(ctx, tx, next); err != nil {
		return nil, nil, fmt.Errorf("rotate key %s: insert successor: %w", id, err)
	}
	prev, err = scanKey(tx.QueryRow(ctx, `UPDATE api_keys SET expires_at = $2, revoked_at = $3
		WHERE key_id = $1 RETURNING `+keyColumns, id, expiresAt, revokedAt))
	if err != nil {
		return nil, nil, fmt.Errorf("rotate key %s: update: %w", id, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, nil, fmt.Errorf("rotate key %s: commit: %w", id, err)
	}
	return next, prev, nil
}

// TouchLastUsed records last-use times for many keys in one statement; a
// time older than the stored one is ignored (replicas flush independently).
func (s *Store) TouchLastUsed(ctx context.Context, used map[string]time.Time) error {
	if len(used) == 0 {
		return nil
	}
	ids := make([]string, 0, len(used))
	times := make([]time.Time, 0, len(used))
	for id, t := range used {
		ids = append(ids, id)
		times = append(times, t)
	}
	_, err := s.pool.Exec(ctx, `UPDATE api_keys AS k SET last_used_at = u.t
		FROM unnest($1::text[], $2::timestamptz[]) AS u(id, t)
		WHERE k.key_id = u.id AND (k.last_used_at IS NULL OR k.last_used_at < u.t)`, ids, times)
	if err != nil {
		return fmt.Errorf("record last use of %d keys: %w", len(ids), err)
	}
	return nil
}
