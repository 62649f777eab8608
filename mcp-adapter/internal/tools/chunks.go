package tools

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"

	"github.com/bmcis/knowledge/mcp-adapter/internal/answercache"
	"github.com/bmcis/knowledge/mcp-adapter/internal/apierr"
	"github.com/bmcis/knowledge/mcp-adapter/internal/envelope"
	"github.com/bmcis/knowledge/mcp-adapter/internal/projection"
	"github.com/bmcis/knowledge/mcp-adapter/internal/render"
	"github.com/bmcis/knowledge/mcp-adapter/internal/respond"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tokens"
	"github.com/bmcis/knowledge/mcp-adapter/internal/warnings"
	"github.com/bmcis/knowledge/platform/auditlog"
	"github.com/bmcis/knowledge/platform/limits"
)

// MaxListedMissing bounds the unknown ids a get_chunks answer lists (the
// rest are counted): a list of unknown ids has nothing the token budget
// could trim.
const MaxListedMissing = 10

type chunksParams struct {
	ids    []int64
	mode   projection.Mode
	fields []string
	format render.Format
}

func (s *Server) parseChunks(raw any) (chunksParams, *apierr.Error) {
	a := newArgs(raw, "chunk_ids", "response_mode", "fields", "format")
	p := chunksParams{}
	p.format = s.parseFormat(a)
	ids := a.ints("chunk_ids")
	p.mode, _ = s.parseMode(a, projection.Full)
	p.fields = a.strings("fields")
	if a.err != nil {
		return p, a.err
	}
	// The length first: nothing more is done with a list over the cap
	// (this runs before the caller is authenticated).
	if !limits.ChunkIDs.Allows(len(ids)) {
		return p, apierr.NewInvalidParams("chunk_ids", fmt.Sprintf("must hold %d to %d ids (got %d)", limits.ChunkIDs.Min, limits.ChunkIDs.Max, len(ids)),
			fmt.Sprintf("Pass at most %d chunk_id values of the results you want to read per call.", limits.ChunkIDs.Max))
	}
	seen := make(map[int64]bool, len(ids))
	for _, id := range ids {
		if id <= 0 {
			return p, apierr.NewInvalidParams("chunk_ids", "must hold positive ids", "Use chunk_id values from semantic_search results.")
		}
		if !seen[id] {
			seen[id] = true
			p.ids = append(p.ids, id)
		}
	}
	return p, nil
}

type chunksReply struct {
	chunks  []*searchv1.Chunk
	missing []int64
	// version is the index version search read the chunks at.
	version string
	// kept is the answer cache's answer, if it had one; slot is where to
	// keep a new one (nil: cache off).
	kept *keptAnswer
	slot *answerSlot
}

func (s *Server) getChunks(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	p, perr := s.parseChunks(req.GetArguments())
	ctx, call := s.newCall(ctx, ToolGetChunks, p.format)
	if perr == nil {
		noteOf(ctx).target = auditlog.ChunkTarget(p.ids)
	}
	res := s.chunks(ctx, call, p, perr)
	s.logDone(ctx, call, res)
	return res, nil
}

func (s *Server) chunks(ctx context.Context, call *respond.Call, p chunksParams, perr *apierr.Error) *mcp.CallToolResult {
	call.View.Mode = string(p.mode)
	call.View.Title = "Chunks " + joinIDs(p.ids)
	var fields []string
	ferr := perr
	if ferr == nil {
		fields, ferr = projection.Select(projection.ChunkFields(p.mode), p.fields, p.mode)
	}
	fetch := func(ctx context.Context, useKept bool) (chunksReply, error) {
		if ferr != nil {
			return chunksReply{}, nil
		}
		var slot *answerSlot
		if useKept {
			var kept *keptAnswer
			if kept, slot = s.lookupAnswer(ctx, call.Operation, func(k *answercache.KeyBuilder) {
				k.Int64s(p.ids).String(string(p.mode)).Strings(fields).String(string(p.format))
			}); kept != nil {
				return chunksReply{kept: kept, slot: slot}, nil
			}
		}
		chunks, missing, version, err := s.clients.GetChunks(ctx, p.ids, withAuditReads(projection.ChunkReads(fields), chunksAuditReads))
		return chunksReply{chunks: chunks, missing: missing, version: version, slot: slot}, err
	}
	reply, info, aerr, berr := guardedAnswer(ctx, s, call.Operation, fetch, func(r chunksReply) bool { return r.kept != nil })
	call.BackendDone = s.opts.Now()
	if aerr != nil {
		return s.resp.Failure(call, aerr)
	}
	// A kept answer comes with neither (fetch returns it before any).
	if ferr != nil {
		return s.resp.Failure(call, ferr)
	}
	if berr != nil {
		return s.resp.Failure(call, apierr.FromBackend(apierr.Search, berr))
	}
	call.CacheKey = "chunks:" + string(p.mode) + ":" + idsHash(p.ids)
	if reply.kept != nil {
		return s.replayAnswer(ctx, call, reply.kept)
	}
	for _, ch := range reply.chunks {
		noteResult(ctx, ch.GetChunkId(), ch.GetDocumentId())
	}

	env := call.NewEnvelope()
	var base []envelope.Warning
	base = append(base, info.warnings()...)
	c := &chunksContent{s: s, p: p, reply: reply, base: base}
	c.objects = make([]envelope.Object, len(reply.chunks))
	for i, ch := range reply.chunks {
		c.objects[i] = projection.Chunk(ch, fields)
	}
	res := s.resp.Success(call, env, c)
	// Warnings about this one call's check are not for a later call.
	if len(base) == 0 {
		s.keepAnswer(ctx, reply.slot, reply.version, call)
	}
	return res
}

