package snapshot

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/bmcis/knowledge/services/search/internal/analysis"
	"github.com/bmcis/knowledge/services/search/internal/binfmt"
	"github.com/bmcis/knowledge/services/search/internal/bm25"
	"github.com/bmcis/knowledge/services/search/internal/index"
)

// FormatVersion is the layout of the stream; bump it with any change to
// what Encode writes (index.Frozen.Encode, bm25.Frozen.Encode included).
const FormatVersion = 2 // 2: documents carry their access lists

const (
	magic    = "BMCISIX\n"
	endMagic = "END\n"
)

// Header is what a snapshot stream starts with.
type Header struct {
	FormatVersion int
	// Fingerprint is analysis.Fingerprint of the analyzer that indexed it.
	Fingerprint string
	// Generation and LastChange are the change-feed position the index had
	// applied: a replica starting from it catches up from there.
	Generation int64
	LastChange time.Time
	Documents  int
	Chunks     int
}

// ErrMismatch says a snapshot was made by code that analyses or encodes
// differently: it must not be used.
var ErrMismatch = errors.New("index snapshot does not match this replica")

// Encode writes a frozen index: the header, the index, an end marker.
func Encode(w io.Writer, f *index.Frozen, fingerprint string) error {
	bw := binfmt.NewWriter(w)
	bw.Raw([]byte(magic))
	h := Header{FormatVersion: FormatVersion, Fingerprint: fingerprint, Generation: f.Generation, LastChange: f.LastChange,
		Documents: f.Documents(), Chunks: f.Chunks()}
	bw.Uvarint(uint64(h.FormatVersion))
	bw.String(h.Fingerprint)
	bw.Varint(h.Generation)
	bw.Varint(h.LastChange.Unix())
	bw.Uvarint(uint64(h.LastChange.Nanosecond()))
	bw.Uvarint(uint64(h.Documents))
	bw.Uvarint(uint64(h.Chunks))
	f.Encode(bw)
	bw.Raw([]byte(endMagic))
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("encode index snapshot: %w", err)
	}
	return nil
}

// Decode reads a snapshot into a new index for analyzer an (whose
// fingerprint must be the snapshot's), BM25 parameters p and options o,
// positioned at the snapshot's generation. Any failure returns no index.
func Decode(r io.Reader, an *analysis.Analyzer, p bm25.Params, o index.Options) (*index.Index, Header, error) {
	br := binfmt.NewReader(r)
	var h Header
	m := make([]byte, len(magic))
	br.Raw(m)
	if br.Err() == nil && string(m) != magic {
		return nil, h, fmt.Errorf("%w: not an index snapshot", binfmt.ErrCorrupt)
	}
	h.FormatVersion = int(br.Uvarint())
	if br.Err() == nil && h.FormatVersion != FormatVersion {
		return nil, h, fmt.Errorf("%w: format version %d, this replica reads %d", ErrMismatch, h.FormatVersion, FormatVersion)
	}
	h.Fingerprint = br.String()
	if want := analysis.Fingerprint(an); br.Err() == nil && h.Fingerprint != want {
		return nil, h, fmt.Errorf("%w: analysis fingerprint %s, this replica's is %s", ErrMismatch, h.Fingerprint, want)
	}
	h.Generation = br.Varint()
	sec, nsec := br.Varint(), br.Uvarint()
	h.LastChange = time.Unix(sec, int64(nsec%uint64(time.Second)))
	h.Documents, h.Chunks = int(br.Uvarint()), int(br.Uvarint())
	if err := br.Err(); err != nil {
		return nil, h, fmt.Errorf("decode index snapshot header: %w", err)
	}
	ix, err := index.Decode(br, an, p, o)
	if err != nil {
		return nil, h, fmt.Errorf("decode index snapshot: %w", err)
	}
	end := make([]byte, len(endMagic))
	br.Raw(end)
	if err := br.Err(); err != nil || string(end) != endMagic {
		return nil, h, fmt.Errorf("decode index snapshot: %w: no end marker", binfmt.ErrCorrupt)
	}
	if st := ix.Stats(); st.Documents != h.Documents || st.Chunks != h.Chunks {
		return nil, h, fmt.Errorf("decode index snapshot: %w: %d documents and %d chunks, the header says %d and %d",
			binfmt.ErrCorrupt, st.Documents, st.Chunks, h.Documents, h.Chunks)
	}
	// Nothing may follow the end marker.
	if n := br.Rest(); n > 0 || br.Err() != nil {
		return nil, h, fmt.Errorf("decode index snapshot: %w: %d bytes after the end", binfmt.ErrCorrupt, n)
	}
	ix.SetPosition(h.Generation, h.LastChange)
	return ix, h, nil
}
