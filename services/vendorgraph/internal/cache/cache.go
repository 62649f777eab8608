// Package cache keeps recent replies in an LRU with a TTL and drops them all
// when the graph changes: on this replica right after an import commits, on
// every other replica when PostgreSQL delivers the import's NOTIFY.
package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bmcis/knowledge/platform/lrucache"
)

// Cache is an LRU of replies with a TTL (lrucache). It serves entries only
// while it is live, that is while it knows it will hear about changes: a
// replica that lost its LISTEN connection could miss another replica's
// import, so until it listens again it neither serves nor stores.
//
// A reply computed from data read before an invalidation must not be stored
// after it: callers take Epoch before reading and Put stores only if no
// invalidation happened since.
type Cache[K comparable, V any] struct {
	*lrucache.Cache[K, V]
}

// New returns a cache of at most size entries, each kept at most ttl. A size
// of 0 disables it. The cache starts live; Watch makes it depend on a LISTEN
// connection.
func New[K comparable, V any](size int, ttl time.Duration) *Cache[K, V] {
	return &Cache[K, V]{lrucache.New[K, V](size, ttl)}
}

// Suspend stops the cache serving and storing until Watch listens: a
// replica that may share the database with others calls it at start, so no
// reply is cached before it can hear about their imports.
func (c *Cache[K, V]) Suspend() { c.SetLive(false) }

// Watch keeps a connection LISTENing on channels and invalidates the cache on
// each notification, until ctx ends. Notifications whose payload is self come
// from this replica, which invalidated its cache right after the commit:
// they are skipped, so a reply cached since is not dropped for nothing. The cache is not live until the first
// LISTEN succeeds, and stops being live whenever the connection is lost;
// Watch reconnects with backoff. It returns when ctx ends.
func (c *Cache[K, V]) Watch(ctx context.Context, pool *pgxpool.Pool, channels []string, self string, log *slog.Logger) {
	if !c.Enabled() {
		return
	}
	c.SetLive(false)
	backoff := 100 * time.Millisecond
	failures := 0
	for ctx.Err() == nil {
		listened, err := c.listen(ctx, pool, channels, self)
		c.SetLive(false)
		if listened {
			backoff = 100 * time.Millisecond
		}
		if ctx.Err() != nil {
			return
		}
		if listened {
			failures = 0
		}
		failures++
		// Attempts repeat every half second in an outage: say so once,
		// then about once a minute.
		if failures == 1 || failures%120 == 0 {
			log.Warn("cache invalidation listener lost; cache off until it reconnects",
				"error", err.Error(), "retry_in", backoff.String(), "attempts", failures)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, maxListenBackoff)
	}
}

// listen runs one LISTEN session. The connection is taken out of the pool
// (hijacked) so that it is never handed to a query while it listens.
func (c *Cache[K, V]) listen(ctx context.Context, pool *pgxpool.Pool, channels []string, self string) (listened bool, err error) {
	pc, err := pool.Acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("acquire listener connection: %w", err)
	}
	conn := pc.Hijack()
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	for _, channel := range channels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
			return false, fmt.Errorf("listen on %s: %w", channel, err)
		}
	}
	// Anything committed before LISTEN took effect was not announced to us.
	c.SetLive(true)
	for {
		// Wake up now and then to ping: a connection that died silently
		// (a dropped route, a failed-over database) would otherwise leave
		// the cache live while other replicas' imports go unannounced.
		waitCtx, cancel := context.WithTimeout(ctx, listenerPing)
		n, err := conn.WaitForNotification(waitCtx)
		cancel()
		if err != nil {
			if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				pingCtx, cancelPing := context.WithTimeout(ctx, 5*time.Second)
				err = conn.Ping(pingCtx)
				cancelPing()
				if err == nil {
					continue
				}
				return true, fmt.Errorf("ping listener connection: %w", err)
			}
			return true, fmt.Errorf("wait for notification: %w", err)
		}
		if self == "" || n.Payload != self {
			c.Invalidate()
		}
	}
}

// maxListenBackoff bounds the wait between LISTEN attempts. It is short so
// that the cache comes back within about a second of the database, however
// long the outage was; an attempt is one connection try, cheap to repeat.
const maxListenBackoff = 500 * time.Millisecond

// listenerPing is how often an idle listener checks its connection.
const listenerPing = 30 * time.Second
