// Package oauthscope names the OAuth scopes of this product, the one home
// shared by the MCP adapter (which advertises them in its protected
// resource metadata) and the auth service (which decides what a token's
// scopes allow).
//
// Least privilege: a token reads nothing unless its authorization server
// granted one of these scopes.
//
//	kb:read             every tool, every document category
//	kb:read:<category>  every tool, only that category (may repeat)
package oauthscope

import (
	"slices"
	"strings"
)

// Read grants every tool over every category.
const Read = "kb:read"

// CategoryPrefix starts a scope that grants one category: kb:read:security.
const CategoryPrefix = Read + ":"

// Grant is what a token's scopes allow.
type Grant struct {
	// Any is true when at least one scope of this product was granted.
	Any bool
	// Categories limits reads to these categories; nil with Any means all.
	Categories []string
}

// Parse reads a token's scopes. kb:read wins over category scopes (it
// already grants them all); unknown scopes are ignored.
func Parse(scopes []string) Grant {
	var g Grant
	for _, s := range scopes {
		switch {
		case s == Read:
			return Grant{Any: true}
		case strings.HasPrefix(s, CategoryPrefix) && len(s) > len(CategoryPrefix):
			c := strings.ToLower(s[len(CategoryPrefix):])
			if !slices.Contains(g.Categories, c) {
				g.Categories = append(g.Categories, c)
			}
			g.Any = true
		}
	}
	slices.Sort(g.Categories)
	return g
}

// Split splits an OAuth scope claim ("a b c", RFC 6749 section 3.3).
func Split(claim string) []string { return strings.Fields(claim) }
