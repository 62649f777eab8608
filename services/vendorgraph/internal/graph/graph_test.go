package graph

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStrengthIsNoisyOr(t *testing.T) {
	v, a, b, c := UUID{1}, UUID{2}, UUID{3}, UUID{4}
	s := strengthFromEdges(v, []Edge{
		{Source: v, Target: a, Confidence: 0.5},
		{Source: a, Target: v, Confidence: 0.5}, // either direction counts
		{Source: v, Target: b, Confidence: 0.9},
		{Source: a, Target: c, Confidence: 1}, // not touching the vendor
	})
	require.InDelta(t, 0.75, s[a], 1e-12)
	require.InDelta(t, 0.9, s[b], 1e-12)
	_, ok := s[c]
	require.False(t, ok)
}

func TestRankOrdersByRelevanceThenNameThenID(t *testing.T) {
	v := UUID{0}
	n := &Neighbourhood{
		Nodes: []Node{
			{ID: UUID{3}, Name: "b", Relevance: 0.5},
			{ID: UUID{2}, Name: "a", Relevance: 0.5},
			{ID: UUID{1}, Name: "z", Relevance: 0.9},
			{ID: UUID{4}, Name: "a", Relevance: 0.5},
		},
		Edges: []Edge{
			{ID: UUID{9}, Source: UUID{2}, Target: UUID{3}, Confidence: 1}, // min(0.5, 0.5)
			{ID: UUID{8}, Source: v, Target: UUID{1}, Confidence: 0.8},     // min(1, 0.9) × 0.8
			{ID: UUID{7}, Source: v, Target: UUID{2}, Confidence: 1},       // 0.5
		},
	}
	rank(n, v)
	var names []UUID
	for _, nd := range n.Nodes {
		names = append(names, nd.ID)
	}
	require.Equal(t, []UUID{{1}, {2}, {4}, {3}}, names)
	require.Equal(t, UUID{8}, n.Edges[0].ID)
	require.InDelta(t, 0.72, n.Edges[0].Score, 1e-12)
	require.Equal(t, []UUID{{7}, {9}}, []UUID{n.Edges[1].ID, n.Edges[2].ID}, "equal scores: by id")
}

func TestFloatReadsBackAsWritten(t *testing.T) {
	for _, f := range []float64{0.95, 0.1, 1, 0, 0.333} {
		require.Equal(t, f, Float(float32(f)))
	}
}
