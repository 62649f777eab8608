// Package readscope carries the categories an API key may read through a
// request's context, from where the key was checked (the MCP adapter, the
// gateway) to the search calls made for it, which send them on so the
// search service keeps results, totals and chunks inside them.
package readscope

import "context"

type key struct{}

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