func joinIDs(ids []int64) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(parts, ", ")
}

// listIDs lists at most n of ids; a longer list ends with how many more
// there were and the count against asked.
func listIDs(ids []int64, n, asked int) string {
	if len(ids) <= n {
		return joinIDs(ids)
	}
	return fmt.Sprintf("%s and %d more (%d of %d)", joinIDs(ids[:n]), len(ids)-n, len(ids), asked)
}

func idsHash(ids []int64) string {
	h := sha256.New()
	var b [8]byte
	for _, id := range ids {
		binary.BigEndian.PutUint64(b[:], uint64(id))
		h.Write(b[:])
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// chunksContent is a get_chunks answer; chunks are the units.
type chunksContent struct {
	s       *Server
	p       chunksParams
	reply   chunksReply
	base    []envelope.Warning
	objects []envelope.Object
}

func (c *chunksContent) Units() int    { return len(c.objects) }
func (c *chunksContent) MinUnits() int { return min(1, len(c.objects)) }

func (c *chunksContent) Keep(env *envelope.Envelope, k int) {
	env.Results = c.objects[:k]
	env.Pagination = nil
	env.Warnings = slices.Clone(c.base)
	env.Metadata.Status = envelope.StatusSuccess
	env.Metadata.Message = nil
	var notes []string
	if len(c.reply.missing) > 0 {
		env.Warnings = append(env.Warnings, warnings.NewPartialResults(
			"Chunks not found: "+listIDs(c.reply.missing, MaxListedMissing, len(c.p.ids)),
			"Use chunk_id values from recent semantic_search results; chunks of deleted or re-ingested documents no longer exist."))
		notes = append(notes, fmt.Sprintf("%d of %d chunks not found", len(c.reply.missing), len(c.p.ids)))
	}
	if k < len(c.objects) {
		omitted := make([]int64, 0, len(c.objects)-k)
		for _, ch := range c.reply.chunks[k:] {
			omitted = append(omitted, ch.GetChunkId())
		}
		env.Warnings = append(env.Warnings, warnings.NewPartialResults(
			fmt.Sprintf("Returned %d of %d chunks to stay within the %d-token limit; omitted: %s",
				k, len(c.objects), c.s.opts.Thresholds.MaxTokens, joinIDs(omitted)),
			"Call get_chunks again with the omitted ids."))
		notes = append(notes, "trimmed to fit the token limit")
	}
	if len(notes) > 0 {
		env.Metadata.Status = envelope.StatusPartial
		msg := strings.Join(notes, "; ")
		env.Metadata.Message = &msg
	}
}

func (c *chunksContent) NearLimit() string {
	return "Request fewer chunk_ids per call, or use 'preview' mode"
}

func (c *chunksContent) Exceeded(needed, limit int) string {
	if len(c.reply.chunks) == 0 {
		return fmt.Sprintf("Even without chunks the answer needs about %d tokens; request fewer chunk_ids per call.", needed)
	}
	first := c.reply.chunks[0]
	preview := tokens.Count(mustJSON(projection.Chunk(first, projection.ChunkFields(projection.Preview))))
	return fmt.Sprintf("Chunk %d alone needs about %d tokens in '%s' mode, over the %d-token limit; 'preview' mode shows it in about %d tokens.",
		first.GetChunkId(), needed, c.p.mode, limit, preview)
}

func mustJSON(v any) string {
	b, err := envelope.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}
