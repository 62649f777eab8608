package bm25

import (
	"encoding/binary"
)

// forwardLists holds each ordinal's distinct term ids, ascending, as
// varint deltas (about 1.3 bytes a term): only removal reads them, to undo
// document frequencies. The lists of fwdBlock consecutive ordinals share
// one slab, so a million chunks cost a few dozen allocations and 4 bytes
// of offset each, not a slice header (24 bytes) and an object for the
// collector each. A removed ordinal's bytes stay until compaction, which
// rewrites the slabs.
type forwardLists struct {
	slabs [][]byte // one per block of fwdBlock ordinals
	ends  []uint32 // each ordinal's end in its block's slab
}

// fwdBlock is how many ordinals share a slab. Decode builds the lists a
// block at a time from the postings: their scratch tables stay in cache
// while every posting list is walked for the block (walking the lists
// once for all ordinals measured 3.5 s of CPU at a million chunks, mostly
// cache misses).
const fwdBlock = 16384

func (f *forwardLists) len() int { return len(f.ends) }

// add appends the next ordinal's list, already encoded.
func (f *forwardLists) add(list []byte) {
	if len(f.ends)%fwdBlock == 0 {
		if n := len(f.slabs); n > 0 { // full: give back append's spare room
			f.slabs[n-1] = clipped(f.slabs[n-1])
		}
		f.slabs = append(f.slabs, nil)
	}
	b := &f.slabs[len(f.slabs)-1]
	*b = append(*b, list...)
	f.ends = append(f.ends, uint32(len(*b)))
}

// list is ordinal ord's list.
func (f *forwardLists) list(ord uint32) []byte {
	start := uint32(0)
	if ord%fwdBlock != 0 {
		start = f.ends[ord-1]
	}
	return f.slabs[ord/fwdBlock][start:f.ends[ord]]
}

// each calls fn with each term id of ordinal ord's list.
func (f *forwardLists) each(ord uint32, fn func(id uint32)) {
	l := f.list(ord)
	id := uint32(0)
	for len(l) > 0 {
		d, n := binary.Uvarint(l)
		if n <= 0 {
			return
		}
		l = l[n:]
		id += uint32(d)
		fn(id)
	}
}

// keep returns the lists of the ordinals keep reports true for, in
// order: compaction's copy, each slab allocated to size (a pass to size
// them, then one to copy). Beside the old lists until they are dropped,
// it briefly doubles their memory.
func (f *forwardLists) keep(keep func(ord uint32) bool) forwardLists {
	var sizes []int // each new block's bytes
	n := 0
	for ord := range uint32(f.len()) {
		if !keep(ord) {
			continue
		}
		if n%fwdBlock == 0 {
			sizes = append(sizes, 0)
		}
		sizes[len(sizes)-1] += len(f.list(ord))
		n++
	}
	out := forwardLists{slabs: make([][]byte, len(sizes)), ends: make([]uint32, 0, n)}
	for b, size := range sizes {
		out.slabs[b] = make([]byte, 0, size)
	}
	for ord := range uint32(f.len()) {
		if keep(ord) {
			b := &out.slabs[len(out.ends)/fwdBlock]
			*b = append(*b, f.list(ord)...)
			out.ends = append(out.ends, uint32(len(*b)))
		}
	}
	return out
}

// clip gives back spare capacity.
func (f *forwardLists) clip() {
	f.ends = clipped(f.ends)
	for i := range f.slabs {
		f.slabs[i] = clipped(f.slabs[i])
	}
	f.slabs = clipped(f.slabs)
}

// bytes is the lists' heap footprint, near enough.
func (f *forwardLists) bytes() int64 {
	n := int64(cap(f.ends)*4 + cap(f.slabs)*24)
	for _, s := range f.slabs {
		n += int64(cap(s))
	}
	return n
}

// fromPostings rebuilds every ordinal's list from the postings, block by
// block of ordinals: a pass to size each list, then one to fill them.
func fromPostings(postings []postingList, n int) forwardLists {
	f := forwardLists{ends: make([]uint32, n)}
	cursor := make([]int, len(postings)) // each list's next position
	seg := make([]int, len(postings))    // and its segment, for ordAt
	ends := make([]uint32, fwdBlock)
	prev := make([]uint32, fwdBlock)
	for lo := 0; lo < n; lo += fwdBlock {
		hi := uint32(min(lo+fwdBlock, n))
		clear(ends) // each list's size first
		clear(prev)
		for id := range postings {
			pl, s := &postings[id], seg[id]
			for c := cursor[id]; c < pl.len(); c++ {
				ord := pl.ordAt(c, &s)
				if ord >= hi {
					break
				}
				o := int(ord) - lo
				ends[o] += uint32(uvarintLen(uint64(uint32(id) - prev[o])))
				prev[o] = uint32(id)
			}
		}
		total := uint32(0)
		for o := range int(hi) - lo {
			total += ends[o]
			ends[o] = total - ends[o] // now each list's start, its write position
		}
		slab := make([]byte, total)
		clear(prev)
		for id := range postings {
			pl := &postings[id]
			c := cursor[id]
			for ; c < pl.len(); c++ {
				ord := pl.ordAt(c, &seg[id])
				if ord >= hi {
					break
				}
				o := int(ord) - lo
				ends[o] += uint32(binary.PutUvarint(slab[ends[o]:], uint64(uint32(id)-prev[o])))
				prev[o] = uint32(id)
			}
			cursor[id] = c
		}
		copy(f.ends[lo:hi], ends)
		f.slabs = append(f.slabs, slab)
	}
	return f
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
