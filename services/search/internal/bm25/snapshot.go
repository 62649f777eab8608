package bm25

import (
	"math"
	"slices"
	"sync/atomic"

	"github.com/bmcis/knowledge/services/search/internal/binfmt"
)

// Frozen is a consistent, read-only view of an Index taken by Freeze, to be
// written out (Encode) while the index keeps changing. It copies what
// writes change in place (document frequencies, liveness, big term
// frequencies) and shares the rest, which writes only append to; the
// index defers compaction, the one in-place rewrite, until Release.
type Frozen struct {
	ix       *Index
	terms    []string
	postings []postingList
	df       []uint32
	chunkIDs []int64
	lens     []uint32
	cats     []uint32
	alive    []bool
	bigTF    map[tfKey]uint16
	catNames []string
	live     int
	released atomic.Bool
}

// Freeze takes a view of the index under its read lock: a copy of a few
// bytes per term and per chunk (about 1 MB per 100,000 chunks).
func (ix *Index) Freeze() *Frozen {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	ix.frozen.Add(1)
	big := make(map[tfKey]uint16, len(ix.bigTF))
	for k, v := range ix.bigTF {
		big[k] = v
	}
	return &Frozen{
		ix: ix, terms: ix.terms[:len(ix.terms):len(ix.terms)], postings: slices.Clone(ix.postings), df: slices.Clone(ix.df),
		chunkIDs: ix.chunkIDs[:len(ix.chunkIDs):len(ix.chunkIDs)], lens: ix.lens[:len(ix.lens):len(ix.lens)],
		cats: ix.cats[:len(ix.cats):len(ix.cats)], alive: slices.Clone(ix.alive), bigTF: big,
		catNames: slices.Clone(ix.catNames), live: ix.live,
	}
}

// Release lets the index compact again; the view must not be used after.
func (f *Frozen) Release() {
	if f.released.CompareAndSwap(false, true) {
		f.ix.frozen.Add(-1)
	}
}

// Len is the number of live chunks in the view.
func (f *Frozen) Len() int { return f.live }

// Encode writes the view: category names; the live chunks in ordinal
// order (ordinals renumbered densely, so the copy is compacted) as chunk
// id deltas, lengths and category ids; then every term with live chunks
// and its postings as (ordinal delta, exact frequency) pairs. Scoring
// parameters are not part of it: they apply at search time.
func (f *Frozen) Encode(w *binfmt.Writer) {
	w.Uvarint(uint64(len(f.catNames)))
	for _, c := range f.catNames {
		w.String(c)
	}
	remap := make([]uint32, len(f.chunkIDs))
	w.Uvarint(uint64(f.live))
	next, prevID := uint32(0), int64(0)
	for ord, id := range f.chunkIDs {
		if !f.alive[ord] {
			remap[ord] = math.MaxUint32
			continue
		}
		remap[ord] = next
		next++
		w.Varint(id - prevID)
		prevID = id
		w.Uvarint(uint64(f.lens[ord]))
		w.Uvarint(uint64(f.cats[ord]))
	}
	live := 0
	for _, n := range f.df {
		if n > 0 {
			live++
		}
	}
	w.Uvarint(uint64(live))
	for id, t := range f.terms {
		if f.df[id] == 0 {
			continue
		}
		pl := &f.postings[id]
		n := 0
		for _, ord := range pl.all() {
			if f.alive[ord] {
				n++
			}
		}
		w.String(t)
		w.Uvarint(uint64(n))
		prev := uint32(0)
		for i, ord := range pl.all() {
			if !f.alive[ord] {
				continue
			}
			m := remap[ord]
			w.Uvarint(uint64(m - prev))
			prev = m
			tf := uint64(pl.tfs[i])
			if pl.tfs[i] == tfOverflow {
				tf = uint64(f.bigTF[tfKey{uint32(id), ord}])
			}
			w.Uvarint(tf)
		}
	}
}

