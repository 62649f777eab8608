package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bmcis/knowledge/platform/mentions"
)

// DocumentRow is one document to store with all of its chunks.
type DocumentRow struct {
	ExternalID string
	SourceFile string
	Category   string
	Title      string
	// Source is the named source the document belongs to ("" for plain
	// ingestion). A document of one source is never overwritten by a write
	// naming another (ErrOtherSource).
	Source      string
	ContentHash []byte
	// UpdatedAt is when the document last changed; zero means now.
	UpdatedAt time.Time
	// Access is the document's access list, normalised by platform/access
	// (nil: everyone). AccessFromSource says it is the source's default,
	// which a later change of the default replaces.
	Access           []string
	AccessFromSource bool
	// Chunks are written in order; their ID, DocumentID and Total are
	// assigned by the write.
	Chunks []Chunk
}

// WriteResult says what WriteDocument did.
type WriteResult struct {
	// Written is false when the stored content hash was the same (no-op).
	Written bool
	// AccessChanged: the content was the same but the access list was
	// not; only the list was rewritten (no chunk, no vector).
	AccessChanged bool
	DocumentID    int64
	Generation    int64
}

const upsertDocument = `
INSERT INTO documents AS d (external_id, source_file, category, title, content_hash, chunk_count, updated_at, ingested_at, source,
    access, access_from_source)
VALUES ($1, $2, $3, $4, $5, $6, coalesce($7, now()), now(), $8, $9, $10)
ON CONFLICT (external_id) DO UPDATE SET
    source_file = EXCLUDED.source_file, category = EXCLUDED.category, title = EXCLUDED.title,
    content_hash = EXCLUDED.content_hash, chunk_count = EXCLUDED.chunk_count,
    updated_at = EXCLUDED.updated_at, ingested_at = now(),
    access = EXCLUDED.access, access_from_source = EXCLUDED.access_from_source
WHERE d.content_hash <> EXCLUDED.content_hash AND d.source = EXCLUDED.source
RETURNING id`

// ErrOtherSource is returned when a write names a document that belongs to
// another source (or to none while the write names one).
var ErrOtherSource = errors.New("the document belongs to another source")

const insertChunks = `
INSERT INTO chunks (document_id, category, chunk_index, total_chunks, context_header, text, token_count, content_hash, page, access)
SELECT $1, $2, u.i, $3, u.h, u.t, u.n, u.c, u.p, $10
FROM unnest($4::int[], $5::text[], $6::text[], $7::int[], $8::bytea[], $9::int[]) AS u(i, h, t, n, c, p)`

// bumpGeneration is the tail of every writing transaction: the lock makes
// generation order equal commit order (it is held until COMMIT).
const bumpGeneration = `UPDATE documents SET generation = nextval('search_generation') WHERE id = $1 RETURNING generation`

