package embed

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
)

// OpenAI embeds with POST {base}/v1/embeddings, the OpenAI API shape that
// many compatible servers also speak.
type OpenAI struct {
	h *httpCaller
}

var _ Embedder = (*OpenAI)(nil)

// NewOpenAI returns an OpenAI-compatible embedder.
func NewOpenAI(cfg HTTPConfig) (*OpenAI, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate("openai"); err != nil {
		return nil, err
	}
	return &OpenAI{h: &httpCaller{cfg: cfg, provider: "openai", errMessage: openAIErrMessage, sleep: sleepCtx}}, nil
}

type openAIRequest struct {
	Model          string   `json:"model"`
	Input          []string `json:"input"`
	Dimensions     int      `json:"dimensions,omitempty"`
	EncodingFormat string   `json:"encoding_format,omitempty"`
}

type openAIResponse struct {
	Data []struct {
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	} `json:"data"`
}

func openAIErrMessage(body []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil {
		return e.Error.Message
	}
	return ""
}

// Embed implements Embedder, one request per BatchSize texts.
func (o *OpenAI) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	cfg := o.h.cfg
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += cfg.BatchSize {
		batch := texts[start:min(start+cfg.BatchSize, len(texts))]
		var resp openAIResponse
		req := openAIRequest{Model: cfg.Model, Input: batch, Dimensions: cfg.Dims, EncodingFormat: "float"}
		if err := o.h.post(ctx, "/v1/embeddings", req, &resp); err != nil {
			return nil, fmt.Errorf("embed batch at %d: %w", start, err)
		}
		// The API returns an index per item; do not trust response order.
		sort.Slice(resp.Data, func(i, j int) bool { return resp.Data[i].Index < resp.Data[j].Index })
		vecs := make([][]float32, len(resp.Data))
		for i, d := range resp.Data {
			if d.Index != i {
				return nil, fmt.Errorf("openai embedder: response indexes are not 0..%d", len(batch)-1)
			}
			vecs[i] = d.Embedding
		}
		if err := checkVectors("openai", vecs, len(batch), cfg.Dims); err != nil {
			return nil, err
		}
		out = append(out, vecs...)
	}
	return out, nil
}

// Dimensions implements Embedder.
func (o *OpenAI) Dimensions() int { return o.h.cfg.Dims }

// ModelID implements Embedder: "openai:<model>:<dims>:<version>".
func (o *OpenAI) ModelID() string {
	return fmt.Sprintf("openai:%s:%d:%s", o.h.cfg.Model, o.h.cfg.Dims, o.h.cfg.Version)
}

// Ollama embeds with POST {base}/api/embed.
type Ollama struct {
	h *httpCaller
}

var _ Embedder = (*Ollama)(nil)

// NewOllama returns an Ollama embedder. Dims must match the model's output
// size (Ollama has no dimension parameter); responses are checked.
func NewOllama(cfg HTTPConfig) (*Ollama, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate("ollama"); err != nil {
		return nil, err
	}
	return &Ollama{h: &httpCaller{cfg: cfg, provider: "ollama", errMessage: ollamaErrMessage, sleep: sleepCtx}}, nil
}

type ollamaRequest struct {
	Model string   `json:"model"`
	Input []string `json:"input"`
}

type ollamaResponse struct {
	Model      string      `json:"model,omitempty"`
	Embeddings [][]float32 `json:"embeddings"`
}

func ollamaErrMessage(body []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil {
		return e.Error
	}
	return ""
}

// Embed implements Embedder, one request per BatchSize texts.
func (o *Ollama) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	cfg := o.h.cfg
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += cfg.BatchSize {
		batch := texts[start:min(start+cfg.BatchSize, len(texts))]
		var resp ollamaResponse
		if err := o.h.post(ctx, "/api/embed", ollamaRequest{Model: cfg.Model, Input: batch}, &resp); err != nil {
			return nil, fmt.Errorf("embed batch at %d: %w", start, err)
		}
		if err := checkVectors("ollama", resp.Embeddings, len(batch), cfg.Dims); err != nil {
			return nil, err
		}
		out = append(out, resp.Embeddings...)
	}
	return out, nil
}

// Dimensions implements Embedder.
func (o *Ollama) Dimensions() int { return o.h.cfg.Dims }

// ModelID implements Embedder: "ollama:<model>:<dims>:<version>".
func (o *Ollama) ModelID() string {
	return fmt.Sprintf("ollama:%s:%d:%s", o.h.cfg.Model, o.h.cfg.Dims, o.h.cfg.Version)
}
