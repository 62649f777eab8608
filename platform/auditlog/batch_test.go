package auditlog

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBatchLen: batches are cut by count and by estimated bytes, in order,
// and an entry over the byte bound alone still goes, alone.
func TestBatchLen(t *testing.T) {
	small := Entry{Tool: "get_chunks", Outcome: OK}
	docs := func(n, size int) Entry {
		e := small
		for range n {
			e.DocumentIDs = append(e.DocumentIDs, strings.Repeat("d", size))
		}
		return e
	}
	page := docs(10, 1024)             // a page of long document ids: about 10 KiB
	huge := docs(MaxDocumentIDs, 1024) // about 1 MiB: over a 100 KiB bound alone
	smallBytes, pageBytes := entryBytes(small), entryBytes(page)
	require.Greater(t, pageBytes, 10*1024)

	// 500 numbered pages: a batch of 500 would be over 5 MB, over gRPC's
	// default 4 MiB; the bound cuts them into batches of perBatch.
	pages := repeat(page, 500)
	perBatch := DefaultMaxBatchBytes / entryBytes(pages[0])
	var pagesWant []int
	for left := 500; left > 0; left -= perBatch {
		pagesWant = append(pagesWant, min(left, perBatch))
	}
	require.Len(t, pagesWant, 5)

	tests := []struct {
		name                 string
		entries              []Entry
		maxEntries, maxBytes int
		want                 []int // the lengths of the successive batches
	}{
		{"empty", nil, 500, 1 << 20, nil},
		{"under both bounds", []Entry{small, small, small}, 500, 1 << 20, []int{3}},
		{"by count", []Entry{small, small, small, small, small}, 2, 1 << 20, []int{2, 2, 1}},
		{"by bytes", []Entry{page, page, page, page, page}, 500, 2*pageBytes + 1, []int{2, 2, 1}},
		{"exactly the byte bound", []Entry{page, page, page}, 500, 2 * pageBytes, []int{2, 1}},
		{"count before bytes", []Entry{small, small, small}, 2, 10 * smallBytes, []int{2, 1}},
		{"an entry over the bound goes alone", []Entry{small, huge, small}, 500, 100 * 1024, []int{1, 1, 1}},
		{"an entry over the bound first", []Entry{huge, small, small}, 500, 100 * 1024, []int{1, 2}},
		{"500 pages under the default bound", pages, DefaultBatchSize, DefaultMaxBatchBytes, pagesWant},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []int
			var joined []Entry
			for rest := tc.entries; len(rest) > 0; {
				n := batchLen(rest, tc.maxEntries, tc.maxBytes)
				require.Positive(t, n, "every batch carries an entry")
				size := 0
				for _, e := range rest[:n] {
					size += entryBytes(e)
				}
				require.True(t, n == 1 || size <= tc.maxBytes, "a batch of %d entries is %d bytes", n, size)
				got = append(got, n)
				joined = append(joined, rest[:n]...)
				rest = rest[n:]
			}
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.entries, joined, "nothing lost or reordered")
		})
	}
}

func repeat(e Entry, n int) []Entry {
	out := make([]Entry, n)
	for i := range out {
		out[i] = e
		out[i].RequestID = fmt.Sprintf("req-%04d", i) // numbered, of one size
	}
	return out
}
