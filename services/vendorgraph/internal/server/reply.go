package server

import (
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	vendorgraphv1 "github.com/bmcis/knowledge/gen/go/bmcis/vendorgraph/v1"
	"github.com/bmcis/knowledge/services/vendorgraph/internal/graph"
	"github.com/bmcis/knowledge/services/vendorgraph/internal/importer"
)

// buildReply cuts the ranked neighbourhood to the caps and converts what is
// returned.
func buildReply(v graph.Vendor, nb *graph.Neighbourhood, k cacheKey) (*vendorgraphv1.GetVendorResponse, error) {
	nEnt := min(len(nb.Nodes), int(k.maxEntities))
	nTop := min(len(nb.Nodes), topEntities)
	nRel := 0
	if k.includeRelationships {
		nRel = min(len(nb.Edges), int(k.maxRels))
	}
	resp := &vendorgraphv1.GetVendorResponse{
		VendorName: v.Name,
		VendorId:   importer.FormatUUID(v.ID),
		Aliases:    v.Aliases,
		Statistics: &vendorgraphv1.VendorStatistics{
			EntityCount:                  int32(len(nb.Nodes)),
			RelationshipCount:            int32(len(nb.Edges)),
			EntityTypeDistribution:       nb.EntityTypes,
			RelationshipTypeDistribution: nb.EdgeTypes,
		},
		LastUpdated:            timestamppb.New(nb.LastUpdated),
		EntitiesTruncated:      len(nb.Nodes) > nEnt,
		RelationshipsTruncated: k.includeRelationships && len(nb.Edges) > nRel,
	}
	converted := make([]*vendorgraphv1.Entity, max(nEnt, nTop))
	for i, nd := range nb.Nodes[:len(converted)] {
		e, err := toEntity(nd)
		if err != nil {
			return nil, err
		}
		converted[i] = e
	}
	resp.TopEntities = converted[:nTop]
	resp.Entities = converted[:nEnt]
	resp.EntityIds = make([]string, nEnt)
	for i, e := range resp.Entities {
		resp.EntityIds[i] = e.EntityId
	}
	// Relationships name both ends: the neighbourhood holds every entity an
	// edge touches, the vendor aside.
	names := make(map[graph.UUID]string, len(nb.Nodes)+1)
	names[v.ID] = v.Name
	for _, nd := range nb.Nodes {
		names[nd.ID] = nd.Name
	}
	resp.Relationships = make([]*vendorgraphv1.Relationship, nRel)
	resp.RelationshipIds = make([]string, nRel)
	for i, e := range nb.Edges[:nRel] {
		meta, err := toStruct(e.Metadata)
		if err != nil {
			return nil, fmt.Errorf("relationship %s metadata: %w", importer.FormatUUID(e.ID), err)
		}
		id := importer.FormatUUID(e.ID)
		resp.RelationshipIds[i] = id
		resp.Relationships[i] = &vendorgraphv1.Relationship{
			RelationshipId:   id,
			SourceId:         importer.FormatUUID(e.Source),
			TargetId:         importer.FormatUUID(e.Target),
			SourceName:       names[e.Source],
			TargetName:       names[e.Target],
			RelationshipType: e.Type,
			Confidence:       e.Confidence,
			Metadata:         meta,
			UpdatedAt:        timestamppb.New(e.UpdatedAt),
		}
	}
	return resp, nil
}

func toEntity(nd graph.Node) (*vendorgraphv1.Entity, error) {
	attrs, err := toStruct(nd.Attributes)
	if err != nil {
		return nil, fmt.Errorf("entity %s attributes: %w", importer.FormatUUID(nd.ID), err)
	}
	e := &vendorgraphv1.Entity{
		EntityId:   importer.FormatUUID(nd.ID),
		Name:       nd.Name,
		EntityType: nd.Type,
		Confidence: nd.Confidence,
		Attributes: attrs,
		UpdatedAt:  timestamppb.New(nd.UpdatedAt),
		Relevance:  nd.Relevance,
		IsVendor:   nd.IsVendor,
	}
	if nd.Snippet != nil {
		e.Snippet = *nd.Snippet
	}
	return e, nil
}

// toStruct converts a stored JSON object; an empty one becomes nil so
// replies stay small.
func toStruct(raw []byte) (*structpb.Struct, error) {
	if len(raw) == 0 || string(raw) == "{}" {
		return nil, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	st, err := structpb.NewStruct(m)
	if err != nil {
		return nil, fmt.Errorf("convert: %w", err)
	}
	return st, nil
}

// addEvidence puts what the documents say about the vendor (search's
// answer) into resp; nil (search is out) says the evidence is unavailable.
func addEvidence(resp *vendorgraphv1.GetVendorResponse, ev *searchv1.GetEntityEvidenceResponse) {
	if ev == nil {
		resp.EvidenceUnavailable = true
		return
	}
	resp.EvidenceChunkCount = ev.GetChunkCount()
	resp.Evidence = make([]*vendorgraphv1.EvidenceChunk, len(ev.GetChunks()))
	for i, c := range ev.GetChunks() {
		resp.Evidence[i] = &vendorgraphv1.EvidenceChunk{ChunkId: c.GetChunkId(), DocumentId: c.GetDocumentId(),
			SourceFile: c.GetSourceFile(), MentionCount: c.GetMentionCount(), Snippet: c.GetSnippet(), Score: c.GetScore()}
	}
	resp.EvidenceDocuments = make([]*vendorgraphv1.EvidenceDocument, len(ev.GetDocuments()))
	for i, d := range ev.GetDocuments() {
		resp.EvidenceDocuments[i] = &vendorgraphv1.EvidenceDocument{DocumentId: d.GetDocumentId(), SourceFile: d.GetSourceFile(),
			Title: d.GetTitle(), MentionCount: d.GetMentionCount(), ChunkCount: d.GetChunkCount()}
	}
}
