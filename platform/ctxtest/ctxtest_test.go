package ctxtest_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/ctxtest"
)

func TestCancelAfter(t *testing.T) {
	tests := []struct {
		name     string
		cancelAt int
		want     []error
	}{
		{"at once", 0, []error{context.Canceled, context.Canceled}},
		{"after two checks", 2, []error{nil, nil, context.Canceled, context.Canceled}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := &ctxtest.CancelAfter{Context: t.Context(), CancelAt: tc.cancelAt}
			for i, want := range tc.want {
				require.Equal(t, want, ctx.Err(), "check %d", i+1)
			}
			require.Equal(t, len(tc.want), ctx.Checks)
		})
	}
}
