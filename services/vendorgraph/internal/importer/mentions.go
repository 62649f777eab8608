package importer

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bmcis/knowledge/platform/mentions"
)

// Relinked is what re-linking mentions after an import did.
type Relinked struct {
	Chunks  int // chunks matched again
	Indexed int // chunks new since the last re-link added to the words index
	Time    time.Duration
}

// Relink re-links the mentions of the entities Write created or changed,
// inside tx (after Write): it takes the mention lock exclusive, so no chunk
// is written meanwhile, moves the graph version on, so every matcher built
// from the old names is rebuilt, and matches again only the chunks those
// names can appear in, found through the words index
// (mentions.RelinkEntities). An import that changed no entity does nothing.
func Relink(ctx context.Context, tx pgx.Tx, linker *mentions.Linker, c Counts) (Relinked, error) {
	var r Relinked
	if c.EntitiesCreated+c.EntitiesUpdated == 0 {
		return r, nil
	}
	start := time.Now()
	if err := mentions.LockExclusive(ctx, tx); err != nil {
		return r, err
	}
	if _, err := mentions.BumpGraphVersion(ctx, tx); err != nil {
		return r, err
	}
	rows, err := tx.Query(ctx, "SELECT id::text FROM import_changed")
	if err != nil {
		return r, fmt.Errorf("read changed entities: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return r, fmt.Errorf("read changed entities: %w", err)
	}
	m, _, err := linker.Matcher(ctx, tx)
	if err != nil {
		return r, err
	}
	st, err := mentions.RelinkEntities(ctx, tx, m, ids)
	r.Chunks, r.Indexed = st.Relinked, st.Indexed
	if err != nil {
		return r, fmt.Errorf("re-link mentions: %w", err)
	}
	r.Time = time.Since(start)
	return r, nil
}
