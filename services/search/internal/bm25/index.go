// Package bm25 is an in-memory Okapi BM25 inverted index over analyzed
// terms, keyed by chunk id. It is kept fresh incrementally (Add, Replace,
// Remove) and serves many concurrent readers alongside one writer.
//
// Scoring is classic Okapi BM25 with the Lucene/BEIR IDF:
//
//	idf(t)      = ln(1 + (N - df + 0.5) / (df + 0.5))
//	score(d, q) = sum over query terms t of
//	              qtf(t) * idf(t) * tf*(k1+1) / (tf + k1*(1 - b + b*dl/avgdl))
//
// where N is the number of live documents, df the number of live documents
// containing t, dl the document length in terms and avgdl the mean length
// of live documents. N, df and avgdl are maintained exactly on every write,
// so removed documents never influence scores.
package bm25

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
)

// Params are the BM25 free parameters: K1 >= 0 and B within [0, 1], as
// BM25 defines them (every match then scores above 0, which the search's
// accumulator and its pruning rely on). New and SetParams panic on others:
// they are constants of the code, never input.
type Params struct {
	K1 float64
	B  float64
}

// valid reports whether p is within BM25's range (false for NaN).
func (p Params) valid() bool {
	return p.K1 >= 0 && !math.IsInf(p.K1, 1) && p.B >= 0 && p.B <= 1
}

func (p Params) mustBeValid() {
	if !p.valid() {
		panic(fmt.Sprintf("bm25: parameters out of range: k1 %v (>= 0), b %v (0 to 1)", p.K1, p.B))
	}
}

// DefaultParams are the values chosen by measurement on the SciFact training
// split (see the eval package notes for the sweep).
func DefaultParams() Params { return Params{K1: 1.2, B: 0.75} }

// Doc is one chunk to index. Terms come from analysis.Analyzer; order does
// not matter, duplicates are the term frequencies.
type Doc struct {
	ChunkID  int64
	Category string
	Terms    []string
}

// Hit is one scored result.
type Hit struct {
	ChunkID int64
	Score   float64
	// MatchedTerms are the distinct query terms present in the chunk, in
	// query order.
	MatchedTerms []string
}

// SearchOptions narrow a search.
type SearchOptions struct {
	// K is the number of hits to return; values <= 0 mean 100.
	K int
	// Category, when non-empty, keeps only chunks of that category.
	Category string
	// Categories, when non-empty, keeps only chunks of these categories
	// (with Category, of any of them).
	Categories []string
	// Keep, when set, is asked once per distinct category name and keeps
	// only the chunks of the names it accepts (and of Categories, when
	// both are given). A caller that folds more than a category into the
	// name (the index's access lists) filters on it here, inside the
	// posting walk.
	Keep func(category string) bool
	// noPrune walks every posting (tests compare the pruned walk with it).
	noPrune bool
}

// ErrExists is returned by Add when the chunk id is already indexed.
var ErrExists = errors.New("bm25: chunk already indexed")

// tfOverflow marks a frequency kept in Index.bigTF.
const tfOverflow = math.MaxUint8

// exactTF is the frequency of term id in chunk ord, stored as tf.
func (ix *Index) exactTF(id, ord uint32, tf uint8) float32 {
	if tf != tfOverflow {
		return float32(tf)
	}
	return float32(ix.bigTF[tfKey{id, ord}])
}

// Index is an Okapi BM25 index. The zero value is not usable; use New.
type Index struct {
	mu     sync.RWMutex
	params Params

	termIDs  map[string]uint32
	terms    []string
	postings []postingList
	df       []uint32 // live document frequency per term id

	// Per-ordinal document table. Ordinals are assigned in insertion order;
	// removal tombstones an ordinal until the next compaction.
	chunkIDs []int64
	lens     []uint32
	cats     []uint32
	alive    []bool
	// fwd holds each ordinal's distinct term ids: only removal reads it,
	// to undo df.
	fwd forwardLists
	// fwdBuf is addLocked's scratch for one list.
	fwdBuf []byte
	// bigTF holds frequencies of tfOverflow or more by (term id, ordinal).
	bigTF map[tfKey]uint16

	byChunk  map[int64]uint32
	catIDs   map[string]uint32
	catNames []string

	live     int
	totalLen uint64
	dead     int
	// bounds caches each long list's largest score fraction (prune.go).
	bounds termBounds
	// frozen counts Frozen views being written out: compaction, the one
	// write that changes existing entries in place, waits until none is.
	frozen atomic.Int32

	pool sync.Pool
}

