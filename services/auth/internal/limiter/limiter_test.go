package limiter_test

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math/big"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/ratelimit"
	"github.com/bmcis/knowledge/services/auth/internal/limiter"
)

// clock is a controllable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// backends returns each backend driven by clk: in memory, and the real Redis
// script with the clock passed in instead of server time.
func backends(t *testing.T, clk *clock) map[string]limiter.Limiter {
	t.Helper()
	c := redisClient(t)
	prefix := "bmcis:test:limiter:" + randomHex() + ":"
	t.Cleanup(func() {
		ctx := context.Background()
		iter := c.Scan(ctx, 0, prefix+"*", 500).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
	})
	return map[string]limiter.Limiter{
		"memory": limiter.NewMemory(clk.Now),
		"redis":  limiter.NewRedis(c, prefix, limiter.WithTestClock(clk.Now)),
	}
}

// eachBackend runs fn once per backend, each with a fresh clock.
func eachBackend(t *testing.T, fn func(t *testing.T, l limiter.Limiter, clk *clock)) {
	for _, name := range []string{"memory", "redis"} {
		t.Run(name, func(t *testing.T) {
			clk := newClock()
			fn(t, backends(t, clk)[name], clk)
		})
	}
}

func redisClient(t *testing.T) *redis.Client {
	t.Helper()
	u := os.Getenv("BMCIS_TEST_REDIS_URL")
	if u == "" {
		t.Fatalf("BMCIS_TEST_REDIS_URL is not set: run `make test` or export it from deploy/local/redis.sh url")
	}
	opts, err := redis.ParseURL(u)
	require.NoError(t, err)
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() }) // runs after the key clean-up registered later
	return c
}

func randomHex() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func allow(t *testing.T, l limiter.Limiter, key string, lim limiter.Limits) limiter.Decision {
	t.Helper()
	d, err := l.Allow(context.Background(), key, lim)
	require.NoError(t, err)
	return d
}

// countAllowed makes n calls and returns how many were allowed.
func countAllowed(t *testing.T, l limiter.Limiter, key string, lim limiter.Limits, n int) int {
	t.Helper()
	ok := 0
	for range n {
		if allow(t, l, key, lim).Allowed {
			ok++
		}
	}
	return ok
}

