package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bmcis/knowledge/bmcisctl/internal/source"
	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/docparts"
	"github.com/bmcis/knowledge/platform/grpcclient"
)

// searchDefaultAddr is where `make run` starts the search service.
const searchDefaultAddr = "127.0.0.1:50051"

// searchAddrFlag is the -addr default of the search commands.
func searchAddrFlag() string { return envOr("BMCIS_SEARCH_ADDR", searchDefaultAddr) }

// searchDial connects to the search service; its calls present the
// credential named by role (envReadToken or envIngestToken) unless a call's
// context says otherwise (searchIngest always presents the ingest one).
func searchDial(addr, role string) (searchv1.SearchServiceClient, func(), error) {
	token, err := credential(role)
	if err != nil {
		return nil, nil, err
	}
	conn, err := grpcclient.Dial(addr, token, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		return nil, nil, err
	}
	return searchv1.NewSearchServiceClient(conn), func() { _ = conn.Close() }, nil
}

// searchIngestSummary is the outcome of one ingestion.
type searchIngestSummary struct {
	Sent     int
	Resp     *searchv1.IngestDocumentsResponse
	Problems []source.Item // read before sending (not sent)
	Seconds  float64
	// Unconfirmed: the service predates IngestDocumentsAcked, so nothing
	// was acknowledged while documents were sent (the summary came at the
	// end).
	Unconfirmed bool
}

// UnconfirmedNote tells the user that the service acknowledged nothing
// along the way.
const UnconfirmedNote = "note: this search service has no IngestDocumentsAcked (an older version): documents were sent with " +
	"IngestDocuments, which confirms none until its final summary; counts are unconfirmed until then, and unknown if interrupted"

// ingestInterruptedError is an ingestion that ended early (the connection
// lost, the service or its database gone): Acked is what the service had
// acknowledged as committed, never more than is stored.
type ingestInterruptedError struct {
	Sent  int
	Acked *searchv1.IngestDocumentsProgress
	Err   error
	// Unconfirmed: an older service, which acknowledges nothing (Acked is
	// nil): how many were committed is unknown.
	Unconfirmed bool
}

func (e *ingestInterruptedError) Error() string {
	if refused(e.Err) {
		// The service refused the stream itself: the same command is
		// refused the same way until its cause is fixed.
		committed := "how many were committed is unconfirmed (an older service)"
		if !e.Unconfirmed {
			committed = fmt.Sprintf("%d committed", e.Acked.GetDocumentsWritten()+e.Acked.GetDocumentsUnchanged())
		}
		return fmt.Sprintf("%v\ningestion refused after %d document(s) sent: %s; a mirroring sync deleted nothing; "+
			"re-running the same command is refused the same way until the cause above is fixed", e.Err, e.Sent, committed)
	}
	if e.Unconfirmed {
		return fmt.Sprintf("%v\ningestion interrupted after %d document(s) sent to a search service without IngestDocumentsAcked (an older version): "+
			"how many were committed is unconfirmed; re-run the same command to finish (stored documents are skipped as unchanged)", e.Err, e.Sent)
	}
	a := e.Acked
	return fmt.Sprintf("%v\ningestion interrupted after %d document(s) sent: %d committed (acknowledged: %d written, %d unchanged, %d failed); "+
		"the others may or may not be stored: re-run the same command to finish (stored documents are skipped as unchanged)",
		e.Err, e.Sent, a.GetDocumentsWritten()+a.GetDocumentsUnchanged(), a.GetDocumentsWritten(), a.GetDocumentsUnchanged(), a.GetDocumentsFailed())
}

func (e *ingestInterruptedError) Unwrap() error { return e.Err }

// refused reports whether the service turned the stream down for what it
// carried or who sent it, which trying again does not change.
func refused(err error) bool {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.FailedPrecondition, codes.OutOfRange, codes.PermissionDenied, codes.Unauthenticated:
		return true
	}
	return false
}

// searchIngest streams every document under paths to the service.
// progress (may be nil) is called after each document sent.
func searchIngest(ctx context.Context, c searchv1.SearchServiceClient, paths []string, progress func(sent, problems int)) (*searchIngestSummary, error) {
	return searchIngestPlan(ctx, c, ingestPlan{walk: func(emit func(source.Item) error, _ func(string) error, _ func(string) error) error {
		return source.Walk(paths, emit)
	}}, progress)
}

