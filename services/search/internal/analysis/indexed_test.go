package analysis

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestIndexedTermsWeightTheHeader(t *testing.T) {
	a := NewEnglish()
	got := IndexedTerms(a, "Vitamin D", "Deficiency in winter")
	count := map[string]int{}
	for _, term := range got {
		count[term]++
	}
	require.Equal(t, HeaderWeight, count["vitamin"], "header terms count HeaderWeight times")
	require.Equal(t, HeaderWeight, count["d"])
	require.Equal(t, 1, count["winter"], "text terms once")
	require.Equal(t, a.Terms("Deficiency in winter"), IndexedTerms(a, "", "Deficiency in winter"))
}