func TestWindows(t *testing.T) {
	std := limiter.Limits{100, 1_000, 10_000}
	tests := []struct {
		name string
		run  func(t *testing.T, l limiter.Limiter, clk *clock)
	}{
		{"burst of exactly the limit, then refused with reset", func(t *testing.T, l limiter.Limiter, clk *clock) {
			first := allow(t, l, "k", std)
			require.True(t, first.Allowed)
			require.Equal(t, limiter.Limits{99, 999, 9_999}, first.Remaining)
			require.Equal(t, 600*time.Millisecond, first.Reset, "minute tier full again after one interval")
			require.Equal(t, 99, countAllowed(t, l, "k", std, 99))
			d := allow(t, l, "k", std)
			require.False(t, d.Allowed)
			require.Equal(t, []int{0}, d.Exhausted)
			require.Equal(t, limiter.Limits{0, 900, 9_900}, d.Remaining)
			require.Equal(t, 600*time.Millisecond, d.Reset)
		}},
		{"one unit back every window/limit", func(t *testing.T, l limiter.Limiter, clk *clock) {
			require.Equal(t, 100, countAllowed(t, l, "k", std, 150))
			clk.Advance(599 * time.Millisecond)
			require.False(t, allow(t, l, "k", std).Allowed)
			clk.Advance(time.Millisecond)
			require.True(t, allow(t, l, "k", std).Allowed)
			require.False(t, allow(t, l, "k", std).Allowed)
			clk.Advance(6 * time.Second)
			require.Equal(t, 10, countAllowed(t, l, "k", std, 20))
		}},
		{"no double burst at a window edge", func(t *testing.T, l limiter.Limiter, clk *clock) {
			// A fixed window would allow 100 just before the minute turns and
			// 100 more just after; GCRA allows the first 100 and then only
			// what has dripped back.
			clk.Advance(59*time.Second + 900*time.Millisecond)
			require.Equal(t, 100, countAllowed(t, l, "k", std, 100))
			clk.Advance(200 * time.Millisecond)
			require.Equal(t, 0, countAllowed(t, l, "k", std, 100))
			clk.Advance(time.Minute)
			require.Equal(t, 100, countAllowed(t, l, "k", std, 200), "after a full window the whole limit is back, no more")
		}},
		{"sliding: half a window gives back half the limit", func(t *testing.T, l limiter.Limiter, clk *clock) {
			require.Equal(t, 100, countAllowed(t, l, "k", std, 100))
			clk.Advance(30 * time.Second)
			require.Equal(t, 50, countAllowed(t, l, "k", std, 100))
		}},
		{"hour tier refuses while minute tier has units; nothing is charged", func(t *testing.T, l limiter.Limiter, clk *clock) {
			lim := limiter.Limits{100, 150, 10_000}
			require.Equal(t, 100, countAllowed(t, l, "k", lim, 100))
			clk.Advance(time.Minute)
			require.Equal(t, 52, countAllowed(t, l, "k", lim, 100), "150 plus what the hour tier regained in a minute (2.5)")
			d := allow(t, l, "k", lim)
			require.False(t, d.Allowed)
			require.Equal(t, []int{1}, d.Exhausted)
			require.Equal(t, int64(0), d.Remaining[1])
			before := d.Remaining
			for range 10 {
				d = allow(t, l, "k", lim)
				require.False(t, d.Allowed)
			}
			require.Equal(t, before, d.Remaining, "refused calls charge no tier")
			// The hour tier regains a unit every 24 s and had regained half
			// of the next one.
			require.Equal(t, 12*time.Second, d.Reset)
		}},
		{"day tier", func(t *testing.T, l limiter.Limiter, clk *clock) {
			lim := limiter.Limits{1_000, 1_000, 1_000}
			require.Equal(t, 1_000, countAllowed(t, l, "k", lim, 1_001))
			clk.Advance(time.Hour)
			d := allow(t, l, "k", lim)
			require.True(t, d.Allowed, "an hour gives back 1000/24 day units")
			require.Equal(t, int64(40), d.Remaining[2]) // floor(41.67) - 1
			clk.Advance(23 * time.Hour)
			require.Equal(t, 999, countAllowed(t, l, "k", lim, 1_001), "the unit taken an hour in comes back an hour after the day")
			clk.Advance(24 * time.Hour)
			require.Equal(t, 1_000, countAllowed(t, l, "k", lim, 1_001))
		}},
		{"limits that do not divide the window are exact", func(t *testing.T, l limiter.Limiter, clk *clock) {
			lim := limiter.Limits{7, 1_000, 10_000}
			require.Equal(t, 7, countAllowed(t, l, "k", lim, 10))
			// 60 s / 7 = 8.571428... s per unit.
			clk.Advance(8571428 * time.Microsecond)
			require.False(t, allow(t, l, "k", lim).Allowed)
			clk.Advance(time.Microsecond)
			require.True(t, allow(t, l, "k", lim).Allowed)
			clk.Advance(time.Minute)
			require.Equal(t, 7, countAllowed(t, l, "k", lim, 10))
		}},
		{"keys are independent", func(t *testing.T, l limiter.Limiter, clk *clock) {
			require.Equal(t, 100, countAllowed(t, l, "a", std, 120))
			require.Equal(t, 100, countAllowed(t, l, "b", std, 120))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { eachBackend(t, tc.run) })
	}
}

// TestBackendsAgree drives both backends with the same random calls and
// clock steps: the Lua script and the Go code must decide identically.
func TestBackendsAgree(t *testing.T) {
	clk := newClock()
	bs := backends(t, clk)
	mem, red := bs["memory"], bs["redis"]
	lims := []limiter.Limits{
		{3, 17, 101},
		{100, 1_000, 10_000},
		{7, 13, 10_000},
		// Large enough that window × limit passes 2^53: exact only in int64.
		{1_000_000, 10_000_000, 100_000_000},
	}
	for i := range 4_000 {
		k := "k" + string(rune('0'+i%4))
		lim := lims[i%4]
		dm := allow(t, mem, k, lim)
		dr := allow(t, red, k, lim)
		require.Equal(t, dm, dr, "call %d", i)
		n, err := rand.Int(rand.Reader, big.NewInt(4_000_000))
		require.NoError(t, err)
		clk.Advance(time.Duration(n.Int64()) * time.Microsecond)
	}
}

func TestConcurrentExact(t *testing.T) {
	eachBackend(t, func(t *testing.T, l limiter.Limiter, _ *clock) {
		{
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				allowed int
			)
			start := make(chan struct{})
			for range 1_000 {
				wg.Go(func() {
					<-start
					d, err := l.Allow(context.Background(), "hot", limiter.Limits{100, 1_000, 10_000})
					if err == nil && d.Allowed {
						mu.Lock()
						allowed++
						mu.Unlock()
					}
				})
			}
			close(start)
			wg.Wait()
			require.Equal(t, 100, allowed)
		}
	})
}

