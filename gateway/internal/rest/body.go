package rest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/grpc-ecosystem/grpc-gateway/v2/utilities"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// strictJSONPb is runtime.JSONPb whose decoder refuses anything but
// whitespace after the body's JSON value: json.Decoder reads one value and
// leaves the rest, so `{"query":"x"} trailing` would otherwise pass. Every
// transcoded body goes through it; the generated handlers answer its error
// with INVALID_ARGUMENT (400).
type strictJSONPb struct {
	runtime.JSONPb
}

// errTrailingData is the decoder's refusal of data after the JSON value.
var errTrailingData = errors.New("unexpected data after the JSON value of the body")

func (j *strictJSONPb) NewDecoder(r io.Reader) runtime.Decoder {
	d := json.NewDecoder(r)
	inner := runtime.DecoderWrapper{Decoder: d, UnmarshalOptions: j.UnmarshalOptions}
	return runtime.DecoderFunc(func(v any) error {
		if err := inner.Decode(v); err != nil {
			return err
		}
		return onlyWhitespace(io.MultiReader(d.Buffered(), r))
	})
}

// onlyWhitespace reads r to its end (the body is size-limited) and fails
// on the first byte that is not JSON whitespace.
func onlyWhitespace(r io.Reader) error {
	var buf [512]byte
	for {
		n, err := r.Read(buf[:])
		for _, b := range buf[:n] {
			switch b {
			case ' ', '\t', '\n', '\r':
			default:
				return errTrailingData
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// strictQueryParser is runtime.DefaultQueryParser refusing a query
// parameter that names no field of the request, as strictJSONPb refuses an
// unknown body field: grpc-gateway ignores it, so a typo such as
// ?principle= on /v1/audit answered as if unfiltered. The generated
// handlers answer its error with INVALID_ARGUMENT (400).
type strictQueryParser struct {
	runtime.DefaultQueryParser
}

// mapKey is grpc-gateway's map-entry spelling, key[entry].
var mapKey = regexp.MustCompile(`^(.*)\[(.*)\]$`)

func (p *strictQueryParser) Parse(msg proto.Message, values url.Values, filter *utilities.DoubleArray) error {
	desc := msg.ProtoReflect().Descriptor()
	for key := range values {
		name := key
		if m := mapKey.FindStringSubmatch(key); m != nil {
			name = m[1]
		}
		if !namesField(desc, strings.Split(name, ".")) {
			takes := "none"
			if names := fieldNames(desc); len(names) > 0 {
				takes = strings.Join(names, ", ")
			}
			return fmt.Errorf("unknown query parameter %q (this route takes %s)", key, takes)
		}
	}
	return p.DefaultQueryParser.Parse(msg, values, filter)
}

// namesField reports whether path (field names, proto or JSON spelling)
// leads through singular message fields of desc to a field.
func namesField(desc protoreflect.MessageDescriptor, path []string) bool {
	for i, name := range path {
		fields := desc.Fields()
		f := fields.ByTextName(name)
		if f == nil {
			f = fields.ByJSONName(name)
		}
		switch {
		case f == nil:
			return false
		case i == len(path)-1:
			return true
		case f.Message() == nil || f.Cardinality() == protoreflect.Repeated:
			return false
		}
		desc = f.Message()
	}
	return false
}

// fieldNames lists desc's fields for the refusal's message.
func fieldNames(desc protoreflect.MessageDescriptor) []string {
	fields := desc.Fields()
	names := make([]string, 0, fields.Len())
	for i := range fields.Len() {
		names = append(names, string(fields.Get(i).Name()))
	}
	slices.Sort(names)
	return names
}
