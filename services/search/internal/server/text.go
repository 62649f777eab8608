package server

import (
	"context"
	"time"

	"github.com/bmcis/knowledge/platform/lrucache"
	"github.com/bmcis/knowledge/services/search/internal/index"
	"github.com/bmcis/knowledge/services/search/internal/store"
)

// textSource supplies the text of chunks whose index record does not hold
// it (index.Options.TextInDatabase): from a small LRU keyed by chunk id,
// else in one primary-key read. Chunk ids are never reused (a changed
// document gets new chunks), so a cached text never goes stale.
type textSource struct {
	st    *store.Store
	cache *lrucache.Cache[int64, store.StoredText]
}

// textCacheTTL only bounds how long a deleted chunk's text lingers.
const textCacheTTL = time.Hour

func newTextSource(st *store.Store, size int) *textSource {
	return &textSource{st: st, cache: lrucache.New[int64, store.StoredText](size, textCacheTTL)}
}

// texts returns the text of every chunk of cs that needs one, and how long
// the database read took (zero when none was needed).
func (t *textSource) texts(ctx context.Context, cs []*index.Chunk) (map[int64]store.StoredText, time.Duration, error) {
	var out map[int64]store.StoredText
	var missing []int64
	for _, c := range cs {
		if c == nil || !c.TextInDatabase {
			continue
		}
		if out == nil {
			out = make(map[int64]store.StoredText, len(cs))
		}
		if v, ok := t.cache.Get(c.ChunkID); ok {
			out[c.ChunkID] = v
			continue
		}
		missing = append(missing, c.ChunkID)
	}
	if len(missing) == 0 {
		return out, 0, nil
	}
	epoch := t.cache.Epoch()
	t0 := time.Now()
	got, err := t.st.ChunkTexts(ctx, missing)
	took := time.Since(t0)
	if err != nil {
		return nil, took, err
	}
	for id, v := range got {
		out[id] = v
		t.cache.Put(id, v, epoch)
	}
	return out, took, nil
}
