package server

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/reflect/protoreflect"

	vendorgraphv1 "github.com/bmcis/knowledge/gen/go/bmcis/vendorgraph/v1"
)

// TestCachedCopyHasEveryField fails when the contract grows a field that
// cachedCopy does not carry over.
func TestCachedCopyHasEveryField(t *testing.T) {
	src := &vendorgraphv1.GetVendorResponse{}
	m := src.ProtoReflect()
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		switch {
		case fd.IsList():
			l := m.Mutable(fd).List()
			if fd.Kind() == protoreflect.MessageKind {
				l.Append(l.NewElement())
			} else {
				l.Append(protoreflect.ValueOfString("x"))
			}
		case fd.IsMap():
			m.Mutable(fd)
		case fd.Kind() == protoreflect.MessageKind:
			m.Mutable(fd)
		case fd.Kind() == protoreflect.BoolKind:
			m.Set(fd, protoreflect.ValueOfBool(true))
		case fd.Kind() == protoreflect.StringKind:
			m.Set(fd, protoreflect.ValueOfString("x"))
		case fd.Kind() == protoreflect.Int32Kind:
			m.Set(fd, protoreflect.ValueOfInt32(1))
		default:
			t.Fatalf("field %s: kind %s not handled by this test", fd.Name(), fd.Kind())
		}
	}
	got := cachedCopy(src).ProtoReflect()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		require.True(t, got.Has(fd), "cachedCopy drops field %s", fd.Name())
	}
}
