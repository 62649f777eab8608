// Package upload serves the upload route (rest.UploadPath): one file, or a
// zip of files, streamed into the search service's IngestDocuments as a sync
// of a named source that adds and replaces and never deletes. The REST edge
// checks the route's access and answers its errors; this package checks the
// operator's credential with the service before it reads the body, bounds
// uploads in progress and unpacks zips safely.
package upload

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/bmcis/knowledge/gateway/internal/apierror"
	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/docid"
	"github.com/bmcis/knowledge/platform/docparts"
)

// Zip guards: an archive may not hold more entries than this, nor expand
// to more than maxZipExpansion times the upload limit in all.
const (
	maxZipEntries   = 10000
	maxZipExpansion = 4
)

// maxUploads bounds uploads in progress: each holds its body and one file
// in memory (up to twice BMCIS_GATEWAY_MAX_UPLOAD_BYTES), so two fit the
// gateway's memory limit with room for the rest.
const maxUploads = 2

// credentialCheckTimeout bounds the question that judges the operator's
// credential before the body is read.
const credentialCheckTimeout = 5 * time.Second

// WriteError answers an error in the gateway's one error shape (the REST
// edge's handler: rest.Edge.WriteError).
type WriteError func(w http.ResponseWriter, r *http.Request, err error)

// Handler serves the upload route.
type Handler struct {
	search     searchv1.SearchServiceClient
	maxBytes   int64 // BMCIS_GATEWAY_MAX_UPLOAD_BYTES
	writeError WriteError
	slots      chan struct{} // uploads in progress (maxUploads)
}

// New serves uploads into search; maxBytes is the upload limit, which also
// bounds each file of a zip.
func New(search searchv1.SearchServiceClient, maxBytes int64, writeError WriteError) *Handler {
	return &Handler{search: search, maxBytes: maxBytes, writeError: writeError, slots: make(chan struct{}, maxUploads)}
}

// InProgress is the number of uploads holding a slot.
func (h *Handler) InProgress() int { return len(h.slots) }

// uploadFile is one file of an upload.
type uploadFile struct {
	name string
	data []byte
}

