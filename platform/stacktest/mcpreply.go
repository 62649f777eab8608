package stacktest

import "bytes"

// MCPReplyJSON returns the JSON-RPC message of a streamable-HTTP reply: the
// body itself when it is JSON, or the data of the one SSE event carrying it.
func MCPReplyJSON(body []byte) []byte {
	if bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) {
		return body
	}
	i := bytes.Index(body, []byte("data: "))
	if i < 0 {
		return body
	}
	body = body[i+len("data: "):]
	if j := bytes.IndexByte(body, '\n'); j >= 0 {
		body = body[:j]
	}
	return body
}
