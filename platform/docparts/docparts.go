// Package docparts sends one document of a search ingestion stream in
// parts, so a document of any size fits gRPC's 4 MiB message limit: the
// Document message carries the first part of its content and the total in
// content_size, the following messages carry content_part. Every client of
// IngestDocuments (bmcisctl ingest and sync, the gateway's upload route)
// sends through it.
package docparts

import searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"

// PartBytes is the content carried per message: well under 4 MiB.
const PartBytes = 1 << 20

// Send sends d whole when its content fits in one part, else in parts.
// d is restored before Send returns (send must marshal synchronously, as
// gRPC's stream Send does), so no copy of a big document is made.
func Send(send func(*searchv1.IngestDocumentsRequest) error, d *searchv1.Document) error {
	content := d.GetContent()
	if len(content) <= PartBytes {
		return send(&searchv1.IngestDocumentsRequest{Document: d})
	}
	d.Content, d.ContentSize = content[:PartBytes], int64(len(content))
	err := send(&searchv1.IngestDocumentsRequest{Document: d})
	d.Content, d.ContentSize = content, 0
	if err != nil {
		return err
	}
	for off := PartBytes; off < len(content); off += PartBytes {
		if err := send(&searchv1.IngestDocumentsRequest{ContentPart: content[off:min(off+PartBytes, len(content))]}); err != nil {
			return err
		}
	}
	return nil
}
