package readscope

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCategories(t *testing.T) {
	ctx := context.Background()
	require.Nil(t, Categories(ctx))
	require.Nil(t, Categories(With(ctx, nil)), "no categories: unscoped")
	require.Nil(t, Categories(With(ctx, []string{})))
	require.Equal(t, []string{"hr", "security"}, Categories(With(ctx, []string{"hr", "security"})))
}
