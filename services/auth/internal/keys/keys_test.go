package keys_test

import (
	"context"
	"crypto/subtle"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	"github.com/bmcis/knowledge/services/auth/internal/authtest"
	"github.com/bmcis/knowledge/services/auth/internal/keys"
)

func TestGenerateFormat(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		g, err := keys.Generate()
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(g.Full, "bmcis_"+g.ID+"_"))
		id, secret, ok := keys.Parse(g.Full)
		require.True(t, ok)
		require.Equal(t, g.ID, id)
		require.Len(t, secret, 52, "256 bits in base32")
		require.Equal(t, g.Hash, keys.HashSecret(secret))
		require.NotContains(t, g.Full, "-")
		require.False(t, seen[g.ID] || seen[secret], "ids and secrets never repeat")
		seen[g.ID], seen[secret] = true, true
	}
}

func TestParseRejects(t *testing.T) {
	g, err := keys.Generate()
	require.NoError(t, err)
	_, secret, _ := keys.Parse(g.Full)
	for name, s := range map[string]string{
		"empty":          "",
		"no prefix":      g.ID + "_" + secret,
		"other prefix":   "sk_" + g.ID + "_" + secret,
		"no secret":      "bmcis_" + g.ID,
		"empty secret":   "bmcis_" + g.ID + "_",
		"short secret":   "bmcis_" + g.ID + "_" + secret[:40],
		"long secret":    g.Full + "a",
		"upper case":     strings.ToUpper(g.Full),
		"short id":       "bmcis_" + g.ID[:10] + "_" + secret,
		"bad id chars":   "bmcis_" + strings.Repeat("1", 16) + "_" + secret,
		"bad secret chr": "bmcis_" + g.ID + "_" + secret[:51] + "!",
		"extra part":     "bmcis_" + g.ID + "_" + secret[:20] + "_" + secret[21:],
	} {
		t.Run(name, func(t *testing.T) {
			_, _, ok := keys.Parse(s)
			require.False(t, ok)
		})
	}
}

// TestConstantTimeCompare proves, through a real server, that every secret
// check (right, wrong, or for an unknown key id) goes through the
// constant-time comparison.
func TestConstantTimeCompare(t *testing.T) {
	var calls atomic.Int64
	restore := keys.SwapCompare(func(x, y []byte) int {
		calls.Add(1)
		return subtle.ConstantTimeCompare(x, y)
	})
	t.Cleanup(restore)

	in := authtest.Start(t, authtest.Config(), authtest.NewDB(t))
	full, _ := in.CreateKey(t, &authv1.CreateKeyRequest{Name: "ct"})
	other, _ := keys.Generate()
	id, secret, _ := keys.Parse(full)
	_, otherSecret, _ := keys.Parse(other.Full)

	tests := []struct {
		name    string
		key     string
		allowed bool
	}{
		{"right secret", full, true},
		{"wrong secret", "bmcis_" + id + "_" + otherSecret, false},
		{"one character off", "bmcis_" + id + "_" + secret[:51] + flip(secret[51]), false},
		{"unknown key id", other.Full, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := calls.Load()
			resp := in.Check(t, tc.key)
			require.Equal(t, tc.allowed, resp.GetAllowed())
			require.Equal(t, before+1, calls.Load(), "exactly one constant-time comparison per check")
		})
	}
}

func flip(c byte) string {
	if c == 'a' {
		return "b"
	}
	return "a"
}

// TestLastUsedIsBatched shows checks do not write last_used_at themselves:
// the recorder does, on its interval and once more at shutdown.
func TestLastUsedIsBatched(t *testing.T) {
	lastUsed := func(t *testing.T, pool *pgxpool.Pool, id string) *time.Time {
		var ts *time.Time
		require.NoError(t, pool.QueryRow(context.Background(),
			"SELECT last_used_at FROM api_keys WHERE key_id = $1", id).Scan(&ts))
		return ts
	}

	t.Run("written at shutdown, not per check", func(t *testing.T) {
		cfg := authtest.Config()
		cfg.LastUsedFlush = time.Hour
		pool := authtest.NewDB(t)
		in := authtest.Start(t, cfg, pool)
		full, key := in.CreateKey(t, &authv1.CreateKeyRequest{Name: "used"})
		for range 20 {
			require.True(t, in.Check(t, full).GetAllowed())
		}
		require.Nil(t, lastUsed(t, pool, key.GetKeyId()), "no write per check")
		// ListKeys shows this replica's pending use at once.
		list, err := in.Client.ListKeys(authtest.Admin(context.Background()), &authv1.ListKeysRequest{})
		require.NoError(t, err)
		require.Len(t, list.GetKeys(), 1)
		require.NotNil(t, list.GetKeys()[0].GetLastUsedAt())

		in.Stop()
		require.NotNil(t, lastUsed(t, pool, key.GetKeyId()), "flushed on shutdown")
	})

	t.Run("written on the interval", func(t *testing.T) {
		cfg := authtest.Config()
		cfg.LastUsedFlush = 100 * time.Millisecond
		pool := authtest.NewDB(t)
		in := authtest.Start(t, cfg, pool)
		full, key := in.CreateKey(t, &authv1.CreateKeyRequest{Name: "used"})
		require.True(t, in.Check(t, full).GetAllowed())
		require.Eventually(t, func() bool { return lastUsed(t, pool, key.GetKeyId()) != nil },
			5*time.Second, 20*time.Millisecond)
	})
}
