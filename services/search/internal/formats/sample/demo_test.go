package sample

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The committed demo files are exactly what this package writes, so they
// stay reproducible; BMCIS_UPDATE_DEMO=1 rewrites them.
func TestDemoFilesAreGenerated(t *testing.T) {
	root := filepath.Join("..", "..", "..", "demo", "docs")
	update := os.Getenv("BMCIS_UPDATE_DEMO") == "1"
	for _, d := range Demo {
		t.Run(d.Path, func(t *testing.T) {
			want := Bytes(d.Format, d.Doc)
			p := filepath.Join(root, filepath.FromSlash(d.Path))
			if update {
				require.NoError(t, os.WriteFile(p, want, 0o644))
			}
			got, err := os.ReadFile(p)
			require.NoError(t, err)
			require.True(t, bytes.Equal(want, got), "%s is stale: run BMCIS_UPDATE_DEMO=1 go test ./internal/formats/sample", d.Path)
		})
	}
}
