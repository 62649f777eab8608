package mentions

import (
	"hash/fnv"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMatch(t *testing.T) {
	m, err := Build([]Name{
		{EntityID: "acme", Text: "Acme Corp", IsVendor: true},
		{EntityID: "acme", Text: "Acme Corporation", IsVendor: true},
		{EntityID: "cloud", Text: "Acme Cloud Platform"},
		{EntityID: "acmeword", Text: "Acme"},
		{EntityID: "stark", Text: "Stark Industries", IsVendor: true},
		{EntityID: "stark", Text: "SI", IsVendor: true},
		{EntityID: "target", Text: "Target", IsVendor: true},
		{EntityID: "lower", Text: "box", IsVendor: true},
		{EntityID: "att", Text: "AT&T", IsVendor: true},
	})
	require.NoError(t, err)
	for _, tc := range []struct {
		name, text string
		want       map[string]int
	}{
		{"case and punctuation folded", "ACME, corp. signed; acme-corp renewed", map[string]int{"acme": 2}},
		{"whitespace folded", "Acme\n\t Corp", map[string]int{"acme": 1}},
		{"alias", "Acme Corporation and Acme Corp", map[string]int{"acme": 2}},
		{"longest wins", "the Acme Cloud Platform runs", map[string]int{"cloud": 1}},
		{"shorter where the longer is absent", "Acme Cloud is new", map[string]int{"acmeword": 1}},
		{"word boundaries", "Acmesoft and Acme Corpus", map[string]int{"acmeword": 1}},
		{"adjacent mentions", "Acme Corp Acme Corp", map[string]int{"acme": 2}},
		{"ambiguous short alias exact case", "SI shipped; si and Si did not", map[string]int{"stark": 1}},
		{"common word needs the graph's case", "Target met its target", map[string]int{"target": 1}},
		{"lowercase common word never links", "a box of Box", nil},
		{"symbols fold to breaks", "AT T and AT&T", map[string]int{"att": 2}},
		{"nothing", "no names here", nil},
		{"empty", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := m.Match(tc.text)
			if len(tc.want) == 0 {
				require.Empty(t, got)
				return
			}
			require.Equal(t, tc.want, got)
		})
	}
}

func TestBearers(t *testing.T) {
	names := []Name{{EntityID: "v", Text: "Jane Doe"}, {EntityID: "w", Text: "jane doe"}}
	m, err := Build(names)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"v": 1, "w": 1}, m.Match("Jane Doe"), "a shared name links every bearer")

	for i := range MaxBearers {
		names = append(names, Name{EntityID: string(rune('a' + i)), Text: "Jane Doe"})
	}
	m, err = Build(names)
	require.NoError(t, err)
	require.Empty(t, m.Match("Jane Doe"), "a name borne by more than MaxBearers entities links none")
}

func TestAmbiguous(t *testing.T) {
	require.True(t, Ambiguous([]string{"si"}))
	require.True(t, Ambiguous([]string{"apple"}))
	require.False(t, Ambiguous([]string{"initech"}))
	require.False(t, Ambiguous([]string{"apple", "inc"}))
}

func TestEmptyMatcher(t *testing.T) {
	m, err := Build(nil)
	require.NoError(t, err)
	require.Nil(t, m.Match("Acme Corp"))
}

func TestTermsFoldAsTheMatcher(t *testing.T) {
	require.Equal(t, Terms("acme corp"), Terms("ACME-Corp, acme!"), "case, punctuation and repeats fold away")
	require.Len(t, Terms("Ärzte GmbH 12 ärzte"), 3)
	// The same hashes as FNV-1a of Words' output: the fast path folds alike.
	for _, text := range []string{"Straße ÉCOLE école 3M x²", "İstanbul ΣΊΣΥΦΟΣ", "a\u0301b"} {
		var want []int32
		for _, w := range Words(text) {
			h := fnv.New32a()
			_, _ = h.Write([]byte(w))
			want = append(want, int32(h.Sum32()))
		}
		slices.Sort(want)
		require.Equal(t, slices.Compact(want), Terms(text), text)
	}
	require.Empty(t, Terms(" -- "))
	flat, lo, hi := FlatTerms([]string{"a b", "", "b"})
	require.Len(t, flat, 3)
	require.Equal(t, []int32{1, 3, 3}, lo)
	require.Equal(t, []int32{2, 2, 3}, hi)
	require.NotNil(t, func() []int32 { f, _, _ := FlatTerms(nil); return f }(), "never NULL to SQL")
}
