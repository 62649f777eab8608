package importer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/limits"
)

// Relinked is what search did with the names an import changed.
type Relinked struct {
	Names   int   // entities whose names were sent
	Chunks  int64 // chunks search matched again
	Indexed int64 // chunks new since the last re-link search added to its words index
	Time    time.Duration
}

// syncBatchBytes bounds one message of the names stream, well under
// gRPC's default 4 MiB receive limit whatever the names' lengths.
const syncBatchBytes = 1 << 20

// SyncNames sends search the names and aliases of the entities Write
// created or changed, read inside tx (after Write, before it commits), in
// batches of one stream (SearchService.SyncEntityNames). Search keeps its
// own copy of the names and re-links, through its words index, only the
// chunks they can appear in; an error rolls the import back. An import
// that changed no entity sends nothing.
func SyncNames(ctx context.Context, tx pgx.Tx, search searchv1.SearchServiceClient, c Counts) (Relinked, error) {
	var r Relinked
	if c.EntitiesCreated+c.EntitiesUpdated == 0 {
		return r, nil
	}
	start := time.Now()
	stream, err := search.SyncEntityNames(ctx)
	if err != nil {
		return r, fmt.Errorf("send names to search: %w", err)
	}
	rows, err := tx.Query(ctx, `
		SELECT e.id::text, e.name, e.entity_type, e.is_vendor,
		       coalesce((SELECT array_agg(a.alias ORDER BY a.alias) FROM vendor_aliases a WHERE a.entity_id = e.id), '{}')
		FROM import_changed c JOIN entities e ON e.id = c.id ORDER BY e.id`)
	if err != nil {
		return r, fmt.Errorf("read changed names: %w", err)
	}
	defer rows.Close()
	batch := &searchv1.SyncEntityNamesRequest{}
	size := 0
	send := func() error {
		if len(batch.Names) == 0 {
			return nil
		}
		if err := stream.Send(batch); err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("send names to search: %w", err)
		}
		// io.EOF: search ended the stream early; CloseAndRecv has why.
		batch, size = &searchv1.SyncEntityNamesRequest{}, 0
		return nil
	}
	for rows.Next() {
		n := &searchv1.EntityName{}
		if err := rows.Scan(&n.EntityId, &n.Name, &n.EntityType, &n.IsVendor, &n.Aliases); err != nil {
			return r, fmt.Errorf("read changed names: %w", err)
		}
		if len(batch.Names) == limits.EntityNamesBatch.Max || size+proto.Size(n) > syncBatchBytes {
			if err := send(); err != nil {
				return r, err
			}
		}
		batch.Names = append(batch.Names, n)
		size += proto.Size(n)
		r.Names++
	}
	if err := rows.Err(); err != nil {
		return r, fmt.Errorf("read changed names: %w", err)
	}
	if err := send(); err != nil {
		return r, err
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return r, fmt.Errorf("search re-link: %w", err)
	}
	r.Chunks, r.Indexed, r.Time = resp.GetChunksRelinked(), resp.GetChunksIndexed(), time.Since(start)
	return r, nil
}
