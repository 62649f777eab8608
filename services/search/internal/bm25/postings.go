package bm25

import (
	"cmp"
	"iter"
	"slices"
	"unsafe"
)

// postingList holds, for one term, the ordinals of the chunks containing
// it (ascending) and the term frequency in each, in 3 bytes a posting:
//   - an ordinal is split in two: its low 16 bits are in lows, and its high
//     bits are kept once per segment, a run of postings sharing them (as
//     Roaring bitmaps do), so at a million chunks a list has at most 16
//     segments and an ordinal costs 2 bytes instead of 4;
//   - a frequency of 255 or more is stored as tfOverflow and its exact
//     value kept in Index.bigTF (rare: a term repeated that often in one
//     chunk), so scores are exactly those of full-width frequencies.
//
// Within a segment the lows are ascending, so a search for an ordinal is a
// search of the segments by high bits and then a binary search of 16-bit
// values; position i of the list is the same in lows and tfs.
type postingList struct {
	lows []uint16
	tfs  []uint8
	segs []segment
}

// segment is a run of postings whose ordinals are hi<<16 | low, from
// position start up to the next segment's start.
type segment struct {
	hi, start uint32
}

func (pl *postingList) len() int { return len(pl.lows) }

// span returns segment s's positions [from, to).
func (pl *postingList) span(s int) (from, to int) {
	from, to = int(pl.segs[s].start), len(pl.lows)
	if s+1 < len(pl.segs) {
		to = int(pl.segs[s+1].start)
	}
	return from, to
}

// add appends a posting; ord must be above every ordinal in the list.
func (pl *postingList) add(ord uint32, tf uint8) {
	if n := len(pl.segs); n == 0 || pl.segs[n-1].hi != ord>>16 {
		pl.segs = append(pl.segs, segment{hi: ord >> 16, start: uint32(len(pl.lows))})
	}
	pl.lows = append(pl.lows, uint16(ord))
	pl.tfs = append(pl.tfs, tf)
}

// all yields each posting's position and ordinal, in order.
func (pl *postingList) all() iter.Seq2[int, uint32] { return pl.allFrom(0) }

// allFrom is all from position from on.
func (pl *postingList) allFrom(from int) iter.Seq2[int, uint32] {
	return func(yield func(int, uint32) bool) {
		// The last segment starting at or before from holds it.
		s, _ := slices.BinarySearchFunc(pl.segs, uint32(from)+1, func(sg segment, p uint32) int {
			return cmp.Compare(sg.start, p)
		})
		for s = max(s-1, 0); s < len(pl.segs); s++ {
			base := pl.segs[s].hi << 16
			lo, to := pl.span(s)
			for i := max(lo, from); i < to; i++ {
				if !yield(i, base|uint32(pl.lows[i])) {
					return
				}
			}
		}
	}
}

// ordAt is the ordinal at position i, for walks that move forward a
// posting at a time: *s is the segment of the previous position (0 at
// first), advanced to i's.
func (pl *postingList) ordAt(i int, s *int) uint32 {
	for *s+1 < len(pl.segs) && int(pl.segs[*s+1].start) <= i {
		*s++
	}
	return pl.segs[*s].hi<<16 | uint32(pl.lows[i])
}

// find returns the position of ord in the list.
func (pl *postingList) find(ord uint32) (int, bool) {
	s, ok := slices.BinarySearchFunc(pl.segs, ord>>16, func(sg segment, hi uint32) int {
		return cmp.Compare(sg.hi, hi)
	})
	if !ok {
		return 0, false
	}
	from, to := pl.span(s)
	i, found := slices.BinarySearch(pl.lows[from:to], uint16(ord))
	return from + i, found
}

// clip gives back spare capacity (it copies each slice that has some).
func (pl *postingList) clip() {
	pl.lows = clipped(pl.lows)
	pl.tfs = clipped(pl.tfs)
	pl.segs = clipped(pl.segs)
}

func clipped[S ~[]E, E any](s S) S {
	if cap(s) > len(s) {
		return slices.Clip(slices.Clone(s))
	}
	return s
}

// bytes is the list's heap footprint with its header, near enough.
func (pl *postingList) bytes() int64 {
	return int64(unsafe.Sizeof(*pl)) + int64(cap(pl.lows)*2+cap(pl.tfs)) + int64(cap(pl.segs))*int64(unsafe.Sizeof(segment{}))
}

// retain keeps the postings whose ordinal remap maps below
// math.MaxUint32, renumbered, and reports how many are left. remap must
// keep the order of the ordinals it keeps (compaction's does).
func (pl *postingList) retain(remap []uint32) int {
	w := 0
	segs := pl.segs[:0:0]
	for i, ord := range pl.all() {
		m := remap[ord]
		if m == dropped {
			continue
		}
		if n := len(segs); n == 0 || segs[n-1].hi != m>>16 {
			segs = append(segs, segment{hi: m >> 16, start: uint32(w)})
		}
		pl.lows[w], pl.tfs[w] = uint16(m), pl.tfs[i]
		w++
	}
	switch {
	case w == 0:
		*pl = postingList{}
	case w < cap(pl.lows)/2: // lost most of its postings: let memory follow
		pl.lows, pl.tfs, pl.segs = slices.Clone(pl.lows[:w]), slices.Clone(pl.tfs[:w]), segs
	default:
		pl.lows, pl.tfs, pl.segs = pl.lows[:w], pl.tfs[:w], segs
	}
	return w
}

// dropped marks, in a compaction's remap, an ordinal that is gone.
const dropped = ^uint32(0)

// probe calls hit(j, i) for each of the ascending ordinals cands found in
// the list, where cands[j] is at position i: segment by segment, a merge
// when the segment's candidates are dense in it, else a galloping search
// from the last position.
func probe(pl *postingList, cands []uint32, hit func(j, i int)) {
	j := 0
	for s := range pl.segs {
		hi := pl.segs[s].hi
		for j < len(cands) && cands[j]>>16 < hi {
			j++
		}
		e := j
		for e < len(cands) && cands[e]>>16 == hi {
			e++
		}
		if e > j {
			from, to := pl.span(s)
			probeLows(pl.lows[from:to], from, cands[j:e], j, hit)
		}
		if e == len(cands) {
			return
		}
		j = e
	}
}

// probeLows is probe within one segment: cands share its high bits, and
// hits are reported offset by the segment's first position and the
// candidates' first index.
func probeLows(lows []uint16, from int, cands []uint32, j0 int, hit func(j, i int)) {
	if len(cands)*8 >= len(lows) {
		i := 0
		for j, c := range cands {
			c := uint16(c)
			for i < len(lows) && lows[i] < c {
				i++
			}
			if i == len(lows) {
				return
			}
			if lows[i] == c {
				hit(j0+j, from+i)
			}
		}
		return
	}
	lo := 0 // lows[:lo] are all below the current candidate
	for j, c := range cands {
		c := uint16(c)
		step := 1
		for lo+step-1 < len(lows) && lows[lo+step-1] < c {
			lo += step
			step *= 2
		}
		at, found := slices.BinarySearch(lows[lo:min(lo+step, len(lows))], c)
		lo += at
		if found {
			hit(j0+j, from+lo)
			lo++
		}
		if lo >= len(lows) {
			return
		}
	}
}