// ingestPlan is what one ingestion stream sends: the items walk emits, after
// the sync header when sync is set (walk may then also name kept files, and
// kept folders: those it could not list).
type ingestPlan struct {
	sync *searchv1.SyncSource
	walk func(emit func(source.Item) error, keep func(externalID string) error, keepFolder func(folder string) error) error
}

// keepBatch is how many kept ids go in one message.
const keepBatch = 2000

// searchIngestPlan is the one ingestion client path (ingest, sync): it
// streams the plan's documents, big ones in parts, while the service
// acknowledges committed documents (IngestDocumentsAcked). An ingestion that
// ends early returns an *ingestInterruptedError with the acknowledged counts.
//
// A search service older than IngestDocumentsAcked answers Unimplemented
// before it reads anything; the plan is then sent again over the old
// IngestDocuments, which acknowledges nothing until its final summary: the
// summary says so (Unconfirmed), and so does an interruption.
func searchIngestPlan(ctx context.Context, c searchv1.SearchServiceClient, plan ingestPlan, progress func(sent, problems int)) (*searchIngestSummary, error) {
	ctx, err := withCredential(ctx, envIngestToken)
	if err != nil {
		return nil, err
	}
	sum, err := ingestAcked(ctx, c, plan, progress)
	if ie, ok := errors.AsType[*ingestInterruptedError](err); ok && status.Code(ie.Err) == codes.Unimplemented && ie.Acked.GetSummary() == nil &&
		ie.Acked.GetDocumentsWritten()+ie.Acked.GetDocumentsUnchanged()+ie.Acked.GetDocumentsFailed() == 0 {
		return ingestUnacked(ctx, c, plan, progress)
	}
	return sum, err
}

// errStop: a Send found the stream ended; its status comes from
// receiving (Recv, CloseAndRecv).
var errStop = errors.New("stop")

// stopOnEnd turns a stream's Send error into errStop.
func stopOnEnd(send func(*searchv1.IngestDocumentsRequest) error) func(*searchv1.IngestDocumentsRequest) error {
	return func(req *searchv1.IngestDocumentsRequest) error {
		if err := send(req); err != nil {
			return errStop
		}
		return nil
	}
}

// ingestAcked streams plan over IngestDocumentsAcked.
func ingestAcked(ctx context.Context, c searchv1.SearchServiceClient, plan ingestPlan, progress func(sent, problems int)) (*searchIngestSummary, error) {
	start := time.Now()
	sum := &searchIngestSummary{}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.IngestDocumentsAcked(ctx)
	if err != nil {
		return nil, err
	}
	// Acknowledgements arrive while documents are sent.
	var acked atomic.Pointer[searchv1.IngestDocumentsProgress]
	acked.Store(&searchv1.IngestDocumentsProgress{})
	recvDone := make(chan error, 1)
	go func() {
		for {
			p, err := stream.Recv()
			if err != nil {
				recvDone <- err
				return
			}
			acked.Store(p)
			if p.GetSummary() != nil {
				recvDone <- nil
				return
			}
		}
	}()
	interrupted := func(err error) error {
		return &ingestInterruptedError{Sent: sum.Sent, Acked: acked.Load(), Err: err}
	}
	err = sendPlan(stopOnEnd(stream.Send), plan, sum, progress)
	if err != nil && !errors.Is(err, errStop) {
		cancel()
		<-recvDone
		return nil, interrupted(err)
	}
	if err == nil {
		if err := stream.CloseSend(); err != nil {
			cancel()
			<-recvDone
			return nil, interrupted(err)
		}
	}
	if err := <-recvDone; err != nil {
		return nil, interrupted(err)
	}
	last := acked.Load()
	if last.GetSummary() == nil {
		return nil, interrupted(errors.New("the service ended the stream without a summary"))
	}
	sum.Resp = last.GetSummary()
	sum.Seconds = time.Since(start).Seconds()
	return sum, nil
}

