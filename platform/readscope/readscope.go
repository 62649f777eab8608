// Package readscope carries what a caller may read through a request's
// context, from where the caller was checked (the MCP adapter, the
// gateway) to the search calls made for it, which send it on so the search
// service keeps results, totals and chunks inside it: the categories of an
// API key's scope, and the caller's access set (platform/access).
package readscope

import "context"

type key struct{}

type accessKey struct{}

// With returns ctx carrying the categories the caller's key may read (none:
// every category).
func With(ctx context.Context, categories []string) context.Context {
	return context.WithValue(ctx, key{}, categories)
}

// Categories returns the categories ctx carries; nil for an unscoped key.
func Categories(ctx context.Context) []string {
	cats, _ := ctx.Value(key{}).([]string)
	if len(cats) == 0 {
		return nil
	}
	return cats
}

// WithAccess returns ctx carrying the caller's access set (Check's
// Principal.access).
func WithAccess(ctx context.Context, set []string) context.Context {
	return context.WithValue(ctx, accessKey{}, set)
}

// Access returns the access set ctx carries; nil when none was set.
func Access(ctx context.Context) []string {
	set, _ := ctx.Value(accessKey{}).([]string)
	if len(set) == 0 {
		return nil
	}
	return set
}
