package keys

import (
	"context"
	"errors"
	"time"
)

// ErrInactive means the key asked for rotation is revoked or expired.
var ErrInactive = errors.New("key is revoked or expired")

// Clock returns the current time; tests pass a controllable one.
type Clock func() time.Time

// Manager implements the admin operations on keys.
type Manager struct {
	store *Store
	clock Clock
	// forget drops a key from the local verified-key cache, so changes made
	// through this replica apply at once (other replicas: within the cache TTL).
	forget func(id string)
}

// NewManager returns a manager; forget may be nil.
func NewManager(store *Store, clock Clock, forget func(id string)) *Manager {
	if clock == nil {
		clock = time.Now
	}
	if forget == nil {
		forget = func(string) {}
	}
	return &Manager{store: store, clock: clock, forget: forget}
}

// NewKey describes a key to create.
type NewKey struct {
	Name, Owner string
	Limits      Limits
	Scopes      Scopes
	// Groups are the key's caller groups (platform/access.ParseGroups).
	Groups []string
	// ExpiresIn is the lifetime; zero means no expiry.
	ExpiresIn time.Duration
}

// Issued is a created key and, once, its full text.
type Issued struct {
	Key  *Key
	Full string
}

// now truncates to microseconds, PostgreSQL's resolution, so what a caller
// is told equals what is stored.
func (m *Manager) now() time.Time { return m.clock().Truncate(time.Microsecond) }

// Create issues a new key.
func (m *Manager) Create(ctx context.Context, nk NewKey) (Issued, error) {
	now := m.now()
	k := &Key{Name: nk.Name, Owner: nk.Owner, Limits: nk.Limits, Scopes: nk.Scopes, Groups: nk.Groups, CreatedAt: now}
	if nk.ExpiresIn > 0 {
		t := now.Add(nk.ExpiresIn)
		k.ExpiresAt = &t
	}
	// A duplicate 80-bit random id is next to impossible; retry anyway rather
	// than fail a caller for it.
	for attempt := 0; ; attempt++ {
		g, err := Generate()
		if err != nil {
			return Issued{}, err
		}
		k.ID, k.Hash = g.ID, g.Hash[:]
		err = m.store.Insert(ctx, k)
		if err == nil {
			m.forget(k.ID)
			return Issued{Key: k, Full: g.Full}, nil
		}
		if !errors.Is(err, errDuplicateID) || attempt >= 2 {
			return Issued{}, err
		}
	}
}

// List lists keys newest first.
func (m *Manager) List(ctx context.Context, owner string, includeInactive bool) ([]*Key, error) {
	return m.store.List(ctx, owner, includeInactive, m.clock())
}

// Revoke revokes a key; it is refused from this replica at once and from
// every replica within the cache TTL.
func (m *Manager) Revoke(ctx context.Context, id string) (*Key, error) {
	k, err := m.store.Revoke(ctx, id, m.now())
	if err != nil {
		return nil, err
	}
	m.forget(id)
	return k, nil
}

// Rotation asks for a successor key.
type Rotation struct {
	// Overlap is how long the old key keeps working; zero revokes it now.
	Overlap time.Duration
	// ExpiresIn is the new key's lifetime; nil keeps the old key's lifetime
	// (created_at to expires_at), or DefaultLifetime if it had none.
	ExpiresIn *time.Duration
	// DefaultLifetime is the successor's lifetime when neither ExpiresIn nor
	// the old key gives one; zero means no expiry.
	DefaultLifetime time.Duration
}

// Rotate issues a successor with the same name, owner, limits and scopes; the old key
// expires after the overlap (never later than it would have anyway).
func (m *Manager) Rotate(ctx context.Context, id string, r Rotation) (Issued, *Key, error) {
	now := m.now()
	var full string
	next, prev, err := m.store.rotate(ctx, id, func(old *Key) (*Key, *time.Time, *time.Time, error) {
		if old.StatusAt(now) != Active {
			return nil, nil, nil, ErrInactive
		}
		g, err := Generate()
		if err != nil {
			return nil, nil, nil, err
		}
		full = g.Full
		next := &Key{ID: g.ID, Hash: g.Hash[:], Name: old.Name, Owner: old.Owner,
			Limits: old.Limits, Scopes: old.Scopes, Groups: old.Groups, RotatedFrom: old.ID, CreatedAt: now}
		switch {
		case r.ExpiresIn != nil && *r.ExpiresIn > 0:
			t := now.Add(*r.ExpiresIn)
			next.ExpiresAt = &t
		case r.ExpiresIn == nil && old.ExpiresAt != nil:
			t := now.Add(old.ExpiresAt.Sub(old.CreatedAt))
			next.ExpiresAt = &t
		case r.ExpiresIn == nil && r.DefaultLifetime > 0:
			t := now.Add(r.DefaultLifetime)
			next.ExpiresAt = &t
		}
		expiresAt, revokedAt := old.ExpiresAt, old.RevokedAt
		if r.Overlap <= 0 {
			revokedAt = &now
		} else if end := now.Add(r.Overlap); expiresAt == nil || end.Before(*expiresAt) {
			expiresAt = &end
		}
		return next, expiresAt, revokedAt, nil
	})
	if err != nil {
		return Issued{}, nil, err
	}
	m.forget(id)
	m.forget(next.ID)
	return Issued{Key: next, Full: full}, prev, nil
}
