package embed

import (
	"cmp"
	"container/heap"
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
// Documents are ordered by a hash of their identity (a uniform random
// order that is the same every time), chunks by position within their
// document, so a document's chunks stay consecutive and in order, which
// fine-tuning's neighbour pairs need. With a limit, the sample keeps the
// first limit texts of that order: whole documents chosen at random, the
// last one possibly cut. Memory is bounded by the limit.
type Sample struct {
	limit int
	items sampleHeap
}

// NewSample keeps at most limit texts (limit <= 0: all).
func NewSample(limit int) *Sample { return &Sample{limit: limit} }

// Add offers the text of chunk index of document doc.
func (s *Sample) Add(doc string, index int, text string) {
	h := fnv.New64a()
	h.Write([]byte(doc))
	it := sampleItem{key: h.Sum64(), doc: doc, index: index, text: text}
	if s.limit > 0 && len(s.items) == s.limit {
		if compareItems(it, s.items[0]) >= 0 {
			return // after every kept text
		}
		s.items[0] = it
		heap.Fix(&s.items, 0)
		return
	}
	heap.Push(&s.items, it)
}

// Len is the number of texts kept.
func (s *Sample) Len() int { return len(s.items) }

// Texts returns the kept texts in their order.
func (s *Sample) Texts() []string {
	items := slices.Clone(s.items)
	slices.SortFunc(items, compareItems)
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.text
	}
	return out
}

type sampleItem struct {
	key   uint64
	doc   string
	index int
	text  string
}

func compareItems(a, b sampleItem) int {
	return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.doc, b.doc), cmp.Compare(a.index, b.index), cmp.Compare(a.text, b.text))
}

// sampleHeap is a max-heap: the root is the last kept text, the first to
// give way.
type sampleHeap []sampleItem

func (h sampleHeap) Len() int           { return len(h) }
func (h sampleHeap) Less(i, j int) bool { return compareItems(h[i], h[j]) > 0 }
func (h sampleHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *sampleHeap) Push(x any)        { *h = append(*h, x.(sampleItem)) }
func (h *sampleHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}
