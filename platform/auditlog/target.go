package auditlog

import (
	"strconv"
	"strings"
)

// ChunkURIPrefix starts a chunk's kb:// URI, as the MCP adapter serves it
// as a resource and a resource read of it records its target.
const ChunkURIPrefix = "kb://chunks/"

// ChunkTarget is the target of a read that asked for chunks by id (MCP
// get_chunks, REST GET /v1/chunks): each one's kb:// URI, separated by
// spaces, in the order asked. The answer lists only the chunks found and
// readable, so the target is the one place an entry keeps what was asked
// for, spelled so that one search finds every kind of read of a chunk.
func ChunkTarget(ids []int64) string {
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(ChunkURIPrefix)
		b.WriteString(strconv.FormatInt(id, 10))
	}
	return b.String()
}