// New returns an empty index.
func New(p Params) *Index {
	p.mustBeValid()
	return &Index{
		params:   p,
		termIDs:  map[string]uint32{},
		byChunk:  map[int64]uint32{},
		catIDs:   map[string]uint32{"": 0},
		catNames: []string{""},
		bigTF:    map[tfKey]uint16{},
	}
}

type tfKey struct{ term, ord uint32 }

// Params reports the scoring parameters.
func (ix *Index) Params() Params { return ix.params }

// SetParams changes k1 and b; they apply to the next search.
func (ix *Index) SetParams(p Params) {
	p.mustBeValid()
	ix.mu.Lock()
	ix.params = p
	ix.mu.Unlock()
}

// Stats describe the index.
type Stats struct {
	Docs        int     // live documents
	Terms       int     // distinct terms with at least one live document
	Postings    int     // stored postings, including tombstoned ones
	AvgDocLen   float64 // mean live document length
	Tombstoned  int     // removed ordinals awaiting compaction
	MemoryBytes int64   // approximate heap used by postings and doc tables
}

// Stats returns a snapshot of index statistics.
func (ix *Index) Stats() Stats {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	s := Stats{Docs: ix.live, Tombstoned: ix.dead}
	for id, pl := range ix.postings {
		s.Postings += pl.len()
		if ix.df[id] > 0 {
			s.Terms++
		}
		s.MemoryBytes += pl.bytes()
	}
	s.MemoryBytes += ix.fwd.bytes()
	s.MemoryBytes += int64(len(ix.bigTF) * 16)
	s.MemoryBytes += int64(len(ix.chunkIDs) * (8 + 4 + 4 + 1))
	if ix.live > 0 {
		s.AvgDocLen = float64(ix.totalLen) / float64(ix.live)
	}
	return s
}

// EachTerm calls fn with every term that has live documents and its
// document frequency (under the read lock: fn must not call the index).
func (ix *Index) EachTerm(fn func(term string, df int)) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	for id, t := range ix.terms {
		if ix.df[id] > 0 {
			fn(t, int(ix.df[id]))
		}
	}
}

// Len returns the number of live documents.
func (ix *Index) Len() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.live
}

// Contains reports whether a chunk id is indexed.
func (ix *Index) Contains(chunkID int64) bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	_, ok := ix.byChunk[chunkID]
	return ok
}

// Add indexes a new chunk; it fails with ErrExists if the id is present.
func (ix *Index) Add(d Doc) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if _, ok := ix.byChunk[d.ChunkID]; ok {
		return fmt.Errorf("add chunk %d: %w", d.ChunkID, ErrExists)
	}
	ix.addLocked(d)
	return nil
}

// Replace indexes a chunk, replacing any previous version of the same id.
func (ix *Index) Replace(d Doc) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.removeLocked(d.ChunkID)
	ix.addLocked(d)
	ix.maybeCompactLocked()
}

// ReplaceBatch upserts many chunks under one lock acquisition, which is what
// ingestion and start-up loading should use.
func (ix *Index) ReplaceBatch(docs []Doc) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for _, d := range docs {
		ix.removeLocked(d.ChunkID)
		ix.addLocked(d)
	}
	ix.maybeCompactLocked()
}

// Update removes chunks and upserts others under one lock, so no search
// sees a document between losing its old chunks and gaining its new ones.
func (ix *Index) Update(remove []int64, upsert []Doc) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for _, id := range remove {
		ix.removeLocked(id)
	}
	for _, d := range upsert {
		ix.removeLocked(d.ChunkID)
		ix.addLocked(d)
	}
	ix.maybeCompactLocked()
}