func TestMemorySweepsFullKeys(t *testing.T) {
	clk := newClock()
	m := limiter.NewMemory(clk.Now)
	lim := limiter.Limits{10, 10, 10}
	for i := range 100 {
		allow(t, m, "k"+string(rune(i)), lim)
	}
	require.Equal(t, 100, m.Len())
	clk.Advance(25 * time.Hour)
	// 2,000 fresh keys touch every shard (all but surely), so each sweeps
	// out the 100 full ones.
	for i := range 2_000 {
		allow(t, m, fmt.Sprintf("fresh%d", i), lim)
	}
	require.Equal(t, 2_000, m.Len())
}

func TestInvalidLimits(t *testing.T) {
	eachBackend(t, func(t *testing.T, l limiter.Limiter, _ *clock) {
		for _, lim := range []limiter.Limits{{}, {1, 1}, {limiter.MaxLimit + 1, 1, 1}} {
			_, err := l.Allow(context.Background(), "k", lim)
			require.Error(t, err)
		}
	})
}

// TestLeases checks the prepaid-units arithmetic (AllowExtra, Refund) and
// the lease record on both backends against hand-computed counts. The
// minute tier regains a unit every 60 s / limit, the hour tier every
// 3600 s / limit, the day tier every 86400 s / limit. Leases are kept for
// testKeep.
func TestLeases(t *testing.T) {
	type step struct {
		advance time.Duration
		key     string // "k" when empty
		lease   string // the lease a grant records or a refund cites, by name
		extra   int64  // AllowExtra with this extra; or, when refund > 0, Refund
		refund  int64
		allowed bool
		got     int64          // Decision.Extra, or Refund's units given back
		rem     limiter.Limits // Decision.Remaining
		lim     limiter.Limits // the key's limits from this step on (an admin's change); the case's when nil
	}
	tests := []struct {
		name  string
		lim   limiter.Limits
		steps []step
	}{
		{"a fresh key prepays what it asks", limiter.Limits{10, 100, 1_000}, []step{
			{extra: 4, allowed: true, got: 4, rem: limiter.Limits{5, 95, 995}},
		}},
		{"never past the tightest tier's limit", limiter.Limits{10, 100, 1_000}, []step{
			{extra: 20, allowed: true, got: 9, rem: limiter.Limits{0, 90, 990}},
			{extra: 5, allowed: false, rem: limiter.Limits{0, 90, 990}},
		}},
		{"only what is left", limiter.Limits{10, 100, 1_000}, []step{
			{extra: 7, allowed: true, got: 7, rem: limiter.Limits{2, 92, 992}},
			{extra: 5, allowed: true, got: 1, rem: limiter.Limits{0, 90, 990}},
		}},
		{"the hour tier bounds it", limiter.Limits{10, 3, 1_000}, []step{
			{extra: 5, allowed: true, got: 2, rem: limiter.Limits{7, 0, 997}},
		}},
		{"at most MaxLeaseUnits", limiter.Limits{1_000, 1_000, 1_000}, []step{
			{extra: 100, allowed: true, got: ratelimit.MaxLeaseUnits, rem: limiter.Limits{935, 935, 935}},
		}},
		{"limits that do not divide the window", limiter.Limits{7, 1_000, 10_000}, []step{
			{extra: 10, allowed: true, got: 6, rem: limiter.Limits{0, 993, 9_993}},
			// 60 s / 7 = 8.571428... s per unit: one back after that, exactly
			// (the hour tier regained two meanwhile, at 3.6 s each).
			{advance: 8571428 * time.Microsecond, extra: 3, allowed: false, rem: limiter.Limits{0, 995, 9_993}},
			{advance: time.Microsecond, extra: 3, allowed: true, got: 0, rem: limiter.Limits{0, 994, 9_992}},
		}},
		{"a refund gives back exactly the unspent units", limiter.Limits{10, 100, 1_000}, []step{
			{lease: "a", extra: 4, allowed: true, got: 4, rem: limiter.Limits{5, 95, 995}},
			{lease: "a", refund: 4, got: 4},
			{allowed: true, rem: limiter.Limits{8, 98, 998}},
		}},
		{"a partial release gives back what is asked", limiter.Limits{10, 100, 1_000}, []step{
			{lease: "a", extra: 4, allowed: true, got: 4, rem: limiter.Limits{5, 95, 995}},
			{lease: "a", refund: 1, got: 1},
			{allowed: true, rem: limiter.Limits{5, 95, 995}},
		}},
		{"never more than the lease granted", limiter.Limits{10, 100, 1_000}, []step{
			{lease: "a", extra: 4, allowed: true, got: 4, rem: limiter.Limits{5, 95, 995}},
			{lease: "a", refund: 60, got: 4},
			{allowed: true, rem: limiter.Limits{8, 98, 998}},
		}},
		{"a second release refunds nothing", limiter.Limits{10, 100, 1_000}, []step{
			{lease: "a", extra: 4, allowed: true, got: 4, rem: limiter.Limits{5, 95, 995}},
			{lease: "a", refund: 2, got: 2},
			{lease: "a", refund: 2, got: 0},
			{allowed: true, rem: limiter.Limits{6, 96, 996}},
		}},
		{"an unknown lease refunds nothing", limiter.Limits{10, 100, 1_000}, []step{
			{lease: "a", extra: 4, allowed: true, got: 4, rem: limiter.Limits{5, 95, 995}},
			{lease: "forged", refund: 4, got: 0},
			{allowed: true, rem: limiter.Limits{4, 94, 994}},
		}},
		{"another key's lease refunds nothing, and stays its own", limiter.Limits{10, 100, 1_000}, []step{
			{lease: "a", extra: 4, allowed: true, got: 4, rem: limiter.Limits{5, 95, 995}},
			{key: "other", allowed: true, rem: limiter.Limits{9, 99, 999}},
			{key: "other", lease: "a", refund: 4, got: 0},
			{key: "other", allowed: true, rem: limiter.Limits{8, 98, 998}},
			{lease: "a", refund: 4, got: 4},
			{allowed: true, rem: limiter.Limits{8, 98, 998}},
		}},
		{"an expired lease refunds nothing", limiter.Limits{10, 100, 1_000}, []step{
			{lease: "a", extra: 4, allowed: true, got: 4, rem: limiter.Limits{5, 95, 995}},
			// testKeep (30 s) later: the minute tier regained five units, the
			// hour and day none whole.
			{advance: testKeep, lease: "a", refund: 4, got: 0},
			{allowed: true, rem: limiter.Limits{9, 94, 994}},
		}},
		{"a lease released just before its record ends", limiter.Limits{10, 100, 1_000}, []step{
			{lease: "a", extra: 4, allowed: true, got: 4, rem: limiter.Limits{5, 95, 995}},
			{advance: testKeep - time.Microsecond, lease: "a", refund: 4, got: 4},
			{allowed: true, rem: limiter.Limits{9, 98, 998}},
		}},
		{"a refund cannot fill a tier past full", limiter.Limits{10, 100, 1_000}, []step{
			{lease: "a", extra: 2, allowed: true, got: 2, rem: limiter.Limits{7, 97, 997}},
			// 12 s gave back two minute units (9 left): the refund of two
			// fills the tier to 10, not 11, and this call takes one; the hour
			// and day tiers take back both.
			{advance: 12 * time.Second, lease: "a", refund: 2, got: 2},
			{allowed: true, rem: limiter.Limits{9, 98, 998}},
		}},
		{"a refund after a partial refill", limiter.Limits{10, 100, 1_000}, []step{
			{lease: "a", extra: 4, allowed: true, got: 4, rem: limiter.Limits{5, 95, 995}},
			// 12 s gave back two minute units; refunding four fills the
			// minute tier (not past full), and four of the hour and day.
			{advance: 12 * time.Second, lease: "a", refund: 4, got: 4},
			{allowed: true, rem: limiter.Limits{9, 98, 998}},
		}},
		// The lease charged 6 s a minute unit, 36 s an hour unit, 86.4 s a
		// day unit (TATs now + 30 s, 180 s, 432 s). Halved limits would make
		// a unit 12 s, 72 s, 172.8 s: refunded at those, all three tiers
		// would fill ({4, 49, 499} after the call). At the granted
		// intervals the TATs go back to now + 6 s, 36 s, 86.4 s; the call
		// at the new intervals takes them to 18 s, 108 s, 259.2 s:
		// (60 - 18) × 5 / 60 = 3.5, (3600 - 108) × 50 / 3600 = 48.5,
		// (86400 - 259.2) × 500 / 86400 = 498.5 units left.
		{"limits lowered during a lease: a refund gives back the time charged", limiter.Limits{10, 100, 1_000}, []step{
			{lease: "a", extra: 4, allowed: true, got: 4, rem: limiter.Limits{5, 95, 995}},
			{lim: limiter.Limits{5, 50, 500}, lease: "a", refund: 4, got: 4},
			{allowed: true, rem: limiter.Limits{3, 48, 498}},
		}},
		// Same TATs back to now + 6 s, 36 s, 86.4 s (not the 18 s, 108 s,
		// 259.2 s that doubled limits' shorter units would leave); the call
		// adds 3 s, 18 s, 43.2 s: (60 - 9) × 20 / 60 = 17,
		// (3600 - 54) × 200 / 3600 = 197, (86400 - 129.6) × 2000 / 86400 = 1997.
		{"limits raised during a lease: a refund gives back the time charged", limiter.Limits{10, 100, 1_000}, []step{
			{lease: "a", extra: 4, allowed: true, got: 4, rem: limiter.Limits{5, 95, 995}},
			{lim: limiter.Limits{20, 200, 2_000}, lease: "a", refund: 4, got: 4},
			{allowed: true, rem: limiter.Limits{17, 197, 1_997}},
		}},
		// 60 s / 7 per minute unit: the lease's three units put the TAT at
		// now + 25714285 5/7 µs; two units back at the granted 7 are
		// 17142857 1/7 µs, of which the whole microseconds go back (the
		// 1/7 µs is not a sixth of one): now + 8571428 µs and 5/6. The call
		// at 6 adds 10 s: ((60 s - 18571428 µs) × 6 - 5) / 60 s = 4.14.
		{"a granted limit that does not divide the window, changed since", limiter.Limits{7, 1_000, 10_000}, []step{
			{lease: "a", extra: 2, allowed: true, got: 2, rem: limiter.Limits{4, 997, 9_997}},
			{lim: limiter.Limits{6, 1_000, 10_000}, lease: "a", refund: 2, got: 2},
			{allowed: true, rem: limiter.Limits{4, 998, 9_998}},
		}},
		// Units of 60 ms, 36 ms, 8.64 ms: the lease's five units put the
		// TATs at now + 300 ms, 180 ms, 43.2 ms.
		{"a key full again in every tier gets nothing back", limiter.Limits{1_000, 100_000, 10_000_000}, []step{
			{lease: "a", extra: 4, allowed: true, got: 4, rem: limiter.Limits{995, 99_995, 9_999_995}},
			{advance: 300 * time.Millisecond, lease: "a", refund: 4, got: 0},
			{allowed: true, rem: limiter.Limits{999, 99_999, 9_999_999}},
		}},
		// 120 ms later the TATs are 180 ms, 60 ms, 0 ahead: the minute tier
		// takes back 180 / 60 = 3 units, the hour 60 / 36 = 1 whole one,
		// the day none; the most any tier took back is 3.
		{"a key partly refilled gets back what its emptiest tier takes", limiter.Limits{1_000, 100_000, 10_000_000}, []step{
			{lease: "a", extra: 4, allowed: true, got: 4, rem: limiter.Limits{995, 99_995, 9_999_995}},
			{advance: 120 * time.Millisecond, lease: "a", refund: 4, got: 3},
			{allowed: true, rem: limiter.Limits{999, 99_999, 9_999_999}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			eachBackend(t, func(t *testing.T, l limiter.Limiter, clk *clock) {
				ls := l.(limiter.Leaser)
				ctx := context.Background()
				ids := map[string]string{}
				lim := tc.lim
				idOf := func(name string) string {
					if name == "" {
						return ""
					}
					if ids[name] == "" {
						id, err := limiter.NewLeaseID()
						require.NoError(t, err)
						ids[name] = id
					}
					return ids[name]
				}
				for i, st := range tc.steps {
					clk.Advance(st.advance)
					key := cmp.Or(st.key, "k")
					if st.lim != nil {
						lim = st.lim
					}
					if st.refund > 0 {
						got, err := ls.Refund(ctx, key, lim, idOf(st.lease), st.refund)
						require.NoError(t, err, "step %d", i)
						require.Equal(t, st.got, got, "step %d", i)
						continue
					}
					lease := limiter.Lease{ID: idOf(st.lease), Units: st.extra, Keep: testKeep}
					if lease.ID == "" && lease.Units > 0 {
						lease.ID = idOf(fmt.Sprintf("step %d", i))
					}
					d, err := ls.AllowExtra(ctx, key, lim, lease)
					require.NoError(t, err)
					require.Equal(t, st.allowed, d.Allowed, "step %d", i)
					require.Equal(t, st.got, d.Extra, "step %d", i)
					require.Equal(t, st.rem, d.Remaining, "step %d", i)
				}
			})
		})
	}
}

// testKeep is how long TestLeases keeps a lease's record.
const testKeep = 30 * time.Second

// TestLeaseRecordInRedis checks what the Redis backend stores for a lease:
// one record under <prefix>lease:<id> that Redis itself expires after Keep,
// and nothing at all for a call that prepaid nothing or was refused. Redis
// keeps time here (no test clock): the record read is kept a minute, so a
// stalled machine cannot see it gone, and the expiry is watched on another
// lease, of which nothing is read before it ends.
func TestLeaseRecordInRedis(t *testing.T) {
	client := redisClient(t)
	prefix := "bmcis:test:lease:" + randomHex() + ":"
	r := limiter.NewRedis(client, prefix)
	ctx := context.Background()
	lim := limiter.Limits{3, 100, 1_000}
	id, err := limiter.NewLeaseID()
	require.NoError(t, err)
	require.True(t, limiter.ValidLeaseID(id))
	t.Cleanup(func() { client.Del(context.Background(), prefix+"k", prefix+"lease:"+id) })

	d, err := r.AllowExtra(ctx, "k", lim, limiter.Lease{ID: id, Units: 5, Keep: time.Minute})
	require.NoError(t, err)
	require.Equal(t, int64(2), d.Extra)
	rec, err := client.HGetAll(ctx, prefix+"lease:"+id).Result()
	require.NoError(t, err)
	require.Equal(t, "k", rec["key"])
	require.Equal(t, "2", rec["units"])
	ttl, err := client.PTTL(ctx, prefix+"lease:"+id).Result()
	require.NoError(t, err)
	require.Greater(t, ttl, time.Duration(0))
	require.LessOrEqual(t, ttl, time.Minute)

	refused, err := limiter.NewLeaseID()
	require.NoError(t, err)
	d, err = r.AllowExtra(ctx, "k", lim, limiter.Lease{ID: refused, Units: 5, Keep: time.Minute})
	require.NoError(t, err)
	require.False(t, d.Allowed)
	n, err := client.Exists(ctx, prefix+"lease:"+refused).Result()
	require.NoError(t, err)
	require.Zero(t, n, "a refused call records no lease")

	got, err := r.Refund(ctx, "k", lim, id, 2)
	require.NoError(t, err)
	require.Equal(t, int64(2), got)
	n, err = client.Exists(ctx, prefix+"lease:"+id).Result()
	require.NoError(t, err)
	require.Zero(t, n, "a release consumes the record")

	brief, err := limiter.NewLeaseID()
	require.NoError(t, err)
	d, err = r.AllowExtra(ctx, "k", lim, limiter.Lease{ID: brief, Units: 5, Keep: 50 * time.Millisecond})
	require.NoError(t, err)
	require.Equal(t, int64(1), d.Extra, "the two refunded units: one for the call, one prepaid")
	require.Eventually(t, func() bool {
		n, err := client.Exists(ctx, prefix+"lease:"+brief).Result()
		return err == nil && n == 0
	}, 10*time.Second, 20*time.Millisecond, "Redis drops the record after Keep")
	got, err = r.Refund(ctx, "k", lim, brief, 1)
	require.NoError(t, err)
	require.Zero(t, got)
}

// TestBackendsAgreeOnLeases drives both backends with the same random
// prepaid calls, refunds and clock steps. A refund cites the key's latest
// lease (often still recorded, sometimes expired or released already),
// another key's, or a forged id; some refunds must give units back, so
// the refund arithmetic is compared too, not only its refusals.
func TestBackendsAgreeOnLeases(t *testing.T) {
	clk := newClock()
	bs := backends(t, clk)
	mem, red := bs["memory"].(limiter.Leaser), bs["redis"].(limiter.Leaser)
	lims := []limiter.Limits{{3, 17, 101}, {100, 1_000, 10_000}, {7, 13, 10_000}, {60, 70, 80}}
	// An admin's change: a key sometimes calls or refunds with these
	// instead, so refunds at limits other than the granted ones are compared.
	changed := []limiter.Limits{{2, 19, 97}, {150, 600, 10_000}, {6, 13, 9_000}, {60, 35, 160}}
	ctx := context.Background()
	latest := make([]string, 4) // each key's latest lease id, "" (none) at first
	forged, err := limiter.NewLeaseID()
	require.NoError(t, err)
	refunded := int64(0)
	for i := range 3_000 {
		k := "k" + string(rune('0'+i%4))
		lim := lims[i%4]
		r, err := rand.Int(rand.Reader, big.NewInt(80))
		require.NoError(t, err)
		if r.Int64()%3 == 0 {
			lim = changed[i%4]
		}
		if n := r.Int64(); n >= 70 {
			id := latest[i%4]
			switch n % 5 {
			case 0:
				id = latest[(i+1)%4] // another key's
			case 1:
				id = forged
			}
			gm, err := mem.Refund(ctx, k, lim, id, n-60)
			require.NoError(t, err)
			gr, err := red.Refund(ctx, k, lim, id, n-60)
			require.NoError(t, err)
			require.Equal(t, gm, gr, "refund %d", i)
			refunded += gm
		} else {
			id, err := limiter.NewLeaseID()
			require.NoError(t, err)
			// Kept 30 s of the test clock, which moves 2 s a step on
			// average: a key's latest lease is usually still recorded.
			lease := limiter.Lease{ID: id, Units: n, Keep: 30 * time.Second}
			dm, err := mem.AllowExtra(ctx, k, lim, lease)
			require.NoError(t, err)
			dr, err := red.AllowExtra(ctx, k, lim, lease)
			require.NoError(t, err)
			require.Equal(t, dm, dr, "call %d", i)
			latest[i%4] = id
		}
		n, err := rand.Int(rand.Reader, big.NewInt(4_000_000))
		require.NoError(t, err)
		clk.Advance(time.Duration(n.Int64()) * time.Microsecond)
	}
	require.Positive(t, refunded, "some refunds gave units back")
}

// TestRefundOfAKeyWithNoState checks that a lease whose key has no state
// left (full in every tier, so dropped: Memory's sweep, Redis's expiry)
// reports nothing given back, writes nothing, and still consumes the record.
func TestRefundOfAKeyWithNoState(t *testing.T) {
	lim := limiter.Limits{10, 100, 1_000}
	tests := []struct {
		name string
		// setup returns the backend, how it drops the key "k" once full, and
		// whether "k" has no state.
		setup func(t *testing.T, clk *clock) (l limiter.Leaser, forget func(), stateless func() bool)
	}{
		{"memory", func(t *testing.T, clk *clock) (limiter.Leaser, func(), func() bool) {
			m := limiter.NewMemory(clk.Now)
			forget := func() {
				clk.Advance(25 * time.Hour)
				// 2,000 fresh keys touch every shard (all but surely): each
				// sweeps out the full key.
				for i := range 2_000 {
					allow(t, m, fmt.Sprintf("fresh%d", i), lim)
				}
			}
			return m, forget, func() bool { return m.Len() == 2_000 }
		}},
		{"redis", func(t *testing.T, clk *clock) (limiter.Leaser, func(), func() bool) {
			c := redisClient(t)
			prefix := "bmcis:test:nostate:" + randomHex() + ":"
			ctx := context.Background()
			t.Cleanup(func() {
				iter := c.Scan(ctx, 0, prefix+"*", 500).Iterator()
				for iter.Next(ctx) {
					c.Del(ctx, iter.Val())
				}
			})
			// Redis expires the key by its own clock, not the test's: the
			// test deletes it as that expiry would once the key is full.
			forget := func() {
				clk.Advance(25 * time.Hour)
				require.NoError(t, c.Del(ctx, prefix+"k").Err())
			}
			stateless := func() bool {
				n, err := c.Exists(ctx, prefix+"k").Result()
				require.NoError(t, err)
				return n == 0
			}
			return limiter.NewRedis(c, prefix, limiter.WithTestClock(clk.Now)), forget, stateless
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			l, forget, stateless := tc.setup(t, clk)
			ctx := context.Background()
			id, err := limiter.NewLeaseID()
			require.NoError(t, err)
			d, err := l.AllowExtra(ctx, "k", lim, limiter.Lease{ID: id, Units: 4, Keep: 26 * time.Hour})
			require.NoError(t, err)
			require.Equal(t, int64(4), d.Extra)
			require.False(t, stateless())
			forget()
			require.True(t, stateless(), "the key's state is gone")

			got, err := l.Refund(ctx, "k", lim, id, 4)
			require.NoError(t, err)
			require.Zero(t, got, "a key with no state is full: nothing to give back")
			require.True(t, stateless(), "nothing written")
			got, err = l.Refund(ctx, "k", lim, id, 4)
			require.NoError(t, err)
			require.Zero(t, got, "the record was consumed")
		})
	}
}
