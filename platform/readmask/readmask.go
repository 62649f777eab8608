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
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
)

// Mask is a validated read mask. The zero Mask (and a Mask of an unset or
// empty FieldMask) wants every field.
type Mask struct {
	root *node // nil: every field
}

// node is the wanted fields of a message, by name; whole wants every field
// of it (the mask named the message field itself). A tree, so pruning an
// answer costs a map lookup per field and no allocation.
type node struct {
	whole  bool
	fields map[protoreflect.Name]*node
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
	root := &node{}
	for _, paths := range [][]string{fm.GetPaths(), always} {
		for _, p := range paths {
			if err := root.add(response, strings.TrimSpace(p)); err != nil {
				return All, err
			}
		}
	}
	return Mask{root: root}, nil
}

// add adds path, checking that it names a field of md, going through
// message fields (repeated ones included).
func (n *node) add(md protoreflect.MessageDescriptor, path string) error {
	segs := strings.Split(path, ".")
	for i, seg := range segs {
		if md == nil {
			return fmt.Errorf("read mask path %q: %s is not a message", path, strings.Join(segs[:i], "."))
		}
		fd := md.Fields().ByName(protoreflect.Name(seg))
		if fd == nil {
			return fmt.Errorf("read mask path %q: no field %q in %s", path, seg, md.Name())
		}
		md = nil
		if !fd.IsMap() {
			md = fd.Message()
		}
		if n.whole {
			continue // an enclosing message is wanted whole; still validate the rest
		}
		if n.fields == nil {
			n.fields = map[protoreflect.Name]*node{}
		}
		child := n.fields[fd.Name()]
		if child == nil {
			child = &node{}
			n.fields[fd.Name()] = child
		}
		n = child
	}
	n.whole, n.fields = true, nil
	return nil
}

// IsAll reports whether the mask wants every field.
func (m Mask) IsAll() bool { return m.root == nil }

// Wants reports whether the answer needs path (a path of the response
// message): the mask names it, a message field above it, or a field below
// it.
func (m Mask) Wants(path string) bool {
	n := m.root
	for seg := range strings.SplitSeq(path, ".") {
		if n == nil || n.whole {
			return true
		}
		if n = n.fields[protoreflect.Name(seg)]; n == nil {
			return false
		}
	}
	return true
}

// Prune clears every field of msg (the response) the mask does not want.
func (m Mask) Prune(msg proto.Message) {
	if m.root == nil || msg == nil {
		return
	}
	m.root.prune(msg.ProtoReflect())
}

func (n *node) prune(msg protoreflect.Message) {
	msg.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		child := n.fields[fd.Name()]
		switch {
		case child == nil:
			msg.Clear(fd)
		case child.whole || fd.Message() == nil || fd.IsMap():
		case fd.IsList():
			l := v.List()
			for i := range l.Len() {
				child.prune(l.Get(i).Message())
			}
		default:
			child.prune(v.Message())
		}
		return true
	})
}
