package tools_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/mcp-adapter/internal/render"
	"github.com/bmcis/knowledge/platform/auditlog"
)

// A get_chunks entry's target and a resource read's name a chunk the same
// way, so one search of the trail finds both (docs/AUDIT.md).
func TestChunkTargetIsTheResourceURI(t *testing.T) {
	require.Equal(t, render.ChunkURIPrefix, auditlog.ChunkURIPrefix)
}
