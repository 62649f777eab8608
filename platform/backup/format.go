// Package backup writes and restores one file holding every table of the
// service schemas (search, vendorgraph, auth), read in one snapshot per
// database, and restores it into an empty stack at the same schema version,
// all or nothing. `bmcisctl backup` and `bmcisctl restore` drive it;
// docs/BACKUP.md is the operator's side.
//
// The file is gzip over this sequence (integers big-endian):
//
//	magic            "BMCIS-BACKUP\n"
//	frame            header (JSON, Header)
//	per table, in the header's order:
//	  frame          segment (JSON, segment: the table and its columns)
//	  frames         the table's COPY TEXT output, in pieces of at most maxPiece bytes
//	  frame          empty: the table ends
//	frame            trailer (JSON, trailer: SHA-256 of every byte above)
//
// where a frame is a uint32 length and that many bytes. The tables are
// found in the catalog, not listed here, so a table a later migration adds
// is in the file without a change to this package.
package backup

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"slices"
	"time"
)

// Magic opens every backup file (after gunzip).
const Magic = "BMCIS-BACKUP\n"

// FormatVersion is the layout this package writes and the newest it reads.
const FormatVersion = 1

// Limits on a frame's length, so a damaged length is refused rather than
// allocated.
const (
	maxPiece     = 1 << 20
	maxJSONFrame = 64 << 20
)

// Header describes the file: written first, so a reader knows what follows
// and whether it can read it before reading on.
type Header struct {
	Format    int       `json:"format"`
	Release   string    `json:"release"`
	CreatedAt time.Time `json:"created_at"`
	// Databases are the snapshots taken: one per database the schemas sat
	// in (one, unless the services run on separate databases).
	Databases []SnapshotInfo `json:"databases"`
	// Tables in restore order: a table comes after every table it
	// references.
	Tables []Table `json:"tables"`
	// Sequences with their values, read inside each snapshot.
	Sequences []Sequence `json:"sequences"`
}

// SnapshotInfo is one database's snapshot.
type SnapshotInfo struct {
	Schemas []string `json:"schemas"`
	// SchemaVersion is the database's migration version; a restore target
	// must be at the same one.
	SchemaVersion int64 `json:"schema_version"`
}

// Table is one table of the file.
type Table struct {
	Schema  string   `json:"schema"`
	Name    string   `json:"name"`
	Columns []string `json:"columns"`
	Rows    int64    `json:"rows"`
}

// QualifiedName is schema.name.
func (t Table) QualifiedName() string { return t.Schema + "." + t.Name }

// Sequence is one sequence's state.
type Sequence struct {
	Schema    string `json:"schema"`
	Name      string `json:"name"`
	LastValue int64  `json:"last_value"`
	IsCalled  bool   `json:"is_called"`
}

// SchemaVersion returns the migration version the file records for schema.
func (h *Header) SchemaVersion(schema string) (int64, bool) {
	for _, d := range h.Databases {
		for _, s := range d.Schemas {
			if s == schema {
				return d.SchemaVersion, true
			}
		}
	}
	return 0, false
}

// Rows is the number of rows in the file.
func (h *Header) Rows() int64 {
	var n int64
	for _, t := range h.Tables {
		n += t.Rows
	}
	return n
}

// segment opens a table's data.
type segment struct {
	Schema  string   `json:"schema"`
	Name    string   `json:"name"`
	Columns []string `json:"columns"`
}

// trailer closes the file.
type trailer struct {
	SHA256 string `json:"sha256"`
}

// ErrDamaged is wrapped by every error about a file that is not a whole,
// intact backup: truncated, altered, or not a backup at all.
var ErrDamaged = errors.New("damaged backup file")

// ErrNewerFormat is wrapped when the file's format is newer than this
// release reads.
var ErrNewerFormat = errors.New("backup made by a newer release")

func damaged(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrDamaged, fmt.Sprintf(format, args...))
}

// encoder writes frames, hashing everything it writes.
type encoder struct {
	w   *bufio.Writer
	sum hash.Hash
	out io.Writer // w and sum
}

func newEncoder(w io.Writer) *encoder {
	e := &encoder{w: bufio.NewWriterSize(w, 256<<10), sum: sha256.New()}
	e.out = io.MultiWriter(e.w, e.sum)
	return e
}

func (e *encoder) frame(b []byte) error {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(b)))
	if _, err := e.out.Write(n[:]); err != nil {
		return err
	}
	_, err := e.out.Write(b)
	return err
}

func (e *encoder) jsonFrame(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return e.frame(b)
}

// finish writes the trailer, which the checksum does not cover, and flushes.
func (e *encoder) finish() error {
	b, err := json.Marshal(trailer{SHA256: hex.EncodeToString(e.sum.Sum(nil))})
	if err != nil {
		return err
	}
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(b)))
	if _, err := e.w.Write(n[:]); err != nil {
		return err
	}
	if _, err := e.w.Write(b); err != nil {
		return err
	}
	return e.w.Flush()
}

// pieceWriter cuts a table's COPY output into frames and counts its rows
// (COPY TEXT ends every row with one newline and escapes those inside values).
type pieceWriter struct {
	e    *encoder
	buf  []byte
	rows int64
}

