package server

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"path"
	"strings"
	"unicode"

	"golang.org/x/sync/semaphore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/access"
	"github.com/bmcis/knowledge/platform/docformat"
	"github.com/bmcis/knowledge/platform/grpcserver"
	"github.com/bmcis/knowledge/platform/sourcename"
	"github.com/bmcis/knowledge/services/search/internal/ingest"
	"github.com/bmcis/knowledge/services/search/internal/store"
)

const maxSourceRoot = 4096

// ingestJob is one whole document for a worker, holding its share of the
// stream's content budget until written.
type ingestJob struct {
	doc    *searchv1.Document
	source string
	// access is the document's access list, normalised; fromSource: it is
	// the source's default.
	access     []string
	fromSource bool
	budget     *semaphore.Weighted
	held       int64
}

func (j ingestJob) release() {
	if j.held > 0 {
		j.budget.Release(j.held)
	}
}

// receiver reads an ingestion stream: the optional sync header, documents
// (reassembling those sent in parts), and kept ids of a sync. Content in
// flight (received, not yet written) is bounded by budget, so a stream of
// big documents holds about one maximum-size document at a time.
type receiver struct {
	s       *Server
	ctx     context.Context
	recv    func() (*searchv1.IngestDocumentsRequest, error)
	resp    *searchv1.IngestDocumentsResponse
	results chan<- ingestResult
	jobs    []chan ingestJob
	budget  *semaphore.Weighted

	sync *searchv1.SyncSource
	// scheduled: the stream is a run of a source the service syncs (its
	// row exists; a client may not sync it).
	scheduled bool
	// defaultAccess is what documents without an access list get: the
	// synced source's default (nil: everyone).
	defaultAccess []string
	// accessGen is the generation a change of the source's default took
	// (0: none), which the answer waits for like a write's.
	accessGen int64
	seen      map[string]struct{} // external ids (prefixed) sent or kept in a sync
	kept      int
	// keptFolders are the folders (prefixed ids without the trailing "/")
	// a sync client could not list; allKept: it could not list the root.
	keptFolders map[string]struct{}
	allKept     bool

	pending     *ingestJob // a document whose content is still arriving
	pendingSize int64
	pendingGot  int64
	pendingDrop bool // too large: parts are counted, not kept
}

// run receives until the client closes the stream; a protocol error is an
// InvalidArgument status, a stream error is returned as is.
func (rx *receiver) run() error {
	first := true
	for {
		req, err := rx.recv()
		if err == io.EOF {
			if rx.pending != nil {
				rx.pending.release()
				return grpcserver.InvalidArgument("content_part", "the stream ended after %d of the %d bytes of %q", rx.pendingGot, rx.pendingSize, rx.pending.doc.GetExternalId())
			}
			return nil
		}
		if err != nil {
			rx.releasePending()
			return err
		}
		if err := rx.handle(req, first); err != nil {
			rx.releasePending()
			return err
		}
		first = false
		if rx.ctx.Err() != nil {
			rx.releasePending()
			return nil // a write failed; the caller reports it
		}
	}
}

func (rx *receiver) releasePending() {
	if rx.pending != nil {
		rx.pending.release()
		rx.pending = nil
	}
}

