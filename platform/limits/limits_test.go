package limits_test

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"buf.build/gen/go/bufbuild/protovalidate/protocolbuffers/go/buf/validate"
	"buf.build/go/protovalidate"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	vendorgraphv1 "github.com/bmcis/knowledge/gen/go/bmcis/vendorgraph/v1"
	"github.com/bmcis/knowledge/platform/limits"
)

// valid are requests that pass every rule; each case changes one field.
var valid = map[protoreflect.FullName]proto.Message{
	"bmcis.search.v1.SearchRequest":              &searchv1.SearchRequest{Query: "q", Limit: 10},
	"bmcis.search.v1.GetChunksRequest":           &searchv1.GetChunksRequest{ChunkIds: []int64{1}},
	"bmcis.vendorgraph.v1.GetVendorRequest":      &vendorgraphv1.GetVendorRequest{Name: "Acme"},
	"bmcis.vendorgraph.v1.SuggestVendorsRequest": &vendorgraphv1.SuggestVendorsRequest{Text: "ac"},
	"bmcis.search.v1.ListDocumentsRequest":       &searchv1.ListDocumentsRequest{},
}

// The contract's figures, written out once more on purpose: a proto edit
// that moves one must be seen here too.
func TestContractFigures(t *testing.T) {
	for _, c := range []struct {
		l        limits.Limit
		min, max int
	}{
		{limits.SearchQuery, 1, 500}, {limits.SearchPageSize, 1, 50}, {limits.ChunkIDs, 1, 100},
		{limits.VendorName, 1, 200}, {limits.VendorEntities, 0, 100}, {limits.VendorRelationships, 0, 500},
		{limits.VendorDepth, 0, 2}, {limits.VendorEvidence, 0, 50}, {limits.SuggestText, 1, 200},
		{limits.Suggestions, 0, 50},
		{limits.DocumentsSource, 0, 64}, {limits.DocumentsCategory, 0, 200}, {limits.DocumentsPrincipal, 0, 300},
		{limits.DocumentsIDPrefix, 0, 1024}, {limits.DocumentsPageSize, 0, 1000}, {limits.DocumentsPageToken, 0, 2000},
		{limits.DocumentID, 1, 1024},
	} {
		require.Equal(t, [2]int{c.min, c.max}, [2]int{c.l.Min, c.l.Max}, c.l.Field)
	}
	require.Equal(t, 0, limits.SearchOffset.Min)
	_, over := limits.SearchOffset.Over()
	require.False(t, over, "offset has no maximum")
}

// TestProtovalidateAgrees runs the real protovalidate validator over each
// limit: at both ends the request passes, one past either end it fails on
// that field. So what this package reads is what the rules mean.
func TestProtovalidateAgrees(t *testing.T) {
	v, err := protovalidate.New()
	require.NoError(t, err)
	for _, l := range limits.All() {
		t.Run(l.Field, func(t *testing.T) {
			base, ok := valid[l.Message()]
			require.True(t, ok, "no valid %s to start from", l.Message())
			require.NoError(t, v.Validate(base))
			require.NoError(t, v.Validate(limits.With(l, base, l.Min)), "at the minimum %d", l.Min)
			if n, ok := l.Over(); ok {
				require.NoError(t, v.Validate(limits.With(l, base, l.Max)), "at the maximum %d", l.Max)
				requireViolation(t, v.Validate(limits.With(l, base, n)), l)
			}
			if n, ok := l.Under(); ok {
				requireViolation(t, v.Validate(limits.With(l, base, n)), l)
			}
		})
	}
}

func requireViolation(t *testing.T, err error, l limits.Limit) {
	t.Helper()
	var verr *protovalidate.ValidationError
	require.ErrorAs(t, err, &verr)
	require.Len(t, verr.Violations, 1)
	require.Equal(t, l.Name(), protovalidate.FieldPathString(verr.Violations[0].Proto.GetField()))
}

// TestVendoredRulesMatchUpstream holds proto/third_party/buf/validate, the
// subset of protovalidate's rules the protos compile against, to upstream's
// descriptor (registered by the Go module): same messages, names, numbers
// and types, so the options the protos carry decode as upstream's.
func TestVendoredRulesMatchUpstream(t *testing.T) {
	src, err := os.ReadFile("../../proto/third_party/buf/validate/validate.proto")
	require.NoError(t, err)
	upstream, err := protoregistry.GlobalFiles.FindFileByPath("buf/validate/validate.proto")
	require.NoError(t, err)
	require.Equal(t, validate.File_buf_validate_validate_proto, upstream)

	message := regexp.MustCompile(`^message (\w+) \{`)
	field := regexp.MustCompile(`^\s+(?:optional )?([\w.]+) (\w+) = (\d+);`)
	var md protoreflect.MessageDescriptor
	fields := 0
	for line := range strings.Lines(string(src)) {
		if m := message.FindStringSubmatch(line); m != nil {
			md = upstream.Messages().ByName(protoreflect.Name(m[1]))
			require.NotNil(t, md, "upstream has no message %s", m[1])
			continue
		}
		m := field.FindStringSubmatch(line)
		if m == nil || md == nil {
			continue
		}
		fd := md.Fields().ByName(protoreflect.Name(m[2]))
		require.NotNil(t, fd, "upstream %s has no field %s", md.Name(), m[2])
		n, _ := strconv.Atoi(m[3])
		require.EqualValues(t, n, fd.Number(), "%s.%s", md.Name(), m[2])
		typ := fd.Kind().String()
		if fd.Message() != nil {
			typ = string(fd.Message().Name())
		}
		require.Equal(t, typ, m[1], "%s.%s", md.Name(), m[2])
		fields++
	}
	require.Greater(t, fields, 10, "the subset's fields were not read")
	ext := validate.E_Field.TypeDescriptor()
	require.Contains(t, string(src), "optional FieldRules field = "+strconv.Itoa(int(ext.Number()))+";")
}
