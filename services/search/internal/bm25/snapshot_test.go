package bm25

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/services/search/internal/binfmt"
)

// randomIndex builds an index of n chunks over a small vocabulary, with
// one chunk repeating a term past the 8-bit frequency (bigTF).
func randomIndex(n int) *Index {
	rng := rand.New(rand.NewPCG(7, 11))
	ix := New(DefaultParams())
	docs := make([]Doc, 0, n)
	for i := 0; i < n; i++ {
		terms := make([]string, 3+rng.IntN(40))
		for j := range terms {
			terms[j] = fmt.Sprintf("t%d", rng.IntN(300))
		}
		docs = append(docs, Doc{ChunkID: int64(1000 + i*3), Category: []string{"", "a", "b"}[i%3], Terms: terms})
	}
	docs[5].Terms = append(docs[5].Terms, strings.Fields(strings.Repeat("loud ", 300))...)
	ix.ReplaceBatch(docs)
	return ix
}

func encode(t *testing.T, ix *Index) []byte {
	t.Helper()
	f := ix.Freeze()
	defer f.Release()
	var buf bytes.Buffer
	w := binfmt.NewWriter(&buf)
	f.Encode(w)
	require.NoError(t, w.Flush())
	return buf.Bytes()
}

// requireSame asserts two indexes rank every probe query identically.
func requireSame(t *testing.T, want, got *Index) {
	t.Helper()
	require.Equal(t, want.Len(), got.Len())
	ws, gs := want.Stats(), got.Stats()
	require.Equal(t, ws.Docs, gs.Docs)
	require.Equal(t, ws.Terms, gs.Terms)
	require.InDelta(t, ws.AvgDocLen, gs.AvgDocLen, 1e-9)
	dfs := func(ix *Index) map[string]int {
		m := map[string]int{}
		ix.EachTerm(func(term string, df int) { m[term] = df })
		return m
	}
	require.Equal(t, dfs(want), dfs(got))
	for _, q := range [][]string{{"t1"}, {"t2", "t3", "t2"}, {"loud"}, {"loud", "t7"}, {"t299", "t0", "t150"}, {"absent"}} {
		for _, opts := range []SearchOptions{{K: 20}, {K: 5, Category: "a"}, {K: 50, Categories: []string{"", "b"}}} {
			require.Equal(t, want.Search(q, opts), got.Search(q, opts), "query %v %+v", q, opts)
		}
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	tests := []struct {
		name   string
		chunks int
		change func(ix *Index)
	}{
		{"fresh", 400, func(*Index) {}},
		// Ordinals past 2^16: posting lists of several segments.
		{"past one segment", 140_000, func(ix *Index) { ix.Remove(1000 + 3*70_000) }},
		{"with tombstones", 400, func(ix *Index) {
			for i := 0; i < 60; i += 3 {
				ix.Remove(int64(1000 + i*3))
			}
			ix.Replace(Doc{ChunkID: 1003, Category: "b", Terms: []string{"t1", "t1", "new"}})
		}},
		{"compacted", 400, func(ix *Index) {
			for i := 0; i < 100; i++ {
				ix.Remove(int64(1000 + i*3))
			}
			ix.Compact()
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ix := randomIndex(tc.chunks)
			tc.change(ix)
			r := binfmt.NewReader(bytes.NewReader(encode(t, ix)))
			got := Decode(r, DefaultParams())
			require.NoError(t, r.Err())
			requireSame(t, ix, got)

			// The rebuilt forward lists undo document frequencies exactly:
			// the same writes on both keep them equal.
			for _, x := range []*Index{ix, got} {
				x.Remove(1015)
				x.Remove(1000 + 3*100_000) // in the third segment, if there
				x.Replace(Doc{ChunkID: 1018, Terms: []string{"loud", "t2"}})
				x.Add(Doc{ChunkID: 99, Category: "a", Terms: []string{"t3", "t3"}})
			}
			requireSame(t, ix, got)
		})
	}
}

// A frozen view is the index as it was: writes after Freeze, including a
// compaction that would rewrite postings in place, do not leak into it.
func TestFrozenViewIsStable(t *testing.T) {
	ix := randomIndex(300)
	before := Decode(binfmt.NewReader(bytes.NewReader(encode(t, ix))), DefaultParams())
	f := ix.Freeze()
	for i := 0; i < 300; i += 2 {
		ix.Remove(int64(1000 + i*3))
	}
	ix.Add(Doc{ChunkID: 5, Terms: []string{"t1", "fresh"}})
	ix.Compact()
	require.NotZero(t, ix.Stats().Tombstoned, "compaction waits for the view")
	var buf bytes.Buffer
	w := binfmt.NewWriter(&buf)
	f.Encode(w)
	require.NoError(t, w.Flush())
	f.Release()
	r := binfmt.NewReader(&buf)
	got := Decode(r, DefaultParams())
	require.NoError(t, r.Err())
	requireSame(t, before, got)
	ix.Compact()
	require.Zero(t, ix.Stats().Tombstoned, "compaction runs once released")
}

func TestSnapshotDecodeRejectsDamage(t *testing.T) {
	good := encode(t, randomIndex(50))
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"truncated", good[:len(good)/2]},
		{"one byte short", good[:len(good)-1]},
		{"huge chunk count", append([]byte{1, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}, good[3:]...)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := binfmt.NewReader(bytes.NewReader(tc.data))
			require.Nil(t, Decode(r, DefaultParams()))
			require.True(t, errors.Is(r.Err(), binfmt.ErrCorrupt), "%v", r.Err())
		})
	}
}