// Decode reads what Encode wrote into a new index with parameters p. It
// checks what it can on the way (ordinals in range and ascending, each
// chunk's term frequencies adding up to its length); a failure is in
// r.Err() and the index returned is then nil.
func Decode(r *binfmt.Reader, p Params) *Index {
	ix := New(p)
	ncat := r.Count("categories", 1<<24)
	ix.catNames = make([]string, 0, min(ncat, 1024)) // a count is not yet checked: grow as names arrive
	clear(ix.catIDs)
	for i := 0; i < ncat && r.Err() == nil; i++ {
		c := r.String()
		if _, dup := ix.catIDs[c]; dup {
			r.Failf("category %q twice", c)
		}
		ix.catIDs[c] = uint32(i)
		ix.catNames = append(ix.catNames, c)
	}
	if r.Err() == nil && (ncat == 0 || ix.catNames[0] != "") {
		r.Failf("first category is not the empty one")
	}
	// Slices grow with what is actually read: a corrupt count fails at the
	// end of the input instead of sizing an allocation.
	n := r.Count("chunks", math.MaxUint32-1)
	hint := min(n, 1<<20)
	ix.chunkIDs, ix.lens, ix.cats = make([]int64, 0, hint), make([]uint32, 0, hint), make([]uint32, 0, hint)
	id := int64(0)
	for i := 0; i < n && r.Err() == nil; i++ {
		id += r.Varint()
		l, c := r.Uvarint(), r.Uvarint()
		if l > math.MaxUint32 || c >= uint64(ncat) {
			r.Failf("chunk %d: length %d or category %d out of range", id, l, c)
			break
		}
		if _, dup := ix.byChunk[id]; dup {
			r.Failf("chunk %d twice", id)
			break
		}
		ix.byChunk[id] = uint32(i)
		ix.chunkIDs = append(ix.chunkIDs, id)
		ix.lens = append(ix.lens, uint32(l))
		ix.cats = append(ix.cats, uint32(c))
		ix.totalLen += l
	}
	if r.Err() != nil {
		return nil
	}
	sums := make([]uint32, n)
	capped := map[uint32]bool{}
	nterms := r.Count("terms", math.MaxUint32-1)
	for t := 0; t < nterms && r.Err() == nil; t++ {
		term := r.String()
		cnt := r.Count("postings", uint64(n))
		if _, dup := ix.termIDs[term]; dup {
			r.Failf("term %q twice", term)
			break
		}
		tid := ix.termID(term)
		pl := postingList{lows: make([]uint16, 0, cnt), tfs: make([]uint8, 0, cnt)}
		ord := uint32(0)
		for i := 0; i < cnt; i++ {
			d := r.Uvarint()
			tf := r.Uvarint()
			if (i > 0 && d == 0) || uint64(ord)+d >= uint64(n) || tf == 0 || tf > math.MaxUint16 {
				r.Failf("term %q: posting %d out of range", term, i)
				break
			}
			ord += uint32(d)
			if tf >= tfOverflow {
				ix.bigTF[tfKey{tid, ord}] = uint16(tf)
				pl.add(ord, tfOverflow)
			} else {
				pl.add(ord, uint8(tf))
			}
			if tf == math.MaxUint16 {
				capped[ord] = true
			}
			sums[ord] += uint32(tf)
		}
		pl.segs = clipped(pl.segs)
		ix.postings[tid] = pl
		ix.df[tid] = uint32(cnt)
		if cnt == 0 {
			r.Failf("term %q without postings", term)
		}
	}
	for ord, s := range sums {
		if r.Err() != nil {
			break
		}
		if s != ix.lens[ord] && !(capped[uint32(ord)] && s < ix.lens[ord]) {
			r.Failf("chunk %d: frequencies add up to %d, length %d", ix.chunkIDs[ord], s, ix.lens[ord])
		}
	}
	if r.Err() != nil {
		return nil
	}
	ix.alive = make([]bool, n)
	for i := range ix.alive {
		ix.alive[i] = true
	}
	ix.live = n
	ix.fwd = fromPostings(ix.postings, n)
	return ix
}
