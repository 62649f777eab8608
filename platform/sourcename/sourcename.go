// Package sourcename is what the name of a source (a folder mirrored by
// `bmcisctl sync`, an upload's source) may be: the one rule the client
// checks before it sends anything and the search service enforces (its
// sources table checks it too).
package sourcename

import "regexp"

var pattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// Rule says the rule in words, for messages.
const Rule = "1..64 of a-z 0-9 . _ -, starting with a letter or digit"

// Valid reports whether name is a source name.
func Valid(name string) bool { return pattern.MatchString(name) }