// ServeHTTP streams the body (file=NAME in the query; NAME ending in .zip is
// unpacked) into IngestDocuments as a sync of source {name} that adds and
// replaces files and deletes nothing.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	fail := func(httpStatus int, c codes.Code, reason, msg string) {
		h.writeError(w, r, &runtime.HTTPStatusError{HTTPStatus: httpStatus, Err: apierror.New(c, reason, msg, nil).Err()})
	}
	// The service checks the credential of IngestDocuments only when the
	// stream ends, after the whole body: ask first, so a wrong credential
	// is refused at once and never holds a slot or the body in memory.
	if err := h.verifyIngestCredential(ctx); err != nil {
		h.writeError(w, r, err)
		return
	}
	select {
	case h.slots <- struct{}{}:
		defer func() { <-h.slots }()
	default:
		h.writeError(w, r, apierror.New(codes.ResourceExhausted, "UPLOAD_BUSY",
			"two uploads are already in progress; retry shortly", nil, apierror.RetryInfo(2)).Err())
		return
	}
	source := r.PathValue("name")
	file := r.URL.Query().Get("file")
	if file == "" {
		fail(http.StatusBadRequest, codes.InvalidArgument, "BAD_UPLOAD", "give the file's name in ?file= (its extension picks the format; .zip is unpacked)")
		return
	}
	if err := checkUploadName(file); err != nil {
		fail(http.StatusBadRequest, codes.InvalidArgument, "BAD_UPLOAD", "file: "+err.Error())
		return
	}
	// The body is the file itself; a form's would be stored with its
	// boundaries and part headers as the document's text.
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "multipart/form-data" {
		fail(http.StatusUnsupportedMediaType, codes.InvalidArgument, "BAD_UPLOAD",
			"send the file's bytes as the body (curl --data-binary @FILE), not a multipart/form-data form (curl -F)")
		return
	}
	data, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			fail(http.StatusRequestEntityTooLarge, codes.InvalidArgument, "UPLOAD_TOO_LARGE",
				"the upload is larger than "+strconv.FormatInt(h.maxBytes, 10)+" bytes (BMCIS_GATEWAY_MAX_UPLOAD_BYTES)")
			return
		}
		fail(http.StatusBadRequest, codes.InvalidArgument, "BAD_UPLOAD", "could not read the upload")
		return
	}
	var next func() (*uploadFile, error)
	if strings.EqualFold(path.Ext(file), ".zip") {
		next, err = zipFiles(data, h.maxBytes)
		if err != nil {
			fail(http.StatusBadRequest, codes.InvalidArgument, "BAD_ZIP", err.Error())
			return
		}
	} else {
		done := false
		next = func() (*uploadFile, error) {
			if done {
				return nil, nil
			}
			done = true
			return &uploadFile{name: path.Base(file), data: data}, nil
		}
	}

	stream, err := h.search.IngestDocuments(ctx)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	sendErr := stream.Send(&searchv1.IngestDocumentsRequest{Sync: &searchv1.SyncSource{Name: source, Root: "upload"}})
	var zipErr error
	for sendErr == nil {
		f, err := next()
		if err != nil {
			zipErr = err
			break
		}
		if f == nil {
			break
		}
		sendErr = docparts.Send(f.data, func(head []byte, total int64) error {
			return stream.Send(&searchv1.IngestDocumentsRequest{Document: &searchv1.Document{
				ExternalId: f.name, SourceFile: f.name, Content: head, ContentSize: total}})
		}, func(part []byte) error {
			return stream.Send(&searchv1.IngestDocumentsRequest{ContentPart: part})
		})
	}
	if zipErr != nil {
		// zipFiles read every entry once already, so this takes a change of
		// the bytes in memory; files already sent stay (each is its own
		// transaction): say so.
		_, _ = stream.CloseAndRecv()
		fail(http.StatusBadRequest, codes.InvalidArgument, "BAD_ZIP", zipErr.Error()+" (the files before it went in)")
		return
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		h.writeError(w, r, err) // the service's status says why (a send error shows here too)
		return
	}
	if resp.GetDocumentsFailed() > 0 && resp.GetDocumentsWritten()+resp.GetDocumentsUnchanged() == 0 {
		h.writeError(w, r, uploadRejected(resp))
		return
	}
	body, err := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(resp)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// verifyIngestCredential has the search service judge the operator's
// credential (attached to ctx by the edge's access check) with GetIndexStatus, the
// cheapest call the ingest role may make (in memory; platform/rpcauth).
// Junk and other roles' credentials are refused by the service's edge
// (401/403); only the read credential, which the gateway and adapter hold,
// passes it, and is refused when the stream ends.
func (h *Handler) verifyIngestCredential(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, credentialCheckTimeout)
	defer cancel()
	// The status goes to the error handler as the service gave it (wrapping
	// would put this text into the caller's message).
	_, err := h.search.GetIndexStatus(cctx, &searchv1.GetIndexStatusRequest{})
	return err
}

// uploadRejected is the error of an upload none of whose files went in
// (unknown format, empty, unreadable): 400 UPLOAD_REJECTED naming the first
// failure, with the service's summary, failures included, as a detail. An
// upload with some files in answers 200 with the summary instead.
func uploadRejected(resp *searchv1.IngestDocumentsResponse) error {
	msg := "no file of the upload went in"
	if fs := resp.GetFailures(); len(fs) > 0 {
		msg += ": " + fs[0].GetSourceFile() + ": " + fs[0].GetReason()
		if len(fs) > 1 {
			msg += fmt.Sprintf(" (and %d more; see details)", len(fs)-1)
		}
	}
	var more []*anypb.Any
	if summary, err := anypb.New(resp); err == nil {
		more = append(more, summary)
	}
	return apierror.New(codes.InvalidArgument, "UPLOAD_REJECTED", msg, nil, more...).Err()
}