// Remove deletes a chunk; it reports whether the chunk was present.
func (ix *Index) Remove(chunkID int64) bool {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ok := ix.removeLocked(chunkID)
	ix.maybeCompactLocked()
	return ok
}

// RemoveBatch deletes many chunks and returns how many were present.
func (ix *Index) RemoveBatch(chunkIDs []int64) int {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	n := 0
	for _, id := range chunkIDs {
		if ix.removeLocked(id) {
			n++
		}
	}
	ix.maybeCompactLocked()
	return n
}

func (ix *Index) termID(t string) uint32 {
	if id, ok := ix.termIDs[t]; ok {
		return id
	}
	id := uint32(len(ix.terms))
	ix.termIDs[t] = id
	ix.terms = append(ix.terms, t)
	ix.postings = append(ix.postings, postingList{})
	ix.df = append(ix.df, 0)
	return id
}

func (ix *Index) catID(c string) uint32 {
	if id, ok := ix.catIDs[c]; ok {
		return id
	}
	id := uint32(len(ix.catNames))
	ix.catIDs[c] = id
	ix.catNames = append(ix.catNames, c)
	return id
}

func (ix *Index) addLocked(d Doc) {
	ord := uint32(len(ix.chunkIDs))
	ids := make([]uint32, len(d.Terms))
	for i, t := range d.Terms {
		ids[i] = ix.termID(t)
	}
	// Sorting groups equal ids so term frequencies are run lengths; it is
	// cheaper than a map for a few hundred terms and leaves no garbage.
	slices.Sort(ids)
	fwd := ix.fwdBuf[:0]
	prev := uint32(0)
	for i := 0; i < len(ids); {
		j := i + 1
		for j < len(ids) && ids[j] == ids[i] {
			j++
		}
		tf := min(j-i, math.MaxUint16)
		id := ids[i]
		if tf >= tfOverflow {
			ix.bigTF[tfKey{id, ord}] = uint16(tf)
			tf = tfOverflow
		}
		ix.postings[id].add(ord, uint8(tf))
		ix.df[id]++
		fwd = binary.AppendUvarint(fwd, uint64(id-prev))
		prev = id
		i = j
	}
	ix.chunkIDs = append(ix.chunkIDs, d.ChunkID)
	ix.lens = append(ix.lens, uint32(len(d.Terms)))
	ix.cats = append(ix.cats, ix.catID(d.Category))
	ix.alive = append(ix.alive, true)
	ix.fwd.add(fwd)
	ix.fwdBuf = fwd
	ix.byChunk[d.ChunkID] = ord
	ix.live++
	ix.totalLen += uint64(len(d.Terms))
}

func (ix *Index) removeLocked(chunkID int64) bool {
	ord, ok := ix.byChunk[chunkID]
	if !ok {
		return false
	}
	delete(ix.byChunk, chunkID)
	ix.fwd.each(ord, func(id uint32) {
		ix.df[id]--
		if len(ix.bigTF) > 0 {
			delete(ix.bigTF, tfKey{id, ord})
		}
	})
	ix.alive[ord] = false
	ix.live--
	ix.totalLen -= uint64(ix.lens[ord])
	ix.dead++
	return true
}

// maybeCompactLocked rewrites postings without tombstoned ordinals once they
// are a quarter of the table, bounding both memory and wasted scan work.
func (ix *Index) maybeCompactLocked() {
	if ix.dead < 1024 || ix.dead*4 < len(ix.chunkIDs) {
		return
	}
	ix.compactLocked()
}

// Compact removes tombstoned documents from postings now.
func (ix *Index) Compact() {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.compactLocked()
}

