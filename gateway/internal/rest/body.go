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
	"time"

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
		f := namedField(desc, strings.Split(name, "."))
		if f == nil {
			takes := "none"
			if names := fieldNames(desc); len(names) > 0 {
				takes = strings.Join(names, ", ")
			}
			return fmt.Errorf("unknown query parameter %q (this route takes %s)", key, takes)
		}
		if err := checkTime(key, f, values[key]); err != nil {
			return err
		}
	}
	return p.DefaultQueryParser.Parse(msg, values, filter)
}

// checkTime refuses a Timestamp parameter that is not RFC 3339 in words a
// caller can act on: grpc-gateway's own error quotes Go's reference layout
// ("2006-01-02T15:04:05.999999999Z07:00"), and bmcisctl audit --since takes
// durations (24h) that the REST form does not.
func checkTime(key string, f protoreflect.FieldDescriptor, vals []string) error {
	if f.Message() == nil || f.Message().FullName() != "google.protobuf.Timestamp" {
		return nil
	}
	for _, v := range vals {
		if _, err := time.Parse(time.RFC3339Nano, v); err != nil {
			return fmt.Errorf("query parameter %q: %q is not an RFC 3339 time (a date, a time and a zone, such as 2026-11-01T00:00:00Z)", key, v)
		}
	}
	return nil
}

// namedField returns the field path (field names, proto or JSON spelling)
// leads to through singular message fields of desc, or nil.
func namedField(desc protoreflect.MessageDescriptor, path []string) protoreflect.FieldDescriptor {
	for i, name := range path {
		fields := desc.Fields()
		f := fields.ByTextName(name)
		if f == nil {
			f = fields.ByJSONName(name)
		}
		switch {
		case f == nil:
			return nil
		case i == len(path)-1:
			return f
		case f.Message() == nil || f.Cardinality() == protoreflect.Repeated:
			return nil
		}
		desc = f.Message()
	}
	return nil
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
