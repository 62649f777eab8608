// Package tokens counts and estimates cl100k_base tokens.
//
// Count is exact: the cl100k_base split pattern and byte-pair merge over the
// ranks embedded in the binary (tiktoken-go with its offline loader; no
// network), with a hand-written pre-tokenizer that agrees with tiktoken-go
// and is much faster. EstimateText and Sink are a streaming approximation
// used before any text exists, to plan an answer (how many results fit the
// budget) and to report tokens_estimated.
package tokens

import (
	"fmt"
	"sync"

	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

var (
	encOnce sync.Once
	enc     *tiktoken.Tiktoken
	encErr  error
	// vocab is the encoder's rank table (the same map, not a copy): the
	// estimator prices a word piece found in it as one token.
	vocab map[string]int
)

// keepRanks loads the embedded ranks and keeps a reference to them.
type keepRanks struct {
	offline *tiktoken_loader.OfflineLoader
}

func (k keepRanks) LoadTiktokenBpe(file string) (map[string]int, error) {
	ranks, err := k.offline.LoadTiktokenBpe(file)
	if err == nil {
		vocab = ranks
	}
	return ranks, err
}

func encoder() (*tiktoken.Tiktoken, error) {
	encOnce.Do(func() {
		tiktoken.SetBpeLoader(keepRanks{tiktoken_loader.NewOfflineLoader()})
		enc, encErr = tiktoken.GetEncoding("cl100k_base")
		if encErr != nil {
			encErr = fmt.Errorf("load cl100k_base: %w", encErr)
		}
	})
	return enc, encErr
}

// Init loads the encoder. Calling it at start-up moves the one-off load cost
// (a few hundred milliseconds) out of the first tool call and surfaces a
// broken build early.
func Init() error {
	_, err := encoder()
	return err
}

// Count returns the exact number of cl100k_base tokens in s, the number
// tiktoken's EncodeOrdinary returns (special-token text such as
// "<|endoftext|>" counts as ordinary text), computed by countExact over the
// same ranks, which is many times faster.
func Count(s string) int {
	if s == "" {
		return 0
	}
	if _, err := encoder(); err != nil || vocab == nil {
		// The ranks are embedded; failing to parse them is a build defect.
		// Fall back to the estimate rather than failing a user's call.
		return EstimateText(s)
	}
	return countExact(s, vocab)
}

// CountReference counts with tiktoken-go itself (regular-expression
// pre-tokenizer); tests use it to check Count.
func CountReference(s string) int {
	e, err := encoder()
	if err != nil {
		return -1
	}
	return len(e.EncodeOrdinary(s))
}
