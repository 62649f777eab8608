package embed

import (
	"cmp"
	"container/heap"
	"encoding/binary"
	"hash/fnv"
	"slices"
)

// Sample chooses and orders the texts a builtin model trains on from
// where each text sits (its document's identity and its position in the
// document), never from the order texts arrive in. Concurrent ingestion
// stores chunks in any order, and the order of the training texts decides
// the fine-tuning batches: the same corpus, ingested twice, used to train
// two models (SciFact moved by up to 0.0025 nDCG@10 between ingestions).
//
// With a limit, the sample keeps the limit chunks that come first by a
// hash of (document, position): the same every time and as spread as a
// random sample of chunks, which the retrain rule's coverage measure
// assumes (embedding/freshness.go; a sample of whole blocks keeps or
// misses a document's terms together, and a model could then stay under
// the coverage the rule asks of it). Memory is bounded by the limit. The
// kept chunks are then ordered by blocks of SampleBlock consecutive chunks
// of a document, the blocks by a hash of (document, block), chunks by
// position within their block: neighbouring chunks that were both kept
// stay neighbours, which fine-tuning's neighbour pairs need (under a cap
// few are both kept, and the pairs join chunks of a section a few
// positions apart instead).
type Sample struct {
	limit int
	items sampleHeap
}

// SampleBlock is how many consecutive chunks of a document are kept
// together in the sample's order.
const SampleBlock = 32

// NewSample keeps at most limit texts (limit <= 0: all).
func NewSample(limit int) *Sample { return &Sample{limit: limit} }

// Add offers the text of chunk index of document doc.
func (s *Sample) Add(doc string, index int, text string) {
	it := sampleItem{pick: positionHash(doc, uint64(index)), order: positionHash(doc, uint64(index/SampleBlock)),
		doc: doc, index: index, text: text}
	if s.limit > 0 && len(s.items) == s.limit {
		if pickFirst(it, s.items[0]) >= 0 {
			return // after every kept text
		}
		s.items[0] = it
		heap.Fix(&s.items, 0)
		return
	}
	heap.Push(&s.items, it)
}

// positionHash hashes a document id and a position in it.
func positionHash(doc string, pos uint64) uint64 {
	h := fnv.New64a()
	h.Write([]byte(doc))
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], pos)
	h.Write(b[:])
	return mix64(h.Sum64())
}

// Len is the number of texts kept.
func (s *Sample) Len() int { return len(s.items) }

// Texts returns the kept texts in their order.
func (s *Sample) Texts() []string {
	items := slices.Clone(s.items)
	slices.SortFunc(items, func(a, b sampleItem) int {
		return cmp.Or(cmp.Compare(a.order, b.order), cmp.Compare(a.doc, b.doc), cmp.Compare(a.index, b.index), cmp.Compare(a.text, b.text))
	})
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.text
	}
	return out
}

// mix64 is MurmurHash3's finalizer: FNV-1a mixes an input's last bytes
// into its top bits (which the order sorts on first) only weakly, and ids
// like doc-000001, doc-000002... differ only there.
func mix64(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

type sampleItem struct {
	pick  uint64 // which chunks are kept: the first by pick
	order uint64 // the block's place in the sample's order
	doc   string
	index int
	text  string
}

// pickFirst orders chunks by which is kept first under a limit.
func pickFirst(a, b sampleItem) int {
	return cmp.Or(cmp.Compare(a.pick, b.pick), cmp.Compare(a.doc, b.doc), cmp.Compare(a.index, b.index), cmp.Compare(a.text, b.text))
}

// sampleHeap is a max-heap: the root is the last kept text, the first to
// give way.
type sampleHeap []sampleItem

func (h sampleHeap) Len() int           { return len(h) }
func (h sampleHeap) Less(i, j int) bool { return pickFirst(h[i], h[j]) > 0 }
func (h sampleHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *sampleHeap) Push(x any)        { *h = append(*h, x.(sampleItem)) }
func (h *sampleHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}
