package answercache_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/mcp-adapter/internal/answercache"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func key(s string) answercache.Key { return answercache.NewKey("tool").String(s).Sum() }

func TestTTL(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	c := answercache.New[string](time.Second, 1<<20, clk.now)
	c.Put(key("a"), "answer", 10)
	got, ok := c.Get(key("a"))
	require.True(t, ok)
	require.Equal(t, "answer", got)

	clk.t = clk.t.Add(999 * time.Millisecond)
	_, ok = c.Get(key("a"))
	require.True(t, ok, "still inside the TTL")

	clk.t = clk.t.Add(time.Millisecond)
	_, ok = c.Get(key("a"))
	require.False(t, ok, "the TTL has passed")
	st := c.Stats()
	require.Equal(t, answercache.Stats{Hits: 2, Misses: 1, Stores: 1, Bytes: 0, Entries: 0}, st, "an expired entry is dropped when met")
}

func TestByteBoundEvictsLeastRecentlyUsed(t *testing.T) {
	c := answercache.New[string](time.Minute, 100, nil)
	c.Put(key("a"), "a", 40)
	c.Put(key("b"), "b", 40)
	_, ok := c.Get(key("a")) // a is now the most recently used
	require.True(t, ok)
	c.Put(key("c"), "c", 40) // 120 > 100: b goes

	cases := []struct {
		key  string
		kept bool
	}{{"a", true}, {"b", false}, {"c", true}}
	for _, tc := range cases {
		_, ok := c.Get(key(tc.key))
		require.Equal(t, tc.kept, ok, tc.key)
	}
	st := c.Stats()
	require.Equal(t, int64(1), st.Evictions)
	require.Equal(t, int64(80), st.Bytes)

	c.Put(key("huge"), "huge", 101)
	_, ok = c.Get(key("huge"))
	require.False(t, ok, "an answer larger than the bound is not kept")
	require.Equal(t, 2, c.Stats().Entries, "and evicts nothing")

	c.Put(key("a"), "a2", 60) // replaces a: 60 + 40
	got, _ := c.Get(key("a"))
	require.Equal(t, "a2", got)
	require.Equal(t, int64(100), c.Stats().Bytes)
}

func TestOff(t *testing.T) {
	for name, c := range map[string]*answercache.Cache[string]{
		"ttl 0":   answercache.New[string](0, 1<<20, nil),
		"bytes 0": answercache.New[string](time.Second, 0, nil),
	} {
		t.Run(name, func(t *testing.T) {
			require.Nil(t, c)
			c.Put(key("a"), "a", 1)
			_, ok := c.Get(key("a"))
			require.False(t, ok)
			require.Zero(t, c.TTL())
			require.Equal(t, answercache.Stats{}, c.Stats())
		})
	}
}

// TestKeysTellPartsApart: parts are length-prefixed and lists counted, so
// moving bytes between parts, or a nil scope against an empty one, makes
// another key. (Parts are not typed: a key's parts follow one fixed order
// per tool.)
func TestKeysTellPartsApart(t *testing.T) {
	keys := map[string]answercache.Key{
		"ab|c":        answercache.NewKey("t").String("ab").String("c").Sum(),
		"a|bc":        answercache.NewKey("t").String("a").String("bc").Sum(),
		"nil list":    answercache.NewKey("t").Strings(nil).Sum(),
		"empty list":  answercache.NewKey("t").Strings([]string{}).Sum(),
		"list x":      answercache.NewKey("t").Strings([]string{"x"}).Sum(),
		"list x,y":    answercache.NewKey("t").Strings([]string{"x", "y"}).Sum(),
		"list xy":     answercache.NewKey("t").Strings([]string{"xy"}).Sum(),
		"other tool":  answercache.NewKey("u").Strings([]string{"x"}).Sum(),
		"ints 1,2":    answercache.NewKey("t").Int64s([]int64{1, 2}).Sum(),
		"ints 2,1":    answercache.NewKey("t").Int64s([]int64{2, 1}).Sum(),
		"bool true":   answercache.NewKey("t").String("flag").Bool(true).Sum(),
		"bool false":  answercache.NewKey("t").String("flag").Bool(false).Sum(),
		"tool only t": answercache.NewKey("t").Sum(),
	}
	seen := map[answercache.Key]string{}
	for name, k := range keys {
		other, dup := seen[k]
		require.False(t, dup, "%s and %s share a key", name, other)
		seen[k] = name
	}
	require.Equal(t, answercache.NewKey("t").String("ab").Sum(), answercache.NewKey("t").String("ab").Sum(), "the same parts, the same key")
}
