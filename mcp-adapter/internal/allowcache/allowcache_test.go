package allowcache

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var everyone = NewScope(nil, []string{"everyone"}, nil)

func TestTake(t *testing.T) {
	now := time.Unix(1000, 0)
	c := New(5*time.Second, 3)
	c.now = func() time.Time { return now }

	_, ok := c.Take("k1", "op")
	require.False(t, ok, "never allowed: wait for the check")
	c.Allowed("k1", "op", 2, everyone)
	_, ok = c.Take("k1", "other-op")
	require.False(t, ok, "allowed for one operation only")
	for range 2 {
		sc, ok := c.Take("k1", "op")
		require.True(t, ok)
		require.True(t, sc.Equal(everyone))
	}
	_, ok = c.Take("k1", "op")
	require.False(t, ok, "budget spent: the key may be about to run out")

	c.Allowed("k1", "op", 10, everyone)
	now = now.Add(5 * time.Second)
	_, ok = c.Take("k1", "op")
	require.False(t, ok, "expired")

	c.Allowed("k1", "op", 10, everyone)
	c.Forget("k1", "op")
	_, ok = c.Take("k1", "op")
	require.False(t, ok, "a denial forgets at once")

	c.Allowed("k1", "op", 0, everyone)
	_, ok = c.Take("k1", "op")
	require.False(t, ok, "no units left: not remembered")

	require.Equal(t, Stats{Started: 2}, c.Stats())
	c.Settled(true)
	c.Settled(false)
	require.Equal(t, Stats{Started: 2, Kept: 1, Discarded: 1}, c.Stats())
}

// TestRemembersTheScope: an early start runs in the scope of the last
// allow, which a later allow replaces.
func TestRemembersTheScope(t *testing.T) {
	c := New(5*time.Second, 10)
	hr := NewScope([]string{"security", "hr"}, []string{"everyone", "group:hr"}, []string{"semantic_search"})
	c.Allowed("k", "op", 5, hr)
	sc, ok := c.Take("k", "op")
	require.True(t, ok)
	require.Equal(t, Scope{Categories: []string{"hr", "security"}, Access: []string{"everyone", "group:hr"}, Tools: []string{"semantic_search"}}, sc)

	legal := NewScope(nil, []string{"everyone", "group:legal"}, nil)
	c.Allowed("k", "op", 5, legal)
	sc, ok = c.Take("k", "op")
	require.True(t, ok)
	require.True(t, sc.Equal(legal))
	require.False(t, sc.Equal(hr))

	c.Allowed("other", "op", 5, hr)
	sc, _ = c.Take("other", "op")
	require.True(t, sc.Equal(hr), "each key its own scope")
}

func TestScopeTooLargeIsNotRemembered(t *testing.T) {
	c := New(5*time.Second, 10)
	c.Allowed("k", "op", 5, everyone)
	big := []string{"everyone"}
	for i := 0; i < 40; i++ {
		big = append(big, "group:"+strings.Repeat(string(rune('a'+i%26)), 50)+string(rune('a'+i/26)))
	}
	c.Allowed("k", "op", 5, NewScope(nil, big, nil))
	_, ok := c.Take("k", "op")
	require.False(t, ok, "a scope over MaxScopeBytes forgets the key: it waits for its checks")
	require.Equal(t, 0, c.Len())
}