func (ix *Index) compactLocked() {
	if ix.dead == 0 || ix.frozen.Load() > 0 {
		return
	}
	remap := make([]uint32, len(ix.chunkIDs))
	n := uint32(0)
	for ord := range ix.chunkIDs {
		if !ix.alive[ord] {
			remap[ord] = dropped
			continue
		}
		remap[ord] = n
		ix.chunkIDs[n] = ix.chunkIDs[ord]
		ix.lens[n] = ix.lens[ord]
		ix.cats[n] = ix.cats[ord]
		ix.alive[n] = true
		ix.byChunk[ix.chunkIDs[n]] = n
		n++
	}
	ix.chunkIDs = slices.Clip(ix.chunkIDs[:n])
	ix.lens = slices.Clip(ix.lens[:n])
	ix.cats = slices.Clip(ix.cats[:n])
	ix.alive = slices.Clip(ix.alive[:n])
	ix.fwd = ix.fwd.keep(func(ord uint32) bool { return remap[ord] != dropped })
	big := make(map[tfKey]uint16, len(ix.bigTF))
	for k, v := range ix.bigTF {
		if m := remap[k.ord]; m != dropped {
			big[tfKey{k.term, m}] = v
		}
	}
	ix.bigTF = big
	for id := range ix.postings {
		ix.postings[id].retain(remap)
	}
	ix.dead = 0
	ix.bounds.reset()
}

// accumulator is per-search scratch space, pooled so searches do not
// allocate proportional to the corpus.
type accumulator struct {
	// scores are 0 for chunks not touched (every match scores above 0). A
	// chunk the walk met but did not keep, since it cannot reach theta, may
	// be kept by a later list with only part of its score; it still ranks
	// below the k chunks at theta or above, whose scores only grow.
	scores  []float32
	touched []uint32
	cands   []uint32
	scratch []uint32
}

// IDF returns the BM25 idf of a term given the live collection.
func IDF(n, df int) float64 {
	return math.Log(1 + (float64(n)-float64(df)+0.5)/(float64(df)+0.5))
}

