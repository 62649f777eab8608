package access

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParsePrincipal(t *testing.T) {
	for in, want := range map[string]string{
		"everyone": "everyone", " EVERYONE ": "everyone", "group:hr": "group:hr", "Group:Legal": "group:legal",
		"user:alice@example.com": "user:alice@example.com", "USER:Alice": "user:Alice",
	} {
		got, err := ParsePrincipal(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "hr", "group:", "group:a b", "group:-x", "user:", "user:a b", "role:admin", "everyone:x"} {
		_, err := ParsePrincipal(bad)
		require.ErrorIs(t, err, ErrInvalid, bad)
		require.Contains(t, err.Error(), "\""+bad+"\"")
	}
}

func TestParseList(t *testing.T) {
	got, err := ParseList([]string{"group:legal", "group:hr", "group:HR", "user:bob"})
	require.NoError(t, err)
	require.Equal(t, []string{"group:hr", "group:legal", "user:bob"}, got)

	got, err = ParseList([]string{"group:hr", "everyone"})
	require.NoError(t, err)
	require.Nil(t, got, "a list naming everyone is everyone's")

	_, err = ParseList([]string{"group:hr", "admins"})
	require.True(t, errors.Is(err, ErrInvalid))

	got, err = SplitList(" group:hr, group:legal ,")
	require.NoError(t, err)
	require.Equal(t, []string{"group:hr", "group:legal"}, got)
}

func TestCallerSetAndAllows(t *testing.T) {
	groups, err := ParseGroups([]string{"legal", "HR", "hr"})
	require.NoError(t, err)
	require.Equal(t, []string{"hr", "legal"}, groups)
	set := CallerSet("alice", groups)
	require.Equal(t, []string{"everyone", "group:hr", "group:legal", "user:alice"}, set)

	require.True(t, Allows(set, nil), "everyone's document")
	require.True(t, Allows(set, []string{"group:finance", "group:hr"}))
	require.True(t, Allows(set, []string{"user:alice"}))
	require.False(t, Allows(set, []string{"group:finance", "user:bob"}))
	require.True(t, Allows(nil, []string{"group:finance"}), "an unrestricted caller reads everything")

	plain := CallerSet("", nil)
	require.Equal(t, []string{"everyone"}, plain)
	require.False(t, Allows(plain, []string{"group:hr"}))

	parsed, err := ParseSet([]string{"group:hr", "user:alice"})
	require.NoError(t, err)
	require.Equal(t, []string{"everyone", "group:hr", "user:alice"}, parsed)
	none, err := ParseSet(nil)
	require.NoError(t, err)
	require.Nil(t, none)
	_, err = ParseSet([]string{"hr"})
	require.ErrorIs(t, err, ErrInvalid)
}
