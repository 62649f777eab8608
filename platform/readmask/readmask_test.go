package readmask

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/gofeaturespb"
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

// pruneByRange is Prune as a walk of each message's set fields, the way it
// was written first: the planned Prune must leave the same message.
func pruneByRange(n *node, msg protoreflect.Message) {
	msg.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		child := n.fields[fd.Name()]
		switch {
		case child == nil:
			msg.Clear(fd)
		case child.whole || fd.Message() == nil || fd.IsMap():
		case fd.IsList():
			l := v.List()
			for i := range l.Len() {
				pruneByRange(child, l.Get(i).Message())
			}
		default:
			pruneByRange(child, v.Message())
		}
		return true
	})
}

func TestPruneLeavesWhatAWalkOfTheSetFieldsLeaves(t *testing.T) {
	// descriptor.proto described by itself: nested messages, repeated
	// ones, options, scalars set and unset.
	full := protodesc.ToFileDescriptorProto(descriptorpb.File_google_protobuf_descriptor_proto)
	for _, paths := range [][]string{
		{"name"},
		{"message_type.name"},
		{"message_type.field.name", "message_type.field.number"},
		{"message_type.field", "enum_type.value.name"},
		{"message_type.nested_type.field.options.deprecated", "options"},
		{"message_type.options.deprecated", "message_type.extension_range.start", "syntax"},
		{"enum_type", "message_type.enum_type.value.number", "package"},
	} {
		m, err := New(&fieldmaskpb.FieldMask{Paths: paths}, fileDesc, "dependency")
		require.NoError(t, err, paths)
		got, want := proto.Clone(full), proto.Clone(full)
		m.Prune(got)
		pruneByRange(m.root, want.ProtoReflect())
		require.True(t, proto.Equal(want, got), "paths %v", paths)
		require.False(t, proto.Equal(full, got), "paths %v prune something", paths)
	}
}

func TestARepeatedMaskIsBuiltOnce(t *testing.T) {
	fm := &fieldmaskpb.FieldMask{Paths: []string{"message_type.field.json_name"}}
	a, err := New(fm, fileDesc, "name")
	require.NoError(t, err)
	b, err := New(&fieldmaskpb.FieldMask{Paths: []string{"message_type.field.json_name"}}, fileDesc, "name")
	require.NoError(t, err)
	require.Same(t, a.root, b.root)
	c, err := New(fm, fileDesc)
	require.NoError(t, err)
	require.NotSame(t, a.root, c.root, "other always-paths are another mask")
	require.False(t, c.Wants("name"))
	// A refused mask is refused again, not remembered as anything.
	for range 2 {
		_, err = New(&fieldmaskpb.FieldMask{Paths: []string{"message_type.nope"}}, fileDesc)
		require.Error(t, err)
	}
}

func TestPathsThatJoinAlikeAreNotTakenForEachOther(t *testing.T) {
	_, err := New(&fieldmaskpb.FieldMask{Paths: []string{"name", "package"}}, fileDesc)
	require.NoError(t, err)
	for _, paths := range [][]string{{"name\x00package"}, {"name package"}, {"name;package"}, {"name", "package", ""}} {
		_, err := New(&fieldmaskpb.FieldMask{Paths: paths}, fileDesc)
		require.Error(t, err, "%q", paths)
	}
}

func TestMasksAlikeButForSpacingOrderAndRepeatsAreOne(t *testing.T) {
	a, err := New(&fieldmaskpb.FieldMask{Paths: []string{"name", "package"}}, fileDesc)
	require.NoError(t, err)
	before := built.Len()
	for _, paths := range [][]string{{" name", "package"}, {"package", "name", "name "}, {"  name", "package", "\tpackage"}} {
		b, err := New(&fieldmaskpb.FieldMask{Paths: paths}, fileDesc)
		require.NoError(t, err)
		require.Same(t, a.root, b.root, "%q", paths)
	}
	require.Equal(t, before, built.Len(), "variants of one mask kept apart")
}

