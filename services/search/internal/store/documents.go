package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bmcis/knowledge/platform/access"
)

// DocumentInfo is what is stored about a document besides its content:
// what an operator reads to see who may read it.
type DocumentInfo struct {
	ExternalID, Title, Category, Source, SourceFile string
	// Access is the normalised list; nil: everyone's.
	Access []string
	// AccessFromSource: the list is the source's default.
	AccessFromSource bool
	Chunks           int
	UpdatedAt        time.Time
}

// DocumentFilter selects documents; zero fields select everything.
type DocumentFilter struct {
	Source string
	// NoSource keeps only the documents of no source (source ''), which
	// an empty Source cannot say: it selects every source.
	NoSource bool
	// Category matches case-insensitively, as the search filter resolves it.
	Category string
	// Principal must be on the list; access.Everyone selects everyone's
	// documents (no list). Normalised by access.ParsePrincipal.
	Principal string
	IDPrefix  string
	// ReadableCategories, when not nil, are the only categories kept (a
	// key's category scope resolved as search resolves it; empty keeps
	// none).
	ReadableCategories []string
	// ReadableBy, when not nil, is an access set (access.ParseSet): only
	// the documents it may read are kept, by AccessAllows, the condition
	// the vector and evidence reads apply.
	ReadableBy []string
	// After: only ids after this one (the last of the previous page).
	After string
	// Limit bounds the rows (required).
	Limit int
}

const documentInfoColumns = `external_id, title, category, source, source_file, access, access_from_source, chunk_count, updated_at`

func scanDocumentInfo(r pgx.CollectableRow) (DocumentInfo, error) {
	var d DocumentInfo
	err := r.Scan(&d.ExternalID, &d.Title, &d.Category, &d.Source, &d.SourceFile, &d.Access, &d.AccessFromSource, &d.Chunks, &d.UpdatedAt)
	return d, err
}

// Documents lists documents by external id (the unique index's order, so
// a page is a range scan and the next one starts after its last id).
func (s *Store) Documents(ctx context.Context, f DocumentFilter) ([]DocumentInfo, error) {
	if f.Limit <= 0 {
		return nil, errors.New("list documents: no limit")
	}
	// A stored list never names everyone (access.ParseList makes it NULL),
	// so "everyone" selects the NULL lists and any other principal the
	// lists that hold it.
	everyone := f.Principal == access.Everyone
	rows, err := s.pool.Query(ctx, `SELECT `+documentInfoColumns+` FROM documents
		WHERE ($1 = '' OR source = $1)
		  AND ($2 = '' OR lower(category) = lower($2))
		  AND (NOT $3 OR access IS NULL)
		  AND ($4 = '' OR $3 OR access @> ARRAY[$4::text])
		  AND ($5 = '' OR starts_with(external_id, $5))
		  AND ($6 = '' OR external_id > $6)
		  AND ($8::text[] IS NULL OR category = ANY($8::text[]))
		  AND `+AccessAllows("access", "$9")+`
		  AND (NOT $10 OR source = '')
		ORDER BY external_id LIMIT $7`,
		f.Source, f.Category, everyone, f.Principal, f.IDPrefix, f.After, f.Limit, f.ReadableCategories, f.ReadableBy, f.NoSource)
	if err != nil {
		return nil, fmt.Errorf("list documents: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanDocumentInfo)
	if err != nil {
		return nil, fmt.Errorf("list documents: %w", err)
	}
	return out, nil
}

// DocumentByID returns one document; ErrNotFound when there is none.
func (s *Store) DocumentByID(ctx context.Context, externalID string) (DocumentInfo, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+documentInfoColumns+` FROM documents WHERE external_id = $1`, externalID)
	if err != nil {
		return DocumentInfo{}, fmt.Errorf("read document %q: %w", externalID, err)
	}
	d, err := pgx.CollectExactlyOneRow(rows, scanDocumentInfo)
	if errors.Is(err, pgx.ErrNoRows) {
		return DocumentInfo{}, ErrNotFound
	}
	if err != nil {
		return DocumentInfo{}, fmt.Errorf("read document %q: %w", externalID, err)
	}
	return d, nil
}
