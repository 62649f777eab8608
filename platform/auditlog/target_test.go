package auditlog_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/auditlog"
)

func TestChunkTarget(t *testing.T) {
	for _, tc := range []struct {
		ids  []int64
		want string
	}{
		{nil, ""},
		{[]int64{368}, "kb://chunks/368"},
		{[]int64{371, 368, 9000000000}, "kb://chunks/371 kb://chunks/368 kb://chunks/9000000000"},
	} {
		require.Equal(t, tc.want, auditlog.ChunkTarget(tc.ids), "%v", tc.ids)
	}
}
