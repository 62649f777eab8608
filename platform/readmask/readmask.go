// Package readmask applies a request's read mask (a google.protobuf.FieldMask
// naming the fields of the response the caller needs) on the serving side:
// it says which costly reads a request needs at all (Wants), and leaves out
// of the response what was not asked (Prune).
//
// Paths name fields of the response message, one segment per field; unlike
// a plain FieldMask, a path may go through a repeated message field, and
// then names that field of every element ("results.chunk.chunk_text"). A
// path naming a message field names all of its fields.
package readmask

import (
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
)

// Mask is a validated read mask. The zero Mask (and a Mask of an unset or
// empty FieldMask) wants every field.
type Mask struct {
	paths []string // nil: every field
}

// All is the mask that wants every field.
var All = Mask{}

// New validates fm's paths against response (the response message type)
// and returns the mask. always lists paths the answer carries whatever the
// caller asked (ids, page fields); they are added to a non-empty mask.
func New(fm *fieldmaskpb.FieldMask, response protoreflect.MessageDescriptor, always ...string) (Mask, error) {
	if len(fm.GetPaths()) == 0 {
		return All, nil
	}
	paths := make([]string, 0, len(fm.GetPaths())+len(always))
	for _, p := range append(slices.Clone(fm.GetPaths()), always...) {
		p = strings.TrimSpace(p)
		if err := resolve(response, p); err != nil {
			return All, err
		}
		paths = append(paths, p)
	}
	slices.Sort(paths)
	return Mask{paths: slices.Compact(paths)}, nil
}

// resolve checks that path names a field of md, going through message
// fields (repeated ones included).
func resolve(md protoreflect.MessageDescriptor, path string) error {
	segs := strings.Split(path, ".")
	for i, seg := range segs {
		if md == nil {
			return fmt.Errorf("read mask path %q: %s is not a message", path, strings.Join(segs[:i], "."))
		}
		fd := md.Fields().ByName(protoreflect.Name(seg))
		if fd == nil {
			return fmt.Errorf("read mask path %q: no field %q in %s", path, seg, md.Name())
		}
		if fd.IsMap() {
			md = nil
			continue
		}
		md = fd.Message()
	}
	return nil
}

// IsAll reports whether the mask wants every field.
func (m Mask) IsAll() bool { return m.paths == nil }

// Wants reports whether the answer needs path: the mask names it, a
// message field above it, or a field below it.
func (m Mask) Wants(path string) bool {
	if m.paths == nil {
		return true
	}
	for _, p := range m.paths {
		if p == path || strings.HasPrefix(path, p+".") || strings.HasPrefix(p, path+".") {
			return true
		}
	}
	return false
}

// whole reports whether the mask wants path and everything under it.
func (m Mask) whole(path string) bool {
	if m.paths == nil {
		return true
	}
	for _, p := range m.paths {
		if p == path || strings.HasPrefix(path, p+".") {
			return true
		}
	}
	return false
}

// Prune clears every field of msg (the response) the mask does not want.
func (m Mask) Prune(msg proto.Message) {
	if m.paths == nil || msg == nil {
		return
	}
	m.prune(msg.ProtoReflect(), "")
}

func (m Mask) prune(msg protoreflect.Message, prefix string) {
	msg.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		path := prefix + string(fd.Name())
		switch {
		case !m.Wants(path):
			msg.Clear(fd)
		case m.whole(path) || fd.Message() == nil || fd.IsMap():
		case fd.IsList():
			l := v.List()
			for i := range l.Len() {
				m.prune(l.Get(i).Message(), path+".")
			}
		default:
			m.prune(v.Message(), path+".")
		}
		return true
	})
}