// WriteDocument stores a document and its chunks in one transaction: an
// unchanged content hash is a no-op; a changed document has its chunks
// replaced atomically. Chunks are written without embeddings; the
// embedding sweep fills them in.
func (s *Store) WriteDocument(ctx context.Context, d DocumentRow) (WriteResult, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return WriteResult{}, fmt.Errorf("write document: %w", err)
	}
	defer conn.Release()

	var updated any
	if !d.UpdatedAt.IsZero() {
		updated = d.UpdatedAt
	}
	// Round trip 1: begin and upsert the document row if its hash changed.
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(upsertDocument, d.ExternalID, d.SourceFile, d.Category, d.Title, d.ContentHash, len(d.Chunks), updated, d.Source,
		accessArg(d.Access), d.AccessFromSource)
	br := conn.SendBatch(ctx, b)
	_, err = br.Exec()
	var docID int64
	if err == nil {
		err = br.QueryRow().Scan(&docID)
	}
	closeErr := br.Close()
	if errors.Is(err, pgx.ErrNoRows) && closeErr == nil {
		// Unchanged, or owned by another source: the row says which.
		var owner string
		var stored []string
		var fromSource bool
		var id int64
		err = conn.QueryRow(ctx, `SELECT id, source, access, access_from_source FROM documents WHERE external_id = $1`,
			d.ExternalID).Scan(&id, &owner, &stored, &fromSource)
		rollback(conn)
		switch {
		case err != nil:
			return WriteResult{}, fmt.Errorf("write document %q: %w", d.ExternalID, err)
		case owner != d.Source:
			return WriteResult{}, fmt.Errorf("%w (%q)", ErrOtherSource, owner)
		case !slices.Equal(stored, d.Access) || fromSource != d.AccessFromSource:
			gen, err := s.setAccess(ctx, `d.id = $1`, []any{id}, d.Access, d.AccessFromSource)
			if err != nil {
				return WriteResult{}, fmt.Errorf("change access list of %q: %w", d.ExternalID, err)
			}
			return WriteResult{AccessChanged: true, DocumentID: id, Generation: gen}, nil
		}
		return WriteResult{}, nil
	}
	if err == nil {
		err = closeErr
	}
	if err != nil {
		rollback(conn)
		return WriteResult{}, fmt.Errorf("write document %q: %w", d.ExternalID, err)
	}

	// The chunks' mentions, found with the matcher of the graph as it is
	// now (an unchanged document costs none); the write inserts them only
	// if the graph has not moved on by then (else relinkDocument below).
	matcher, graphVersion, err := s.linker.MatcherWithin(ctx, conn, versionCheckEvery)
	if err != nil {
		rollback(conn)
		return WriteResult{}, fmt.Errorf("write document %q: %w", d.ExternalID, err)
	}
	var mIdx, mCount []int32
	var mEntity []string
	for _, c := range d.Chunks {
		for _, l := range matcher.Links([]mentions.ChunkText{{ID: int64(c.ChunkIndex), Text: c.ChunkText}}) {
			mIdx, mEntity, mCount = append(mIdx, int32(c.ChunkIndex)), append(mEntity, l.EntityID), append(mCount, int32(l.Count))
		}
	}

	// Round trip 2: replace the chunks and their mentions (under the
	// mention lock, shared: a re-link of the graph excludes chunk writers),
	// take the generation, announce, commit.
	n := len(d.Chunks)
	idx, tok, page := make([]int32, n), make([]int32, n), make([]int32, n)
	hdr, txt := make([]string, n), make([]string, n)
	hashes := make([][]byte, n)
	for i, c := range d.Chunks {
		idx[i], tok[i], hdr[i], txt[i], hashes[i], page[i] = int32(c.ChunkIndex), int32(c.ChunkTokenCount), c.ContextHeader, c.ChunkText, c.Hash, int32(c.Page)
	}
	b = &pgx.Batch{}
	b.Queue("SELECT pg_advisory_xact_lock_shared($1)", mentions.LockKey)
	b.Queue("DELETE FROM chunks WHERE document_id = $1", docID)
	b.Queue(insertChunks, docID, d.Category, n, idx, hdr, txt, tok, hashes, page, accessArg(d.Access))
	b.Queue(insertMentions, docID, mIdx, mEntity, mCount, graphVersion)
	b.Queue("SELECT pg_advisory_xact_lock($1)", feedLockKey)
	b.Queue(bumpGeneration, docID)
	b.Queue("SELECT pg_notify($1, $2)", Channel, "d")
	b.Queue("COMMIT")
	br = conn.SendBatch(ctx, b)
	var gen int64
	var linkedVersion int64
	for i := 0; i < 8 && err == nil; i++ {
		switch i {
		case 3:
			err = br.QueryRow().Scan(&linkedVersion)
		case 5:
			err = br.QueryRow().Scan(&gen)
		default:
			_, err = br.Exec()
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		rollback(conn)
		return WriteResult{}, fmt.Errorf("write chunks of %q: %w", d.ExternalID, err)
	}
	if linkedVersion != graphVersion {
		if err := s.relinkDocument(ctx, docID); err != nil {
			// The document is stored; only its mentions lag. The next
			// import touching these names, or a re-ingest, links them.
			return WriteResult{Written: true, DocumentID: docID, Generation: gen}, fmt.Errorf("link mentions of %q: %w", d.ExternalID, err)
		}
	}
	return WriteResult{Written: true, DocumentID: docID, Generation: gen}, nil
}

// accessArg is an access list as a query argument: NULL for everyone's.
func accessArg(list []string) any {
	if len(list) == 0 {
		return nil
	}
	return list
}