func (rx *receiver) handle(req *searchv1.IngestDocumentsRequest, first bool) error {
	if sy := req.GetSync(); sy != nil {
		if !first {
			return grpcserver.InvalidArgument("sync", "only the first message of a stream may carry it")
		}
		if err := rx.startSync(sy); err != nil {
			return err
		}
	}
	if keep := req.GetKeepExternalIds(); len(keep) > 0 {
		if rx.sync == nil {
			return grpcserver.InvalidArgument("keep_external_ids", "only a sync stream may keep documents")
		}
		for _, k := range keep {
			rx.see(rx.syncID(strings.TrimSpace(k)))
			rx.kept++
		}
	}
	if folders := req.GetKeepFolders(); len(folders) > 0 {
		if rx.sync == nil {
			return grpcserver.InvalidArgument("keep_folders", "only a sync stream may keep folders")
		}
		for _, f := range folders {
			// The path as the client walked it must be clean. A folder is
			// the start of its documents' ids, which are trimmed at both
			// ends, so the key drops only its leading space ("notes /b.md"
			// keeps the space before its "/"); a name of spaces alone keeps
			// the whole source.
			f = strings.TrimRight(f, "/")
			if f == "" || f == "." {
				rx.allKept = true
				continue
			}
			if f != path.Clean(f) || path.IsAbs(f) || f == ".." || strings.HasPrefix(f, "../") {
				// Refused, so the stream ends and nothing is deleted.
				return grpcserver.InvalidArgument("keep_folders", "%q is not a clean folder path relative to the source (like \"a/b\")", f)
			}
			if key := strings.TrimLeftFunc(f, unicode.IsSpace); key != "" {
				rx.keptFolders[rx.syncID(key)] = struct{}{}
			} else {
				rx.allKept = true
			}
		}
	}
	if part := req.GetContentPart(); len(part) > 0 {
		if err := rx.addPart(part); err != nil {
			return err
		}
	}
	d := req.GetDocument()
	if d == nil {
		if req.GetSync() != nil || len(req.GetKeepExternalIds()) > 0 || len(req.GetKeepFolders()) > 0 || len(req.GetContentPart()) > 0 {
			return nil
		}
		d = &searchv1.Document{} // an empty message is an empty (failing) document
	}
	if rx.pending != nil {
		return grpcserver.InvalidArgument("document", "a document arrived before the last %d bytes of %q", rx.pendingSize-rx.pendingGot, rx.pending.doc.GetExternalId())
	}
	rx.resp.DocumentsReceived++
	id := strings.TrimSpace(d.GetExternalId())
	if id == "" {
		id = strings.TrimSpace(d.GetSourceFile())
	}
	j := ingestJob{doc: d, budget: rx.budget}
	// An access entry of an unknown form ends the stream here, before the
	// document is queued: it is never stored with a list it did not mean.
	if entries := d.GetAccess(); len(entries) > 0 {
		list, err := access.ParseList(entries)
		if err != nil {
			return grpcserver.InvalidArgument("document.access", "document %q (%s): %v", id, d.GetSourceFile(), err)
		}
		j.access = list
	} else {
		j.access, j.fromSource = rx.defaultAccess, rx.sync != nil
	}
	unknown := false
	if rx.sync != nil && d.GetFormatName() == "" && d.GetFormat() == searchv1.ContentFormat_CONTENT_FORMAT_UNSPECIFIED {
		// Files of a source (an upload does not know the formats) are
		// read by their names, as bmcisctl does.
		if f, ok := docformat.ForPath(d.GetSourceFile()); ok && !f.Container() {
			d.FormatName = f.Name
		} else {
			unknown = true
		}
	}
	if rx.sync != nil && id != "" {
		d.ExternalId = rx.syncID(id)
		rx.see(d.ExternalId)
		j.source = rx.sync.GetName()
	}
	size := max(d.GetContentSize(), int64(len(d.GetContent())))
	limit := int64(rx.s.cfg.MaxDocumentBytes)
	if size > limit || unknown {
		// Refused before its bytes arrive; the parts still to come are skipped.
		reason := fmt.Sprintf("too large: %d bytes (limit %d, BMCIS_SEARCH_MAX_DOCUMENT_BYTES)", size, limit)
		if unknown {
			reason = "not a file of a known format (" + strings.Join(docformat.Extensions(), ", ") + ")"
		}
		rx.results <- ingestResult{failure: &ingest.Failure{ExternalID: d.GetExternalId(), SourceFile: d.GetSourceFile(), Reason: reason}}
		if d.GetContentSize() > int64(len(d.GetContent())) {
			rx.pending, rx.pendingSize, rx.pendingGot, rx.pendingDrop = &j, d.GetContentSize(), int64(len(d.GetContent())), true
		}
		d.Content = nil
		return nil
	}
	j.held = max(size, 1)
	if err := rx.budget.Acquire(rx.ctx, j.held); err != nil {
		return nil // the stream is ending; the caller reports why
	}
	if d.GetContentSize() > int64(len(d.GetContent())) {
		buf := make([]byte, len(d.GetContent()), d.GetContentSize())
		copy(buf, d.GetContent())
		d.Content = buf
		rx.pending, rx.pendingSize, rx.pendingGot, rx.pendingDrop = &j, d.GetContentSize(), int64(len(buf)), false
		return nil
	}
	rx.dispatch(j)
	return nil
}

