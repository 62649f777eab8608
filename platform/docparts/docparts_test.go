package docparts

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
)

func TestSend(t *testing.T) {
	for _, tc := range []struct {
		name  string
		size  int
		parts int
	}{
		{"empty", 0, 1},
		{"one part", PartBytes, 1},
		{"two parts", PartBytes + 1, 2},
		{"five parts", 4*PartBytes + 7, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			content := bytes.Repeat([]byte{'x'}, tc.size)
			d := &searchv1.Document{ExternalId: "a.md", Content: content}
			var got []byte
			var msgs int
			require.NoError(t, Send(func(r *searchv1.IngestDocumentsRequest) error {
				msgs++
				if msgs == 1 {
					require.Equal(t, "a.md", r.GetDocument().GetExternalId())
					if tc.parts > 1 {
						require.EqualValues(t, tc.size, r.GetDocument().GetContentSize())
					}
					got = append(got, r.GetDocument().GetContent()...)
					return nil
				}
				require.Nil(t, r.GetDocument())
				require.LessOrEqual(t, len(r.GetContentPart()), PartBytes)
				got = append(got, r.GetContentPart()...)
				return nil
			}, d))
			require.Equal(t, tc.parts, msgs)
			require.True(t, bytes.Equal(content, got))
			require.Zero(t, d.GetContentSize(), "the document is restored")
			require.Len(t, d.GetContent(), tc.size)
		})
	}
}