// setAccess gives the documents matching where (over documents d, with
// args) the access list list, in their rows, their chunks' and their queued
// vectors', and a new generation, so replicas reload them: one
// transaction, nothing re-embedded. It returns the highest generation
// taken (0: no document matched).
func (s *Store) setAccess(ctx context.Context, where string, args []any, list []string, fromSource bool) (int64, error) {
	var gen int64
	n := len(args)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `UPDATE documents d SET access = $`+strconv.Itoa(n+1)+`, access_from_source = $`+strconv.Itoa(n+2)+`
			WHERE `+where+` RETURNING d.id`, append(args, accessArg(list), fromSource)...)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil || len(ids) == 0 {
			return err
		}
		// Chunks first: their row locks make a concurrent Enqueue (which
		// copies chunks.access FOR SHARE) finish before the queue is updated.
		if _, err := tx.Exec(ctx, `UPDATE chunks SET access = $2 WHERE document_id = ANY($1)`, ids, accessArg(list)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE chunk_vector_queue q SET access = $2 FROM chunks c
			WHERE c.id = q.chunk_id AND c.document_id = ANY($1)`, ids, accessArg(list)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", feedLockKey); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `WITH g AS (UPDATE documents SET generation = nextval('search_generation')
			WHERE id = ANY($1) RETURNING generation) SELECT max(generation) FROM g`, ids).Scan(&gen); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "SELECT pg_notify($1, $2)", Channel, "d")
		return err
	})
	return gen, err
}

// SetSourceDefaultAccess makes list the default access list of source and
// gives it to the source's documents that hold the default (not a list of
// their own), without re-embedding. It returns how many documents changed
// and the generation their change took (0: none changed).
func (s *Store) SetSourceDefaultAccess(ctx context.Context, source string, list []string) (int64, int64, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE sources SET default_access = $2 WHERE name = $1`, source, accessArg(list))
	if err != nil {
		return 0, 0, fmt.Errorf("set default access of source %q: %w", source, err)
	}
	if tag.RowsAffected() == 0 {
		return 0, 0, fmt.Errorf("set default access of source %q: %w", source, ErrNotFound)
	}
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM documents WHERE source = $1 AND access_from_source
		AND access IS DISTINCT FROM $2`, source, accessArg(list)).Scan(&n); err != nil {
		return 0, 0, fmt.Errorf("set default access of source %q: %w", source, err)
	}
	if n == 0 {
		return 0, 0, nil
	}
	gen, err := s.setAccess(ctx, `d.source = $1 AND d.access_from_source AND d.access IS DISTINCT FROM $2`,
		[]any{source, accessArg(list)}, list, true)
	if err != nil {
		return 0, 0, fmt.Errorf("set default access of source %q: %w", source, err)
	}
	return n, gen, nil
}

// SourceDefaultAccess returns a source's default access list (nil:
// everyone, or no such source).
func (s *Store) SourceDefaultAccess(ctx context.Context, source string) ([]string, error) {
	var list []string
	err := s.pool.QueryRow(ctx, `SELECT default_access FROM sources WHERE name = $1`, source).Scan(&list)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read default access of source %q: %w", source, err)
	}
	return list, nil
}

// versionCheckEvery is how long a write trusts the graph version it last
// read: a bulk ingest reads it about once a second, not once a document.
const versionCheckEvery = time.Second

// insertMentions writes the links of the chunks just inserted, joined by
// chunk index, if the graph version is still the one they were matched
// with; it returns the version it saw.
const insertMentions = `
WITH state AS (SELECT graph_version FROM mention_state),
ins AS (
    INSERT INTO entity_mentions (entity_id, chunk_id, mention_count)
    SELECT u.e::uuid, c.id, u.n
    FROM unnest($2::int[], $3::text[], $4::int[]) AS u(i, e, n)
    JOIN chunks c ON c.document_id = $1 AND c.chunk_index = u.i
    WHERE (SELECT graph_version FROM state) = $5)
SELECT graph_version FROM state`

// relinkDocument links a document's chunks again, with the matcher of the
// graph as it is now: an import committed between matching and writing.
func (s *Store) relinkDocument(ctx context.Context, docID int64) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := mentions.LockShared(ctx, tx); err != nil {
			return err
		}
		m, _, err := s.linker.Matcher(ctx, tx)
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, "SELECT id FROM chunks WHERE document_id = $1", docID)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return err
		}
		if err := mentions.RelinkChunks(ctx, tx, m, ids); err != nil {
			return err
		}
		// Replicas may have kept these chunks' (missing) mentions under the
		// current graph version: the notification makes them read again.
		_, err = tx.Exec(ctx, "SELECT pg_notify($1, 'relink')", mentions.GraphChannel)
		return err
	})
}

// DeleteResult says what DeleteDocument removed.
type DeleteResult struct {
	DocumentID int64
	Chunks     int
	Generation int64
}

// DeleteDocument removes a document, its chunks and their mentions, and leaves a tombstone
// for replicas. It returns ErrNotFound when no such document exists.
func (s *Store) DeleteDocument(ctx context.Context, externalID string) (DeleteResult, error) {
	var res DeleteResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The chunks' mentions go with them (ON DELETE CASCADE); the lock
		// keeps a concurrent re-link from linking a chunk being deleted.
		if err := mentions.LockShared(ctx, tx); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `DELETE FROM documents WHERE external_id = $1 RETURNING id, chunk_count`, externalID).Scan(&res.DocumentID, &res.Chunks)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", feedLockKey); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `INSERT INTO document_tombstones (document_id, external_id, generation)
			VALUES ($1, $2, nextval('search_generation'))
			ON CONFLICT (document_id) DO UPDATE SET generation = EXCLUDED.generation, deleted_at = now()
			RETURNING generation`, res.DocumentID, externalID).Scan(&res.Generation); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "SELECT pg_notify($1, $2)", Channel, "d")
		return err
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		err = fmt.Errorf("delete document %q: %w", externalID, err)
	}
	return res, err
}
