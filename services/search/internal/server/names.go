package server

import (
	"errors"
	"io"
	"regexp"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/limits"
	"github.com/bmcis/knowledge/platform/mentions"
)

// SyncEntityNames takes the entities the vendor graph created or changed
// (vendorgraph calls it inside an import, before committing), stores their
// names in search's own copy and re-links the chunks those names can appear
// in, in one transaction once the stream ends: a stream cut short stores
// nothing.
func (s *Server) SyncEntityNames(stream grpc.ClientStreamingServer[searchv1.SyncEntityNamesRequest, searchv1.SyncEntityNamesResponse]) error {
	ctx := stream.Context()
	var names []mentions.EntityName
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if !limits.EntityNamesBatch.Allows(len(req.GetNames())) {
			return status.Errorf(codes.InvalidArgument, "a message carries at most %d names", limits.EntityNamesBatch.Max)
		}
		for _, n := range req.GetNames() {
			if err := checkEntityName(n); err != nil {
				return err
			}
			names = append(names, mentions.EntityName{EntityID: n.GetEntityId(), Name: n.GetName(),
				EntityType: n.GetEntityType(), IsVendor: n.GetIsVendor(), Aliases: n.GetAliases()})
		}
	}
	st, version, err := s.st.SyncEntityNames(ctx, names)
	if err != nil {
		return dbError(ctx, err)
	}
	return stream.SendAndClose(&searchv1.SyncEntityNamesResponse{
		NamesStored:    int64(len(names)),
		ChunksIndexed:  int64(st.Indexed),
		ChunksRelinked: int64(st.Relinked),
		GraphVersion:   version,
	})
}

var uuidPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// checkEntityName holds one name to the contract's rules.
func checkEntityName(n *searchv1.EntityName) error {
	if !uuidPattern.MatchString(n.GetEntityId()) {
		return status.Errorf(codes.InvalidArgument, "entity_id %q is not a UUID", n.GetEntityId())
	}
	if !limits.EntityNameText.Allows(utf8.RuneCountInString(n.GetName())) {
		return status.Errorf(codes.InvalidArgument, "entity %s: name must be %d to %d characters",
			n.GetEntityId(), limits.EntityNameText.Min, limits.EntityNameText.Max)
	}
	if !limits.EntityType.Allows(utf8.RuneCountInString(n.GetEntityType())) {
		return status.Errorf(codes.InvalidArgument, "entity %s: entity_type must be at most %d characters",
			n.GetEntityId(), limits.EntityType.Max)
	}
	if !limits.EntityAliases.Allows(len(n.GetAliases())) {
		return status.Errorf(codes.InvalidArgument, "entity %s: at most %d aliases", n.GetEntityId(), limits.EntityAliases.Max)
	}
	for _, a := range n.GetAliases() {
		if !limits.EntityNameText.Allows(utf8.RuneCountInString(a)) {
			return status.Errorf(codes.InvalidArgument, "entity %s: an alias must be %d to %d characters",
				n.GetEntityId(), limits.EntityNameText.Min, limits.EntityNameText.Max)
		}
	}
	return nil
}
