package rest

import (
	"encoding/json"
	"errors"
	"io"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
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
