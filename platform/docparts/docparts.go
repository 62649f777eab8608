// Package docparts cuts one document's content into the parts of a search
// ingestion stream, so a document of any size fits gRPC's 4 MiB message
// limit: the Document message carries the first part and the total size
// (content_size), the following messages one content_part each. Every
// client of IngestDocuments (bmcisctl ingest and sync, the gateway's upload
// route) sends through it. It knows no message types, so the platform
// module stays free of generated code.
package docparts

// PartBytes is the content carried per message: well under 4 MiB.
const PartBytes = 1 << 20

// Send calls first with the first part of content and the total size (0
// when content fits in one part, which then holds it all), then next with
// each following part, in order. It stops at the first error.
func Send(content []byte, first func(head []byte, total int64) error, next func(part []byte) error) error {
	if len(content) <= PartBytes {
		return first(content, 0)
	}
	if err := first(content[:PartBytes], int64(len(content))); err != nil {
		return err
	}
	for off := PartBytes; off < len(content); off += PartBytes {
		if err := next(content[off:min(off+PartBytes, len(content))]); err != nil {
			return err
		}
	}
	return nil
}