// checkUploadName refuses names that could leave the source's namespace or
// mean something else on a file system: absolute, "..", backslashes,
// control characters; and names that are not UTF-8. No document id may
// hold either (ingestion refuses the first, gRPC would refuse to send the
// second).
func checkUploadName(name string) error {
	switch {
	case name == "" || len(name) > 1024:
		return fmt.Errorf("%q: a name is 1..1024 bytes", name)
	case !utf8.ValidString(name):
		return fmt.Errorf("%q: a name must be UTF-8 (an archive made with another encoding: create it again with UTF-8 names)", name)
	case strings.ContainsRune(name, '\\') || errors.Is(docid.Check(name), docid.ErrControl):
		// Control characters by platform/docid's rule (C1 too), which
		// ingestion applies to ids: refused here, a zip is refused whole
		// before any entry is sent.
		return fmt.Errorf("%q: backslashes and control characters are not allowed", name)
	case strings.HasPrefix(name, "/"):
		return fmt.Errorf("%q: absolute paths are not allowed", name)
	}
	for _, el := range strings.Split(name, "/") {
		if el == ".." || el == "." || el == "" {
			return fmt.Errorf("%q: path traversal (., .. or empty elements) is not allowed", name)
		}
	}
	return nil
}

// zipFiles checks a zip archive's directory and returns an iterator over
// its regular, non-hidden files, each read only when reached (one file in
// memory at a time). A file's size is enforced while reading, whatever the
// archive declares, so a bomb stops at the limit.
func zipFiles(data []byte, limit int64) (func() (*uploadFile, error), error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("not a zip archive: %v", err)
	}
	if len(zr.File) > maxZipEntries {
		return nil, fmt.Errorf("the archive holds %d entries (at most %d)", len(zr.File), maxZipEntries)
	}
	var files []*zip.File
	var declared uint64
	for _, f := range zr.File {
		if strings.HasSuffix(f.Name, "/") || f.FileInfo().IsDir() {
			continue
		}
		if err := checkUploadName(f.Name); err != nil {
			return nil, fmt.Errorf("entry %v", err)
		}
		if !f.Mode().IsRegular() {
			return nil, fmt.Errorf("entry %q is not a regular file (links are not accepted)", f.Name)
		}
		if hidden(f.Name) {
			continue
		}
		if f.UncompressedSize64 > uint64(limit) {
			return nil, fmt.Errorf("entry %q declares %d bytes (at most %d per file)", f.Name, f.UncompressedSize64, limit)
		}
		declared += f.UncompressedSize64
		if declared > uint64(limit)*maxZipExpansion {
			return nil, fmt.Errorf("the archive expands to more than %d bytes", uint64(limit)*maxZipExpansion)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		return nil, errors.New("the archive holds no files")
	}
	// Every entry is inflated once before any is sent, so a damaged one (a
	// CRC mismatch, more bytes than declared) refuses the whole archive
	// instead of leaving the entries before it written. It costs a second
	// inflate, bounded by maxZipExpansion times the limit, and no memory.
	for _, f := range files {
		if _, err := readEntry(f, io.Discard); err != nil {
			return nil, err
		}
	}
	i := 0
	return func() (*uploadFile, error) {
		if i == len(files) {
			return nil, nil
		}
		f := files[i]
		i++
		var b bytes.Buffer
		b.Grow(int(f.UncompressedSize64)) // at most the limit, checked above
		if _, err := readEntry(f, &b); err != nil {
			return nil, err
		}
		return &uploadFile{name: f.Name, data: b.Bytes()}, nil
	}, nil
}

// readEntry inflates f into w, refusing more bytes than it declares (a
// bomb stops there) and a checksum mismatch (archive/zip checks the CRC-32
// at the end of the entry).
func readEntry(f *zip.File, w io.Writer) (int64, error) {
	rc, err := f.Open()
	if err != nil {
		return 0, fmt.Errorf("entry %q: %v", f.Name, err)
	}
	defer rc.Close()
	n, err := io.Copy(w, io.LimitReader(rc, int64(f.UncompressedSize64)+1))
	switch {
	case err != nil:
		return n, fmt.Errorf("entry %q: %v", f.Name, err)
	case uint64(n) > f.UncompressedSize64:
		return n, fmt.Errorf("entry %q expands beyond its declared %d bytes", f.Name, f.UncompressedSize64)
	}
	return n, nil
}

// hidden reports a path with an element starting with "." or the
// "__MACOSX" folder macOS adds to archives: skipped, as bmcisctl skips
// hidden files.
func hidden(name string) bool {
	for _, el := range strings.Split(name, "/") {
		if strings.HasPrefix(el, ".") || el == "__MACOSX" {
			return true
		}
	}
	return false
}