// Search scores chunks against the analyzed query terms. Repeated query
// terms count once per occurrence (as Lucene's disjunction of clauses does).
// Hits are ordered by descending score, ties by ascending chunk id.
func (ix *Index) Search(terms []string, opts SearchOptions) []Hit {
	k := opts.K
	if k <= 0 {
		k = 100
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.live == 0 || len(terms) == 0 {
		return nil
	}
	// One read lock covers the whole filtered search, so a multi-category
	// query sees one state of the index.
	wanted := opts.Categories
	if opts.Category != "" {
		wanted = append([]string{opts.Category}, wanted...)
	}
	catFilter := len(wanted) > 0 || opts.Keep != nil
	// Category ids are dense, so membership is one slice load per posting.
	var wantCat []bool
	if catFilter {
		wantCat = make([]bool, len(ix.catNames))
		found := false
		if len(wanted) > 0 {
			for _, c := range wanted {
				if id, ok := ix.catIDs[c]; ok {
					wantCat[id], found = true, true
				}
			}
		} else {
			for id := range wantCat {
				wantCat[id] = true
			}
			found = true
		}
		if opts.Keep != nil {
			found = false
			for id, name := range ix.catNames {
				if wantCat[id] = wantCat[id] && opts.Keep(name); wantCat[id] {
					found = true
				}
			}
		}
		if !found {
			return nil
		}
		// A filter that keeps every category is no filter: skip its load
		// per posting.
		catFilter = slices.Contains(wantCat, false)
	}

	// Distinct query terms with their multiplicity, in query order.
	qts := make([]qterm, 0, len(terms))
outer:
	for _, t := range terms {
		for i := range qts {
			if qts[i].term == t {
				qts[i].qtf++
				continue outer
			}
		}
		id, ok := ix.termIDs[t]
		if !ok || ix.df[id] == 0 {
			qts = append(qts, qterm{term: t, id: math.MaxUint32, qtf: 1})
			continue
		}
		qts = append(qts, qterm{term: t, id: id, qtf: 1})
	}

	n := len(ix.chunkIDs)
	acc, _ := ix.pool.Get().(*accumulator)
	if acc == nil {
		acc = &accumulator{}
	}
	if len(acc.scores) < n {
		acc.scores = make([]float32, n)
	}
	acc.touched = acc.touched[:0]
	scores := acc.scores

	k1, b := ix.params.K1, ix.params.B
	avgdl := float64(ix.totalLen) / float64(ix.live)
	if avgdl == 0 {
		avgdl = 1
	}
	// norm(dl) = k1*(1-b) + (k1*b/avgdl)*dl, hoisted out of the posting loop.
	c0 := float32(k1 * (1 - b))
	c1 := float32(k1 * b / avgdl)
	lens, alive, cats := ix.lens, ix.alive, ix.cats
	order := ix.planLocked(qts, avgdl)
	// rest is the most the terms not yet walked can add to a chunk's score.
	var rest float64
	for _, qi := range order {
		rest += qts[qi].bound
	}
	var cands []uint32 // nil while every posting is walked
	var theta float32
	// runEnds ends each walked list's run of first touches in acc.touched.
	runEnds, runs := make([]int, 1, 8), make([]int, 0, 8)
	for j, qi := range order {
		q := &qts[qi]
		pl := &ix.postings[q.id]
		w := q.w
		if !opts.noPrune && cands == nil && j > 0 && len(acc.touched) >= k && worthPruning(ix.postings, qts, order[j:], len(acc.touched)) {
			// Once the k-th best score so far exceeds all the rest can add, no
			// chunk not yet seen can enter the top k: only the chunks that
			// still can are scored further, found by search in the lists.
			if theta = kthBest(scores, acc.touched, k); float64(theta) > rest {
				// The lists are in ordinal order, and so is each walked
				// list's run of newly touched chunks: merging the runs'
				// survivors sorts them.
				cands = acc.cands[:0]
				for r := 1; r < len(runEnds); r++ {
					cands = survivors(acc.touched[runEnds[r-1]:runEnds[r]], scores, theta, rest, cands)
					runs = append(runs, len(cands))
				}
				cands, acc.scratch = mergeRuns(cands, runs, acc.scratch)
				if onPrune != nil {
					onPrune()
				}
			}
		}
		if cands != nil {
			probe(pl, cands, func(c, i int) {
				ord := cands[c]
				tf := ix.exactTF(q.id, ord, pl.tfs[i])
				scores[ord] += w * tf / (tf + c0 + c1*float32(lens[ord]))
			})
			rest = max(rest-q.bound, 0) // not below: rounding must not drop the k-th
			cands = survivors(cands, scores, theta, rest, cands[:0])
			continue
		}
		// A chunk first met here can add at most the bounds after this
		// list: one that cannot reach theta (a k-th best so far, 0 before
		// the first check) is not kept.
		rest = max(rest-q.bound, 0)
		th := float64(theta) * thetaSlack
		for sg := range pl.segs {
			base := pl.segs[sg].hi << 16
			from, to := pl.span(sg)
			tfs := pl.tfs[from:to]
			for i, low := range pl.lows[from:to] {
				ord := base | uint32(low)
				if !alive[ord] || (catFilter && !wantCat[cats[ord]]) {
					continue
				}
				tf := ix.exactTF(q.id, ord, tfs[i])
				s := w * tf / (tf + c0 + c1*float32(lens[ord]))
				if scores[ord] == 0 {
					if float64(s)+rest < th {
						continue
					}
					acc.touched = append(acc.touched, ord)
				}
				scores[ord] += s
			}
		}
		if len(acc.touched) > runEnds[len(runEnds)-1] {
			runEnds = append(runEnds, len(acc.touched))
		}
	}
	ranked := acc.touched
	if cands != nil {
		ranked = cands
		acc.cands = cands
	}

	// Top-k by (score desc, chunk id asc) with a bounded min-heap.
	h := hitHeap{items: make([]heapItem, 0, min(k, len(ranked)))}
	for _, ord := range ranked {
		it := heapItem{score: scores[ord], chunk: ix.chunkIDs[ord], ord: ord}
		if len(h.items) < k {
			h.push(it)
		} else if better(it, h.items[0]) {
			h.items[0] = it
			h.down(0)
		}
	}
	items := h.items
	// slices' pdqsort is sort.Slice's with the same comparisons, without
	// its reflection.
	slices.SortFunc(items, func(a, b heapItem) int {
		switch {
		case better(a, b):
			return -1
		case better(b, a):
			return 1
		}
		return 0
	})
	hits := make([]Hit, len(items))
	for i, it := range items {
		hits[i] = Hit{ChunkID: it.chunk, Score: float64(it.score)}
	}
	ix.matchedLocked(qts, items, hits, acc)

	for _, ord := range acc.touched {
		scores[ord] = 0
	}
	ix.pool.Put(acc)
	return hits
}

type heapItem struct {
	score float32
	chunk int64
	ord   uint32
}

// better orders by descending score, then ascending chunk id, so results
// are stable across runs and replicas.
func better(a, b heapItem) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	return a.chunk < b.chunk
}