func TestALongMaskIsServedButNotKept(t *testing.T) {
	// Spaces and repeats do not make a mask long: trimmed and compacted,
	// these are short masks, kept.
	spaced := &fieldmaskpb.FieldMask{Paths: []string{"name" + strings.Repeat(" ", 5000), "package"}}
	a, err := New(spaced, fileDesc)
	require.NoError(t, err)
	b, err := New(spaced, fileDesc)
	require.NoError(t, err)
	require.Same(t, a.root, b.root)
	require.False(t, a.Wants("syntax"))
	var repeated []string
	for range 600 {
		repeated = append(repeated, "message_type.field.json_name")
	}
	c, err := New(&fieldmaskpb.FieldMask{Paths: repeated}, fileDesc)
	require.NoError(t, err)
	require.True(t, c.Wants("message_type.field.json_name"))

	// Distinct valid paths past maxKeptKey (nested_type nests without
	// end): served, built anew each time, not kept.
	var deep []string
	for n := range 60 {
		deep = append(deep, "message_type"+strings.Repeat(".nested_type", n)+".name")
	}
	before := built.Len()
	d, err := New(&fieldmaskpb.FieldMask{Paths: deep}, fileDesc)
	require.NoError(t, err)
	require.True(t, d.Wants("message_type.nested_type.name"))
	e, err := New(&fieldmaskpb.FieldMask{Paths: deep}, fileDesc)
	require.NoError(t, err)
	require.NotSame(t, d.root, e.root)
	require.Equal(t, before, built.Len())
}

func TestAFullCacheDropsOneMaskNotAll(t *testing.T) {
	names := []string{"name", "number", "label", "type", "type_name", "extendee", "default_value", "oneof_index", "json_name", "options"}
	kept := 0
	for set := 1; set < 1<<len(names) && kept < maxBuiltMasks+50; set++ {
		var paths []string
		for i, n := range names {
			if set&(1<<i) != 0 {
				paths = append(paths, "message_type.field."+n)
			}
		}
		_, err := New(&fieldmaskpb.FieldMask{Paths: paths}, fileDesc)
		require.NoError(t, err)
		kept++
		require.LessOrEqual(t, built.Len(), maxBuiltMasks)
	}
	require.Equal(t, maxBuiltMasks, built.Len(), "a full cache makes room for one, it is not emptied")
}

func TestPruneClearsExtensions(t *testing.T) {
	msg := &descriptorpb.FileDescriptorProto{
		Name: proto.String("a.proto"),
		Options: &descriptorpb.FileOptions{
			JavaPackage: proto.String("j"),
			Features:    &descriptorpb.FeatureSet{FieldPresence: descriptorpb.FeatureSet_EXPLICIT.Enum()},
		},
	}
	proto.SetExtension(msg.Options.Features, gofeaturespb.E_Go, &gofeaturespb.GoFeatures{LegacyUnmarshalJsonEnum: proto.Bool(true)})
	m, err := New(&fieldmaskpb.FieldMask{Paths: []string{"options.features.field_presence"}}, fileDesc, "name")
	require.NoError(t, err)
	m.Prune(msg)
	require.False(t, proto.HasExtension(msg.Options.Features, gofeaturespb.E_Go), "an extension the mask cannot name")
	require.Equal(t, descriptorpb.FeatureSet_EXPLICIT, msg.Options.Features.GetFieldPresence())
	require.Empty(t, msg.Options.GetJavaPackage())
	require.Equal(t, "a.proto", msg.GetName())

	whole := &descriptorpb.FileDescriptorProto{Options: &descriptorpb.FileOptions{Features: &descriptorpb.FeatureSet{}}}
	proto.SetExtension(whole.Options.Features, gofeaturespb.E_Go, &gofeaturespb.GoFeatures{LegacyUnmarshalJsonEnum: proto.Bool(true)})
	m, err = New(&fieldmaskpb.FieldMask{Paths: []string{"options.features"}}, fileDesc)
	require.NoError(t, err)
	m.Prune(whole)
	require.True(t, proto.HasExtension(whole.Options.Features, gofeaturespb.E_Go), "a message named whole keeps its extensions")
}

func TestPruneOfAnotherDescriptor(t *testing.T) {
	// descriptor.proto built again: the same names, other descriptors.
	fd, err := protodesc.NewFile(protodesc.ToFileDescriptorProto(descriptorpb.File_google_protobuf_descriptor_proto), nil)
	require.NoError(t, err)
	md := fd.Messages().ByName("FileDescriptorProto")
	require.NotEqual(t, fileDesc, md)
	m, err := New(&fieldmaskpb.FieldMask{Paths: []string{"name"}}, fileDesc)
	require.NoError(t, err)

	same := dynamicpb.NewMessage(md)
	same.Set(md.Fields().ByName("name"), protoreflect.ValueOfString("a.proto"))
	same.Set(md.Fields().ByName("package"), protoreflect.ValueOfString("pkg"))
	m.Prune(same)
	require.Equal(t, "a.proto", same.Get(md.Fields().ByName("name")).String())
	require.False(t, same.Has(md.Fields().ByName("package")), "pruned by the mask built for its descriptor")

	other := &descriptorpb.DescriptorProto{Name: proto.String("M"), Field: []*descriptorpb.FieldDescriptorProto{{Name: proto.String("f")}}}
	m.Prune(other)
	require.True(t, proto.Equal(&descriptorpb.DescriptorProto{}, other), "another type entirely: nothing is let through")
}
