package readmask

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
)

// file is a response-shaped message from the protobuf runtime: scalars, a
// repeated message (message_type) with its own repeated message (field).
func file() *descriptorpb.FileDescriptorProto {
	return &descriptorpb.FileDescriptorProto{
		Name:    proto.String("a.proto"),
		Package: proto.String("pkg"),
		MessageType: []*descriptorpb.DescriptorProto{{
			Name:  proto.String("M"),
			Field: []*descriptorpb.FieldDescriptorProto{{Name: proto.String("f"), JsonName: proto.String("F")}},
		}},
	}
}

var fileDesc = (&descriptorpb.FileDescriptorProto{}).ProtoReflect().Descriptor()

func TestUnsetMaskWantsEverything(t *testing.T) {
	m, err := New(nil, fileDesc, "name")
	require.NoError(t, err)
	require.True(t, m.IsAll())
	require.True(t, m.Wants("message_type.field.json_name"))
	f := file()
	m.Prune(f)
	require.True(t, proto.Equal(file(), f))
}

func TestPruneKeepsWhatTheMaskNames(t *testing.T) {
	m, err := New(&fieldmaskpb.FieldMask{Paths: []string{"message_type.field.json_name"}}, fileDesc, "name")
	require.NoError(t, err)
	require.True(t, m.Wants("message_type"), "a field below it is wanted")
	require.True(t, m.Wants("message_type.field"))
	require.False(t, m.Wants("message_type.name"))
	require.False(t, m.Wants("package"))
	require.True(t, m.Wants("name"), "always-paths are added")

	f := file()
	m.Prune(f)
	want := &descriptorpb.FileDescriptorProto{
		Name: proto.String("a.proto"),
		MessageType: []*descriptorpb.DescriptorProto{{
			Field: []*descriptorpb.FieldDescriptorProto{{JsonName: proto.String("F")}},
		}},
	}
	require.True(t, proto.Equal(want, f), "got %v", f)
}

func TestAMessagePathNamesAllItsFields(t *testing.T) {
	m, err := New(&fieldmaskpb.FieldMask{Paths: []string{"message_type"}}, fileDesc)
	require.NoError(t, err)
	require.True(t, m.Wants("message_type.field.name"))
	f := file()
	m.Prune(f)
	require.Equal(t, "M", f.GetMessageType()[0].GetName())
	require.Equal(t, "f", f.GetMessageType()[0].GetField()[0].GetName())
	require.Empty(t, f.GetName())
}

func TestUnknownPathsAreRefused(t *testing.T) {
	for _, p := range []string{"nope", "name.x", "message_type.nope", ""} {
		_, err := New(&fieldmaskpb.FieldMask{Paths: []string{p}}, fileDesc)
		require.Error(t, err, p)
	}
}
