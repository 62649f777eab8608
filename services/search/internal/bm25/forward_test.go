package bm25

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestForwardLists: lists read back as written across block boundaries,
// compaction's copy keeps the chosen ones in order, and no slab keeps
// spare room after a copy or a clip.
func TestForwardLists(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 9))
	var f forwardLists
	var want [][]byte
	for range 3*fwdBlock + 77 {
		var l []byte
		id := uint64(0)
		for range rng.IntN(12) {
			id += 1 + uint64(rng.IntN(500))
			l = binary.AppendUvarint(l, id)
		}
		f.add(l)
		want = append(want, l)
	}
	require.Len(t, f.slabs, 4)
	noSpare := func(f *forwardLists) {
		for i, s := range f.slabs {
			require.Equal(t, len(s), cap(s), "slab %d", i)
		}
	}
	for ord, l := range want {
		require.Equal(t, string(l), string(f.list(uint32(ord))), "ord %d", ord)
	}
	for i, s := range f.slabs[:3] {
		require.Equal(t, len(s), cap(s), "full slab %d keeps spare room", i)
	}
	f.clip()
	noSpare(&f)

	odd := func(ord uint32) bool { return ord%3 != 1 }
	kept := f.keep(odd)
	noSpare(&kept)
	n := 0
	for ord, l := range want {
		if odd(uint32(ord)) {
			require.Equal(t, string(l), string(kept.list(uint32(n))), "ord %d, now %d", ord, n)
			n++
		}
	}
	require.Equal(t, n, kept.len())
	require.Empty(t, (&forwardLists{}).keep(odd).slabs)
}
