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
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/bmcis/knowledge/platform/lrucache"
)

// Mask is a validated read mask. The zero Mask (and a Mask of an unset or
// empty FieldMask) wants every field.
type Mask struct {
	root *node // nil: every field
	// response is the message type the tree was built for, and paths the
	// mask's paths as keyed (trimmed, sorted, without repeats): Prune of
	// another type with the same name builds the mask again for it.
	response protoreflect.MessageDescriptor
	paths    []string
}

// node is the wanted fields of a message, by name; whole wants every field
// of it (the mask named the message field itself). A tree, so pruning an
// answer costs no allocation.
type node struct {
	whole  bool
	fields map[protoreflect.Name]*node
	// extensible: the message has extension ranges, so Prune also clears
	// whatever extensions are set (a mask names declared fields only).
	extensible bool
	// What Prune does to a message of this node, worked out once by
	// plan: the fields to clear (those the mask does not name), and the
	// message fields to prune further (named, but not whole).
	clear   []protoreflect.FieldDescriptor
	descend []descent
}

type descent struct {
	fd    protoreflect.FieldDescriptor
	child *node
}

// All is the mask that wants every field.
var All = Mask{}

// New validates fm's paths against response (the response message type)
// and returns the mask. always lists paths the answer carries whatever the
// caller asked (ids, page fields); they are added to a non-empty mask.
//
// A mask is kept once built (a caller sends the same mask with every call),
// so a repeated mask costs a lookup, not a validation and a tree.
func New(fm *fieldmaskpb.FieldMask, response protoreflect.MessageDescriptor, always ...string) (Mask, error) {
	if len(fm.GetPaths()) == 0 {
		return All, nil
	}
	paths := canonical(fm.GetPaths(), always)
	key := keyOf(paths, response)
	if m, ok := built.Get(key); ok {
		return m, nil
	}
	m, err := build(paths, response)
	if err != nil {
		return All, err
	}
	if len(key.paths) <= maxKeptKey {
		built.Put(key, m, built.Epoch())
	}
	return m, nil
}

// build validates paths against response and plans the mask.
func build(paths []string, response protoreflect.MessageDescriptor) (Mask, error) {
	root := &node{}
	for _, p := range paths {
		if err := root.add(response, p); err != nil {
			return All, err
		}
	}
	root.plan(response)
	return Mask{root: root, response: response, paths: paths}, nil
}

// canonical is the mask's paths and the always ones, trimmed, sorted and
// without repeats: masks that differ only in those ways are the same mask
// (the tree does not depend on order or repeats), kept once.
func canonical(paths, always []string) []string {
	out := make([]string, 0, len(paths)+len(always))
	for _, list := range [][]string{paths, always} {
		for _, p := range list {
			out = append(out, strings.TrimSpace(p))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// maskKey names a mask by everything New builds it from: the response
// type (the descriptor itself, not its name) and the canonical paths.
type maskKey struct {
	response protoreflect.MessageDescriptor
	paths    string
}

// keyOf writes each path after its length, so no two lists of paths share
// a key whatever bytes a caller's paths hold.
func keyOf(paths []string, response protoreflect.MessageDescriptor) maskKey {
	var b strings.Builder
	for _, p := range paths {
		b.WriteString(strconv.Itoa(len(p)))
		b.WriteByte(':')
		b.WriteString(p)
	}
	return maskKey{response: response, paths: b.String()}
}

// maxBuiltMasks bounds the masks kept: callers choose masks, so their
// number is not bounded by the code; past it the least recently used one
// makes room. maxKeptKey bounds each: a longer mask (a caller's own paths
// are a few hundred bytes) is built for its call and not kept, so the
// cache holds at most about a megabyte of keys whatever callers send.
const (
	maxBuiltMasks = 256
	maxKeptKey    = 4096
)

// built holds the masks New made, by keyOf. A Mask is never changed once
// built, so one is shared by every call that sends it; nothing invalidates
// them (a descriptor's fields never change), so they never expire.
var built = lrucache.New[maskKey, Mask](maxBuiltMasks, 0)

// plan works out, for the message md this node stands for and the nodes
// below it, which fields Prune clears and which it goes into.
func (n *node) plan(md protoreflect.MessageDescriptor) {
	if n.whole || md == nil {
		return
	}
	n.extensible = md.ExtensionRanges().Len() > 0
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		child := n.fields[fd.Name()]
		switch {
		case child == nil:
			n.clear = append(n.clear, fd)
		case child.whole || fd.Message() == nil || fd.IsMap():
		default:
			child.plan(fd.Message())
			n.descend = append(n.descend, descent{fd: fd, child: child})
		}
	}
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
// A message of another type than the mask's is pruned by the mask built
// again for its type (the same name from another descriptor: a dynamic
// message), or cleared whole when the paths do not fit it: a mask never
// lets through what it was not built to allow.
func (m Mask) Prune(msg proto.Message) {
	if m.root == nil || msg == nil {
		return
	}
	pm := msg.ProtoReflect()
	if md := pm.Descriptor(); md != m.response {
		other, err := build(m.paths, md)
		if err != nil || md.FullName() != m.response.FullName() {
			proto.Reset(msg)
			return
		}
		m = other
	}
	m.root.prune(pm)
}

// prune clears the fields of msg the mask does not name (clearing an unset
// field does nothing), and any extension set on it, and prunes the named
// message fields below it.
func (n *node) prune(msg protoreflect.Message) {
	for _, fd := range n.clear {
		msg.Clear(fd)
	}
	if n.extensible {
		var ext []protoreflect.FieldDescriptor
		msg.Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
			if fd.IsExtension() {
				ext = append(ext, fd)
			}
			return true
		})
		for _, fd := range ext { // not while ranging: Range forbids changes
			msg.Clear(fd)
		}
	}
	for _, d := range n.descend {
		if !msg.Has(d.fd) {
			continue
		}
		v := msg.Get(d.fd)
		if d.fd.IsList() {
			l := v.List()
			for i := range l.Len() {
				d.child.prune(l.Get(i).Message())
			}
			continue
		}
		d.child.prune(v.Message())
	}
}