func TestScopeEqual(t *testing.T) {
	cases := []struct {
		name  string
		a, b  Scope
		equal bool
	}{
		{"both empty", NewScope(nil, nil, nil), NewScope([]string{}, []string{}, []string{}), true},
		{"order and repeats do not count",
			NewScope([]string{"b", "a"}, []string{"group:x", "everyone"}, []string{"get_chunks", "semantic_search"}),
			NewScope([]string{"a", "b", "a"}, []string{"everyone", "group:x"}, []string{"semantic_search", "get_chunks"}), true},
		{"a group more", NewScope(nil, []string{"everyone", "group:hr"}, nil), NewScope(nil, []string{"everyone", "group:hr", "group:legal"}, nil), false},
		{"another group", NewScope(nil, []string{"everyone", "group:hr"}, nil), NewScope(nil, []string{"everyone", "group:legal"}, nil), false},
		{"a user", NewScope(nil, []string{"everyone"}, nil), NewScope(nil, []string{"everyone", "user:alice"}, nil), false},
		{"categories added", NewScope(nil, []string{"everyone"}, nil), NewScope([]string{"hr"}, []string{"everyone"}, nil), false},
		{"another category", NewScope([]string{"hr"}, nil, nil), NewScope([]string{"legal"}, nil, nil), false},
		{"tools narrowed", NewScope(nil, nil, nil), NewScope(nil, nil, []string{"semantic_search"}), false},
		{"case counts", NewScope([]string{"HR"}, nil, nil), NewScope([]string{"hr"}, nil, nil), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.equal, tc.a.Equal(tc.b))
			require.Equal(t, tc.equal, tc.b.Equal(tc.a))
		})
	}
}

func TestNewScopeDoesNotChangeItsInput(t *testing.T) {
	in := []string{"b", "a"}
	sc := NewScope(in, nil, nil)
	require.Equal(t, []string{"b", "a"}, in)
	require.Equal(t, []string{"a", "b"}, sc.Categories)
}

func TestBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	c := New(time.Second, 2)
	c.now = func() time.Time { return now }
	c.Allowed("a", "op", 5, everyone)
	c.Allowed("b", "op", 5, everyone)
	c.Allowed("c", "op", 5, everyone)
	require.Equal(t, 2, c.Len())
	_, ok := c.Take("c", "op")
	require.False(t, ok, "full of live entries")
	now = now.Add(time.Second)
	c.Allowed("c", "op", 5, everyone)
	require.Equal(t, 1, c.Len(), "expired entries make room")
	_, ok = c.Take("c", "op")
	require.True(t, ok)
}

func TestNilRemembersNothing(t *testing.T) {
	c := New(0, 0)
	require.Nil(t, c)
	c.Allowed("k", "op", 5, everyone)
	_, ok := c.Take("k", "op")
	require.False(t, ok)
	c.Forget("k", "op")
	c.Settled(true)
	require.Equal(t, 0, c.Len())
	require.Equal(t, Stats{}, c.Stats())
}

// TestRemembered: a tools/list reads the scope any op's allow left for the
// key, spending nothing, until it expires or a denial forgets it.
func TestRemembered(t *testing.T) {
	now := time.Unix(1000, 0)
	vendorOnly := NewScope(nil, []string{"everyone"}, []string{"find_vendor_info"})
	ops := []string{"semantic_search", "find_vendor_info", "get_chunks"}
	cases := []struct {
		name    string
		prepare func(c *Cache)
		ok      bool
	}{
		{"never allowed", func(*Cache) {}, false},
		{"allowed for one op", func(c *Cache) { c.Allowed("k", "find_vendor_info", 1, vendorOnly) }, true},
		{"another key", func(c *Cache) { c.Allowed("other", "find_vendor_info", 5, vendorOnly) }, false},
		{"an op not asked about", func(c *Cache) { c.Allowed("k", "tools/list", 5, vendorOnly) }, false},
		{"expired", func(c *Cache) {
			c.Allowed("k", "find_vendor_info", 5, vendorOnly)
			now = now.Add(5 * time.Second)
		}, false},
		{"forgotten", func(c *Cache) {
			c.Allowed("k", "find_vendor_info", 5, vendorOnly)
			c.Forget("k", "find_vendor_info")
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := New(5*time.Second, 10)
			c.now = func() time.Time { return now }
			tc.prepare(c)
			for range 3 { // reading spends nothing
				sc, ok := c.Remembered("k", ops)
				require.Equal(t, tc.ok, ok)
				if ok {
					require.True(t, sc.Equal(vendorOnly))
				}
			}
			if tc.ok {
				_, took := c.Take("k", "find_vendor_info")
				require.True(t, took, "the budget of early starts is intact")
			}
		})
	}
}