// ingestUnacked streams plan over the old IngestDocuments, which answers
// once, with the summary, at the end.
func ingestUnacked(ctx context.Context, c searchv1.SearchServiceClient, plan ingestPlan, progress func(sent, problems int)) (*searchIngestSummary, error) {
	start := time.Now()
	sum := &searchIngestSummary{Unconfirmed: true}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.IngestDocuments(ctx)
	if err != nil {
		return nil, err
	}
	interrupted := func(err error) error {
		return &ingestInterruptedError{Sent: sum.Sent, Err: err, Unconfirmed: true}
	}
	err = sendPlan(stopOnEnd(stream.Send), plan, sum, progress)
	if err != nil && !errors.Is(err, errStop) {
		cancel()
		return nil, interrupted(err)
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return nil, interrupted(err)
	}
	sum.Resp = resp
	sum.Seconds = time.Since(start).Seconds()
	return sum, nil
}

// sendPlan sends the plan's messages: the sync header, the documents (big
// ones in parts), the kept ids and kept folders, counting into sum.
func sendPlan(send func(*searchv1.IngestDocumentsRequest) error, plan ingestPlan, sum *searchIngestSummary, progress func(sent, problems int)) error {
	var keep []string
	flushKeep := func() error {
		if len(keep) == 0 {
			return nil
		}
		err := send(&searchv1.IngestDocumentsRequest{KeepExternalIds: keep})
		keep = nil
		return err
	}
	if plan.sync != nil {
		if err := send(&searchv1.IngestDocumentsRequest{Sync: plan.sync}); err != nil {
			return err
		}
	}
	err := plan.walk(func(it source.Item) error {
		if it.Doc == nil {
			sum.Problems = append(sum.Problems, it)
		} else {
			if err := sendDocument(send, it.Doc); err != nil {
				return err
			}
			sum.Sent++
		}
		if progress != nil {
			progress(sum.Sent, len(sum.Problems))
		}
		return nil
	}, func(id string) error {
		keep = append(keep, id)
		if len(keep) >= keepBatch {
			return flushKeep()
		}
		return nil
	}, func(folder string) error {
		return send(&searchv1.IngestDocumentsRequest{KeepFolders: []string{folder}})
	})
	if err != nil {
		return err
	}
	return flushKeep()
}

// sendDocument sends d, in parts when it is big (platform/docparts). The
// first part travels in d itself, restored after Send has marshalled it,
// so no copy of a big document is made.
func sendDocument(send func(*searchv1.IngestDocumentsRequest) error, d *searchv1.Document) error {
	content := d.GetContent()
	defer func() { d.Content, d.ContentSize = content, 0 }()
	return docparts.Send(content, func(head []byte, total int64) error {
		d.Content, d.ContentSize = head, total
		return send(&searchv1.IngestDocumentsRequest{Document: d})
	}, func(part []byte) error {
		return send(&searchv1.IngestDocumentsRequest{ContentPart: part})
	})
}

// isTerminalWriter reports whether w is a character device (a terminal).
func isTerminalWriter(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// searchProgressBar draws "[#####.....] n/total" on a terminal, and a line
// every 10 s otherwise.
type searchProgressBar struct {
	w     io.Writer
	total int
	tty   bool
	start time.Time
	last  time.Time
	quiet bool
}

func newSearchProgressBar(w io.Writer, total int, quiet bool) *searchProgressBar {
	return &searchProgressBar{w: w, total: total, tty: isTerminalWriter(w), start: time.Now(), quiet: quiet}
}

func (p *searchProgressBar) update(done int) {
	if p.quiet {
		return
	}
	now := time.Now()
	if p.tty && now.Sub(p.last) < 100*time.Millisecond && done < p.total {
		return
	}
	if !p.tty && now.Sub(p.last) < 10*time.Second {
		return
	}
	p.last = now
	frac := 1.0
	if p.total > 0 {
		frac = min(1, float64(done)/float64(p.total))
	}
	const width = 30
	bar := make([]byte, width)
	for i := range bar {
		bar[i] = '.'
		if i < int(frac*width) {
			bar[i] = '#'
		}
	}
	el := now.Sub(p.start).Seconds()
	if p.tty {
		fmt.Fprintf(p.w, "\r[%s] %d/%d documents  %.1fs", bar, done, p.total, el)
	} else {
		fmt.Fprintf(p.w, "[%s] %d/%d documents  %.1fs\n", bar, done, p.total, el)
	}
}

func (p *searchProgressBar) done() {
	if !p.quiet && p.tty {
		fmt.Fprintln(p.w, "  sent; waiting for the service (indexing, embedding)...")
	}
}