// addPart appends the next part of the pending document's content.
func (rx *receiver) addPart(part []byte) error {
	p := rx.pending
	if p == nil {
		return grpcserver.InvalidArgument("content_part", "no document is waiting for content (set content_size on the document first)")
	}
	if rx.pendingGot+int64(len(part)) > rx.pendingSize {
		return grpcserver.InvalidArgument("content_part", "more content than the %d bytes content_size says for %q", rx.pendingSize, p.doc.GetExternalId())
	}
	rx.pendingGot += int64(len(part))
	if !rx.pendingDrop {
		p.doc.Content = append(p.doc.Content, part...)
	}
	if rx.pendingGot == rx.pendingSize {
		rx.pending = nil
		if !rx.pendingDrop {
			rx.dispatch(*p)
		}
	}
	return nil
}

// dispatch queues a whole document; documents with the same id go to the
// same worker, so they keep their order.
func (rx *receiver) dispatch(j ingestJob) {
	h := fnv.New32a()
	key := strings.TrimSpace(j.doc.GetExternalId())
	if key == "" {
		key = strings.TrimSpace(j.doc.GetSourceFile())
	}
	_, _ = h.Write([]byte(key))
	select {
	case rx.jobs[h.Sum32()%uint32(len(rx.jobs))] <- j:
	case <-rx.ctx.Done():
		j.release()
	}
}

// startSync validates the sync header and records the source.
func (rx *receiver) startSync(sy *searchv1.SyncSource) error {
	name := sy.GetName()
	if !sourcename.Valid(name) {
		return grpcserver.InvalidArgument("sync.name", "%q is not a source name (%s)", name, sourcename.Rule)
	}
	if len(sy.GetRoot()) > maxSourceRoot {
		return grpcserver.InvalidArgument("sync.root", "longer than %d bytes", maxSourceRoot)
	}
	var setDefault bool
	if da := sy.GetDefaultAccess(); da != nil {
		list, err := access.ParseList(da.GetPrincipals())
		if err != nil {
			return grpcserver.InvalidArgument("sync.default_access", "source %q: %v", name, err)
		}
		rx.defaultAccess, setDefault = list, true
	}
	dctx, cancel := rx.s.dbCtx(rx.ctx)
	defer cancel()
	if !rx.scheduled {
		err := rx.s.st.EnsureSource(dctx, name, sy.GetRoot())
		if errors.Is(err, store.ErrScheduledSource) {
			return status.Errorf(codes.FailedPrecondition, "source %q is synced by the service (bmcisctl sources sync %s); choose another name", name, name)
		}
		if err != nil {
			return dbError(rx.ctx, err)
		}
	}
	if setDefault {
		_, gen, err := rx.s.st.SetSourceDefaultAccess(dctx, name, rx.defaultAccess)
		if err != nil {
			return dbError(rx.ctx, err)
		}
		rx.accessGen = gen
	} else {
		list, err := rx.s.st.SourceDefaultAccess(dctx, name)
		if err != nil {
			return dbError(rx.ctx, err)
		}
		rx.defaultAccess = list
	}
	rx.sync = sy
	rx.seen = map[string]struct{}{}
	rx.keptFolders = map[string]struct{}{}
	return nil
}

// underKeptFolder reports whether the stored (prefixed) id lies in a folder
// the client could not list: a mirror must not delete it.
func (rx *receiver) underKeptFolder(id string) bool {
	if rx.allKept {
		return true
	}
	for i := strings.LastIndexByte(id, '/'); i > 0; i = strings.LastIndexByte(id[:i], '/') {
		if _, ok := rx.keptFolders[id[:i]]; ok {
			return true
		}
	}
	return false
}

// see notes a synced id as sent or kept, so the mirror keeps its document.
// PostgreSQL text holds no NUL, so no stored document has such an id
// (ingestion refuses it, platform/docid): it is left out, and the mirror's
// query never fails on it after the stream's writes committed.
func (rx *receiver) see(id string) {
	if !strings.ContainsRune(id, 0) {
		rx.seen[id] = struct{}{}
	}
}

// syncID is the stored external id of a synced document: the source name
// is its namespace.
func (rx *receiver) syncID(id string) string { return rx.sync.GetName() + ":" + id }
