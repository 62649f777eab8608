package synth

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/services/vendorgraph/internal/importer"
)

func TestDeterministicAndValid(t *testing.T) {
	p := Params{Vendors: 20, Entities: 2000, Relationships: 9000, Seed: 7}
	var a, b bytes.Buffer
	require.NoError(t, Write(&a, p))
	require.NoError(t, Write(&b, p))
	require.Equal(t, sha256.Sum256(a.Bytes()), sha256.Sum256(b.Bytes()), "same parameters, same bytes")

	batch := importer.NewBatch(1 << 20)
	sc := bufio.NewScanner(&a)
	n := int64(0)
	for sc.Scan() {
		n++
		batch.Add(n, sc.Text())
	}
	batch.ReportDangling(nil)
	problems, _ := batch.Problems()
	require.Empty(t, problems)
	require.Len(t, batch.Entities, p.Entities)
	require.Len(t, batch.Relationships, p.Relationships)
	vendors := 0
	for _, e := range batch.Entities {
		if e.IsVendor {
			vendors++
		}
	}
	require.Equal(t, p.Vendors, vendors)
}

func TestVendorNamesUnique(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 8000; i++ {
		s := VendorStem(i)
		require.False(t, seen[s], "stem %q repeats at %d", s, i)
		seen[s] = true
	}
}
