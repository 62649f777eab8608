package store

import "sync"

// mentionCacheChunks bounds the chunks whose mentions are kept: at most 10
// mentions a chunk of about 100 bytes each, so 50 MB at worst (most chunks
// name none); the cache starts over when full.
const mentionCacheChunks = 50_000

// mentionCache keeps chunk mentions and vendor rows for one graph version:
// a lookup under another version empties it first. Entries read under
// version v may be newer than v (the read came after v was learnt), never
// older, so keeping them until the version moves is safe.
type mentionCache struct {
	mu       sync.Mutex
	version  int64
	perChunk int
	byChunk  map[int64][]Mention
	vendor   map[string]Mention
}

// at makes the cache hold version v (and perChunk), emptying it if needed.
// Called with mu held.
func (c *mentionCache) at(v int64, perChunk int) {
	if c.byChunk == nil || c.version != v || (perChunk != 0 && c.perChunk != perChunk) {
		c.version, c.byChunk, c.vendor = v, map[int64][]Mention{}, map[string]Mention{}
		if perChunk != 0 {
			c.perChunk = perChunk
		}
	}
}

// clear forgets everything: a document re-linked after its write changed
// links without moving the graph version.
func (c *mentionCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byChunk, c.vendor = nil, nil
}

// chunks copies the cached mentions of ids into out and returns the ids
// it does not hold.
func (c *mentionCache) chunks(v int64, perChunk int, ids []int64, out map[int64][]Mention) []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at(v, perChunk)
	var missing []int64
	for _, id := range ids {
		if ms, ok := c.byChunk[id]; ok {
			out[id] = ms
		} else {
			missing = append(missing, id)
		}
	}
	return missing
}

// putChunks keeps what was read for ids under v (no mentions is an answer too).
func (c *mentionCache) putChunks(v int64, perChunk int, ids []int64, read map[int64][]Mention) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at(v, perChunk)
	if len(c.byChunk)+len(ids) > mentionCacheChunks {
		c.byChunk = map[int64][]Mention{}
	}
	for _, id := range ids {
		c.byChunk[id] = read[id]
	}
}

// vendors returns the cached vendor rows of ids and the ids it does not hold.
func (c *mentionCache) vendors(v int64, ids []string) ([]Mention, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at(v, 0)
	var found []Mention
	var missing []string
	for _, id := range ids {
		if m, ok := c.vendor[id]; ok {
			if m.IsVendor {
				found = append(found, m)
			}
		} else {
			missing = append(missing, id)
		}
	}
	return found, missing
}

// putVendors keeps the vendor rows read for ids under v; an id with no
// row (not a vendor) is kept as such.
func (c *mentionCache) putVendors(v int64, ids []string, read []Mention) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at(v, 0)
	if len(c.vendor)+len(ids) > mentionCacheChunks {
		c.vendor = map[string]Mention{}
	}
	for _, id := range ids {
		c.vendor[id] = Mention{EntityID: id}
	}
	for _, m := range read {
		c.vendor[m.EntityID] = m
	}
}
