// Package tokens counts and estimates cl100k_base tokens.
//
// Count is exact: it is platform/cl100k, the tokenizer the search service
// chunks with, so a chunk's stored token count and the adapter's count of
// the same text agree. EstimateText and Sink are a streaming approximation
// used before any text exists, to plan an answer (how many results fit the
// budget) and to report tokens_estimated.
package tokens

import "github.com/bmcis/knowledge/platform/cl100k"

// Init loads the encoder. Calling it at start-up moves the one-off load cost
// (a few hundred milliseconds) out of the first tool call and surfaces a
// broken build early.
func Init() error {
	_, err := cl100k.Load()
	return err
}

// Count returns the exact number of cl100k_base tokens in s, the number
// tiktoken's EncodeOrdinary returns (special-token text such as
// "<|endoftext|>" counts as ordinary text).
func Count(s string) int {
	if s == "" {
		return 0
	}
	tok, err := cl100k.Load()
	if err != nil {
		// The ranks are embedded; failing to parse them is a build defect.
		// Fall back to the estimate rather than failing a user's call.
		return EstimateText(s)
	}
	return tok.Count(s)
}
