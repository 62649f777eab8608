package store

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"time"

	"github.com/jackc/pgx/v5"
)

// SnapshotPartBytes is the size of one stored part of an index snapshot.
const SnapshotPartBytes = 4 << 20

// Snapshot describes a stored index snapshot (search_index_snapshots).
type Snapshot struct {
	ID            int64
	FormatVersion int
	Fingerprint   string
	Generation    int64
	LastChange    time.Time
	Documents     int64
	Chunks        int64
	Parts         int
	Bytes         int64
	// CRC32C is the Castagnoli CRC of the whole stream, checked on read.
	CRC32C      uint32
	CompletedAt time.Time
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Snapshots lists the completed snapshots, newest generation first.
func (s *Store) Snapshots(ctx context.Context) ([]Snapshot, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, format_version, fingerprint, generation, last_change, documents, chunks, parts, bytes, crc32c, completed_at
		FROM search_index_snapshots WHERE completed_at IS NOT NULL ORDER BY generation DESC, id DESC`)
	if err != nil {
		return nil, fmt.Errorf("list index snapshots: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Snapshot, error) {
		var m Snapshot
		var crc int64
		err := r.Scan(&m.ID, &m.FormatVersion, &m.Fingerprint, &m.Generation, &m.LastChange, &m.Documents, &m.Chunks, &m.Parts, &m.Bytes, &crc, &m.CompletedAt)
		m.CRC32C = uint32(crc)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("list index snapshots: %w", err)
	}
	return out, nil
}

// ErrSnapshotIncomplete says a snapshot's stored parts do not add up to
// what its row promises (deleted meanwhile, or damaged).
var ErrSnapshotIncomplete = errors.New("index snapshot parts missing or damaged")

// ReadSnapshot streams snapshot m's parts to read, in one repeatable-read
// transaction (a newer snapshot deleting this one meanwhile does not cut
// the stream). The next part is fetched while read consumes the current
// one. It fails with ErrSnapshotIncomplete when parts or bytes are missing
// or their checksum differs; read's result must then be discarded.
func (s *Store) ReadSnapshot(ctx context.Context, m Snapshot, read func(io.Reader) error) error {
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		parts := make(chan []byte, 1)
		fetchErr := make(chan error, 1)
		fctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			defer close(parts)
			for seq := 0; seq < m.Parts; seq++ {
				var b []byte
				if err := tx.QueryRow(fctx, `SELECT data FROM search_index_snapshot_parts WHERE snapshot_id = $1 AND seq = $2`, m.ID, seq).Scan(&b); err != nil {
					if fctx.Err() != nil {
						return // the reader is done
					}
					if errors.Is(err, pgx.ErrNoRows) {
						err = fmt.Errorf("%w: part %d of snapshot %d", ErrSnapshotIncomplete, seq, m.ID)
					}
					fetchErr <- err
					return
				}
				select {
				case parts <- b:
				case <-fctx.Done():
					return
				}
			}
		}()
		pr := &partReader{parts: parts}
		err := read(pr)
		cancel()
		for range parts { // let the fetcher end before the transaction does
		}
		select {
		case ferr := <-fetchErr:
			return ferr // the stream was cut: read's error follows from it
		default:
		}
		if err != nil {
			return err
		}
		if pr.n != m.Bytes {
			return fmt.Errorf("%w: read %d of %d bytes of snapshot %d", ErrSnapshotIncomplete, pr.n, m.Bytes, m.ID)
		}
		if pr.crc != m.CRC32C {
			return fmt.Errorf("%w: checksum of snapshot %d differs", ErrSnapshotIncomplete, m.ID)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read index snapshot %d: %w", m.ID, err)
	}
	return nil
}

type partReader struct {
	parts <-chan []byte
	cur   []byte
	n     int64
	crc   uint32
}

func (r *partReader) Read(p []byte) (int, error) {
	for len(r.cur) == 0 {
		b, ok := <-r.parts
		if !ok {
			return 0, io.EOF
		}
		r.cur = b
		r.crc = crc32.Update(r.crc, castagnoli, b)
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	r.n += int64(n)
	return n, nil
}

// ErrSnapshotBusy says another replica is writing a snapshot.
var ErrSnapshotBusy = errors.New("another replica is writing an index snapshot")

// WriteSnapshot stores a new snapshot described by m (its ID, parts and
// bytes are filled in) from what write produces, if this process gets the
// snapshot lock (else ErrSnapshotBusy). Parts are written as they fill; the
// snapshot counts once complete, and then every other snapshot of the same
// format and fingerprint, every incomplete one, and those of other
// fingerprints older than keepOther are deleted.
func (s *Store) WriteSnapshot(ctx context.Context, m Snapshot, keepOther time.Duration, write func(io.Writer) error) (Snapshot, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return m, fmt.Errorf("write index snapshot: %w", err)
	}
	defer conn.Release()
	var locked bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", snapshotLockKey).Scan(&locked); err != nil {
		return m, fmt.Errorf("write index snapshot: %w", err)
	}
	if !locked {
		return m, ErrSnapshotBusy
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := conn.Exec(uctx, "SELECT pg_advisory_unlock($1)", snapshotLockKey); err != nil {
			// A session lock must not outlive the write: drop the connection.
			_ = conn.Conn().Close(uctx)
		}
	}()
	// Whatever is incomplete was left by a writer that died: the lock is ours.
	if _, err := conn.Exec(ctx, `DELETE FROM search_index_snapshots WHERE completed_at IS NULL`); err != nil {
		return m, fmt.Errorf("write index snapshot: %w", err)
	}
	if err := conn.QueryRow(ctx, `INSERT INTO search_index_snapshots (format_version, fingerprint, generation, last_change, documents, chunks)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`, m.FormatVersion, m.Fingerprint, m.Generation, m.LastChange, m.Documents, m.Chunks).Scan(&m.ID); err != nil {
		return m, fmt.Errorf("write index snapshot: %w", err)
	}
	pw := &partWriter{insert: func(seq int, b []byte) error {
		_, err := conn.Exec(ctx, `INSERT INTO search_index_snapshot_parts (snapshot_id, seq, data) VALUES ($1, $2, $3)`, m.ID, seq, b)
		return err
	}, buf: make([]byte, 0, SnapshotPartBytes)}
	err = write(pw)
	if err == nil {
		err = pw.flush()
	}
	if err == nil {
		m.Parts, m.Bytes, m.CRC32C = pw.seq, pw.n, pw.crc
		err = conn.QueryRow(ctx, `UPDATE search_index_snapshots SET parts = $2, bytes = $3, crc32c = $4, completed_at = now() WHERE id = $1 RETURNING completed_at`,
			m.ID, m.Parts, m.Bytes, int64(m.CRC32C)).Scan(&m.CompletedAt)
	}
	if err != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_, _ = conn.Exec(dctx, `DELETE FROM search_index_snapshots WHERE id = $1`, m.ID)
		cancel()
		return m, fmt.Errorf("write index snapshot: %w", err)
	}
	if _, err := conn.Exec(ctx, `DELETE FROM search_index_snapshots WHERE id <> $1 AND (completed_at IS NULL
		OR (format_version = $2 AND fingerprint = $3) OR created_at < now() - $4::interval)`,
		m.ID, m.FormatVersion, m.Fingerprint, fmt.Sprintf("%d seconds", int64(keepOther.Seconds()))); err != nil {
		return m, fmt.Errorf("delete old index snapshots: %w", err)
	}
	return m, nil
}

type partWriter struct {
	insert func(seq int, b []byte) error
	buf    []byte
	seq    int
	n      int64
	crc    uint32
}

func (w *partWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		k := copy(w.buf[len(w.buf):cap(w.buf)], p)
		w.buf = w.buf[:len(w.buf)+k]
		p, written = p[k:], written+k
		if len(w.buf) == cap(w.buf) {
			if err := w.flush(); err != nil {
				return written, err
			}
		}
	}
	return written, nil
}

func (w *partWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	if err := w.insert(w.seq, w.buf); err != nil {
		return fmt.Errorf("part %d: %w", w.seq, err)
	}
	w.seq++
	w.n += int64(len(w.buf))
	w.crc = crc32.Update(w.crc, castagnoli, w.buf)
	w.buf = w.buf[:0]
	return nil
}

// EachChunkText streams every stored chunk's id, header and text (a
// replica started from a snapshot fills its records' text this way: no
// analysis, one sequential read).
func (s *Store) EachChunkText(ctx context.Context, fn func(id int64, header, text string)) (int, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, context_header, text FROM chunks`)
	if err != nil {
		return 0, fmt.Errorf("read chunk texts: %w", err)
	}
	var id int64
	var header, text string
	n := 0
	_, err = pgx.ForEachRow(rows, []any{&id, &header, &text}, func() error {
		fn(id, header, text)
		n++
		return nil
	})
	if err != nil {
		return n, fmt.Errorf("read chunk texts: %w", err)
	}
	return n, nil
}