// hitHeap is a min-heap on "better": the root is the worst kept hit.
type hitHeap struct{ items []heapItem }

func (h *hitHeap) push(it heapItem) {
	h.items = append(h.items, it)
	i := len(h.items) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !better(h.items[p], h.items[i]) {
			break
		}
		h.items[p], h.items[i] = h.items[i], h.items[p]
		i = p
	}
}

func (h *hitHeap) down(i int) {
	n := len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		worst := l
		if r := l + 1; r < n && better(h.items[l], h.items[r]) {
			worst = r
		}
		if !better(h.items[i], h.items[worst]) {
			return
		}
		h.items[i], h.items[worst] = h.items[worst], h.items[i]
		i = worst
	}
}

// MatchedTerms returns, for each chunk (out[i] of chunkIDs[i]; nil for one
// not in the index), the distinct terms of terms, in their order, that
// occur in it, all under one read lock, probed as a search's hits are
// (termsIn). It lets results found only by another retriever report which
// query terms they contain.
func (ix *Index) MatchedTerms(chunkIDs []int64, terms []string) [][]string {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	var qts []qterm // the distinct terms the index holds, in their order
	for i, t := range terms {
		if slices.Contains(terms[:i], t) {
			continue
		}
		if id, ok := ix.termIDs[t]; ok {
			qts = append(qts, qterm{term: t, id: id})
		}
	}
	out := make([][]string, len(chunkIDs))
	if len(qts) == 0 {
		return out
	}
	// The chunks in the index, by ordinal: probe wants them ascending and
	// distinct (a chunk asked twice shares its ordinal's row).
	type at struct {
		ord uint32
		i   int // in chunkIDs
	}
	byOrd := make([]at, 0, len(chunkIDs))
	for i, c := range chunkIDs {
		if ord, ok := ix.byChunk[c]; ok {
			byOrd = append(byOrd, at{ord, i})
		}
	}
	slices.SortFunc(byOrd, func(a, b at) int { return cmp.Compare(a.ord, b.ord) })
	ords := make([]uint32, 0, len(byOrd))
	rows := make([]int, len(byOrd)) // byOrd[k]'s index in ords
	for k, a := range byOrd {
		if k == 0 || a.ord != byOrd[k-1].ord {
			ords = append(ords, a.ord)
		}
		rows[k] = len(ords) - 1
	}
	ix.termsIn(qts, ords, rows, func(k int, terms []string) { out[byOrd[k].i] = terms })
	return out
}

// Trim gives back the spare capacity of every posting list, which appending
// leaves at up to half of a list: worth doing once after a bulk load (it
// copies each list that has spare room, under the write lock).
func (ix *Index) Trim() {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for id := range ix.postings {
		ix.postings[id].clip()
	}
	ix.chunkIDs = slices.Clip(ix.chunkIDs)
	ix.lens = slices.Clip(ix.lens)
	ix.cats = slices.Clip(ix.cats)
	ix.alive = slices.Clip(ix.alive)
	ix.fwd.clip()
}