func (p *pieceWriter) Write(b []byte) (int, error) {
	p.rows += int64(bytes.Count(b, []byte{'\n'}))
	n := len(b)
	for len(b) > 0 {
		k := min(maxPiece-len(p.buf), len(b))
		p.buf = append(p.buf, b[:k]...)
		b = b[k:]
		if len(p.buf) == maxPiece {
			if err := p.flush(); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

func (p *pieceWriter) flush() error {
	if len(p.buf) == 0 {
		return nil
	}
	err := p.e.frame(p.buf)
	p.buf = p.buf[:0]
	return err
}

// decoder reads frames, hashing everything until the trailer.
type decoder struct {
	r   io.Reader
	sum hash.Hash
}

func newDecoder(r io.Reader) *decoder {
	sum := sha256.New()
	return &decoder{r: io.TeeReader(bufio.NewReaderSize(r, 256<<10), sum), sum: sum}
}

func (d *decoder) readFull(b []byte) error {
	if _, err := io.ReadFull(d.r, b); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return damaged("the file ends early (truncated)")
		}
		return damaged("%v", err)
	}
	return nil
}

func (d *decoder) frameLen(limit int) (int, error) {
	var n [4]byte
	if err := d.readFull(n[:]); err != nil {
		return 0, err
	}
	l := binary.BigEndian.Uint32(n[:])
	if int64(l) > int64(limit) {
		return 0, damaged("a frame of %d bytes, more than the %d allowed", l, limit)
	}
	return int(l), nil
}

func (d *decoder) jsonFrame(v any) error {
	l, err := d.frameLen(maxJSONFrame)
	if err != nil {
		return err
	}
	b := make([]byte, l)
	if err := d.readFull(b); err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return damaged("unreadable description: %v", err)
	}
	return nil
}

// readHeader reads the magic and the header, refusing a format newer than
// FormatVersion.
func (d *decoder) readHeader() (*Header, error) {
	m := make([]byte, len(Magic))
	if err := d.readFull(m); err != nil {
		return nil, err
	}
	if string(m) != Magic {
		return nil, damaged("not a BMCIS Knowledge backup (no %q at the start)", Magic[:len(Magic)-1])
	}
	var h Header
	if err := d.jsonFrame(&h); err != nil {
		return nil, err
	}
	if h.Format > FormatVersion {
		return nil, fmt.Errorf("%w: file format %d (release %s); this release reads format %d at most: restore with that release or a newer one",
			ErrNewerFormat, h.Format, h.Release, FormatVersion)
	}
	if h.Format < 1 {
		return nil, damaged("format version %d", h.Format)
	}
	return &h, nil
}

// readSegment reads table t's segment, handing its COPY data to fn as an
// io.Reader (fn must read it to the end), and checks its row count.
func (d *decoder) readSegment(t Table, fn func(io.Reader) error) error {
	var s segment
	if err := d.jsonFrame(&s); err != nil {
		return err
	}
	if s.Schema != t.Schema || s.Name != t.Name || !slices.Equal(s.Columns, t.Columns) {
		return damaged("found table %s.%s where the header puts %s", s.Schema, s.Name, t.QualifiedName())
	}
	pr := &pieceReader{d: d}
	if err := fn(pr); err != nil {
		if pr.err != nil {
			return pr.err // the file's fault, whatever fn made of it
		}
		return err
	}
	if !pr.done {
		// fn stopped early; read on to the segment's end.
		if _, err := io.Copy(io.Discard, pr); err != nil {
			return err
		}
	}
	if pr.err != nil {
		return pr.err
	}
	if pr.rows != t.Rows {
		return damaged("table %s holds %d rows, the header says %d", t.QualifiedName(), pr.rows, t.Rows)
	}
	return nil
}

// readTrailer checks the checksum of everything read so far, then that the
// file ends there.
func (d *decoder) readTrailer() error {
	got := hex.EncodeToString(d.sum.Sum(nil))
	var tr trailer
	if err := d.jsonFrame(&tr); err != nil {
		return err
	}
	if tr.SHA256 != got {
		return damaged("checksum mismatch (the file was altered or damaged)")
	}
	var b [1]byte
	if n, err := d.r.Read(b[:]); n > 0 || (err != nil && !errors.Is(err, io.EOF)) {
		if err != nil && !errors.Is(err, io.EOF) {
			return damaged("%v", err)
		}
		return damaged("data after the end of the backup")
	}
	return nil
}

// pieceReader reads one segment's pieces as one stream.
type pieceReader struct {
	d    *decoder
	left int
	rows int64
	done bool
	err  error
}

func (p *pieceReader) Read(b []byte) (int, error) {
	for p.left == 0 {
		if p.done {
			return 0, io.EOF
		}
		if p.err != nil {
			return 0, p.err
		}
		l, err := p.d.frameLen(maxPiece)
		if err != nil {
			p.err = err
			return 0, err
		}
		if l == 0 {
			p.done = true
			return 0, io.EOF
		}
		p.left = l
	}
	n, err := p.d.r.Read(b[:min(len(b), p.left)])
	p.left -= n
	p.rows += int64(bytes.Count(b[:n], []byte{'\n'}))
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			if p.left > 0 || n == 0 {
				p.err = damaged("the file ends early (truncated)")
				return n, p.err
			}
			return n, nil
		}
		p.err = damaged("%v", err)
		return n, p.err
	}
	return n, nil
}
