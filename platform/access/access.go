// Package access is the one home of document access lists: who may read a
// document, and who a caller is. A principal is a string of one of three
// forms:
//
//	everyone        every caller
//	group:NAME      callers in group NAME (an API key's groups, an OAuth
//	                token's mapped groups)
//	user:ID         one caller (an OAuth token's subject)
//
// A document's access list holds principals; an empty list means everyone.
// A caller's access set holds the principals it is (always everyone, its
// user and its groups). The caller may read a document when the two meet.
//
// Ingest (the search service), bmcisctl and the auth service all parse
// principals here, so one spelling is accepted everywhere and anything
// else is refused.
package access

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Everyone is the principal every caller is.
const Everyone = "everyone"

// The prefixes of the named principal forms.
const (
	GroupPrefix = "group:"
	UserPrefix  = "user:"
)

// MaxEntries bounds a document's access list and a caller's access set:
// both travel on every write and read.
const MaxEntries = 64

// groupName is a group's name: the same alphabet as a source name, so it
// fits on a command line and in a claim mapping unquoted.
var groupName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// maxUserID bounds user:ID (an e-mail address or an OAuth subject).
const maxUserID = 255

// GroupRule says what a group name may be, for messages.
const GroupRule = "1..64 of a-z 0-9 . _ -, starting with a letter or digit"

// ErrInvalid is wrapped by every parse error.
var ErrInvalid = errors.New("invalid access principal")

// ParsePrincipal normalises one principal: surrounding blanks are dropped
// and the form keyword and group names are lowercased; a user id keeps its
// case (OAuth subjects are case-sensitive). Anything of another form is an
// error naming it.
func ParsePrincipal(s string) (string, error) {
	p := strings.TrimSpace(s)
	lower := strings.ToLower(p)
	switch {
	case lower == Everyone:
		return Everyone, nil
	case strings.HasPrefix(lower, GroupPrefix):
		g := lower[len(GroupPrefix):]
		if !groupName.MatchString(g) {
			return "", fmt.Errorf("%w %q: a group name is %s", ErrInvalid, s, GroupRule)
		}
		return GroupPrefix + g, nil
	case strings.HasPrefix(lower, UserPrefix):
		id := p[len(UserPrefix):]
		if id == "" || len(id) > maxUserID || strings.IndexFunc(id, badUserRune) >= 0 {
			return "", fmt.Errorf("%w %q: a user id is 1..%d printable characters without blanks", ErrInvalid, s, maxUserID)
		}
		return UserPrefix + id, nil
	}
	return "", fmt.Errorf("%w %q: want everyone, group:NAME or user:ID", ErrInvalid, s)
}

func badUserRune(r rune) bool { return r <= ' ' || r == 0x7f }

// ParseList normalises a document's access list: every entry parsed,
// duplicates dropped, sorted. A list naming everyone (or an empty one)
// is the empty list: readable by every caller.
func ParseList(entries []string) ([]string, error) {
	if len(entries) > MaxEntries {
		return nil, fmt.Errorf("%w: %d entries, at most %d", ErrInvalid, len(entries), MaxEntries)
	}
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		p, err := ParsePrincipal(e)
		if err != nil {
			return nil, err
		}
		if p == Everyone {
			return nil, nil
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, nil
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// SplitList parses a comma-separated list ("group:hr,group:legal"), as
// bmcisctl's --access takes it.
func SplitList(s string) ([]string, error) {
	var entries []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			entries = append(entries, e)
		}
	}
	return ParseList(entries)
}

// ParseGroup normalises a bare group name (an API key's --groups entry, a
// group a claim maps to).
func ParseGroup(s string) (string, error) {
	g := strings.ToLower(strings.TrimSpace(s))
	if !groupName.MatchString(g) {
		return "", fmt.Errorf("%w: group %q: a group name is %s", ErrInvalid, s, GroupRule)
	}
	return g, nil
}

// ParseGroups normalises a list of group names: sorted, without
// duplicates.
func ParseGroups(names []string) ([]string, error) {
	if len(names) > MaxEntries {
		return nil, fmt.Errorf("%w: %d groups, at most %d", ErrInvalid, len(names), MaxEntries)
	}
	out := make([]string, 0, len(names))
	for _, n := range names {
		g, err := ParseGroup(n)
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	if len(out) == 0 {
		return nil, nil
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// CallerSet is the access set of a caller with an optional user id and
// some groups: everyone, user:ID, group:G for each, sorted. The groups
// must be parsed (ParseGroups); an unusable user id is left out rather than
// failing the caller (it can only narrow what they see).
func CallerSet(user string, groups []string) []string {
	set := []string{Everyone}
	if user != "" {
		if p, err := ParsePrincipal(UserPrefix + user); err == nil {
			set = append(set, p)
		}
	}
	for _, g := range groups {
		set = append(set, GroupPrefix+g)
	}
	slices.Sort(set)
	return slices.Compact(set)
}

// ParseSet normalises an access set sent by an edge: every entry a
// principal, sorted and distinct, everyone always in it. Nil for an empty
// input (no set: the caller is not restricted by access lists).
func ParseSet(entries []string) ([]string, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	if len(entries) > MaxEntries+2 {
		return nil, fmt.Errorf("%w: an access set of %d entries", ErrInvalid, len(entries))
	}
	set := []string{Everyone}
	for _, e := range entries {
		p, err := ParsePrincipal(e)
		if err != nil {
			return nil, err
		}
		set = append(set, p)
	}
	slices.Sort(set)
	return slices.Compact(set), nil
}

// Key is a list's canonical text, for cache keys and in-memory interning:
// "" for everyone.
func Key(list []string) string { return strings.Join(list, "\n") }

// Allows reports whether a caller with access set set may read a document
// with access list list (both normalised). A nil set is an unrestricted
// caller (an operator); an empty list is everyone's.
func Allows(set, list []string) bool {
	if set == nil || len(list) == 0 {
		return true
	}
	for _, p := range list {
		if _, ok := slices.BinarySearch(set, p); ok {
			return true
		}
	}
	return false
}
