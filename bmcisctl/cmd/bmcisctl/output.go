package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// The output formats of every listing and result command (-o, --output).
const (
	outputTable = "table"
	outputJSON  = "json"
	outputYAML  = "yaml"
)

// outputFlag adds -o/--output to fs: a table for people by default, JSON
// (one object per line, for streams and jq) or YAML.
func outputFlag(fs *flag.FlagSet) *string {
	return fs.String("output", outputTable, "output format: table, json (one object per line) or yaml")
}

// checkOutput refuses an unknown output format.
func checkOutput(format string) error {
	switch format {
	case outputTable, outputJSON, outputYAML:
		return nil
	}
	return usageErrorf("--output must be table, json or yaml, got %q", format)
}

// protoJSON is the JSON of m with the contract's field names, unset
// fields included (so every object has the same keys), on one line.
func protoJSON(m proto.Message) ([]byte, error) {
	b, err := protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}.Marshal(m)
	if err != nil {
		return nil, err
	}
	var line bytes.Buffer
	if err := json.Compact(&line, b); err != nil {
		return nil, err
	}
	return line.Bytes(), nil
}

// writeRecords writes messages in format (json or yaml): JSON one object
// per line, YAML one list.
func writeRecords[M proto.Message](w io.Writer, format string, msgs []M) error {
	list := make([]any, 0, len(msgs))
	for _, m := range msgs {
		v, err := protoValue(m)
		if err != nil {
			return err
		}
		list = append(list, v)
	}
	return writeResultList(w, format, list, nil)
}

// writeRecord writes one message in format (json or yaml).
func writeRecord(w io.Writer, format string, m proto.Message) error {
	v, err := protoValue(m)
	if err != nil {
		return err
	}
	return writeResult(w, format, v, nil)
}

// protoValue is m as JSON values, with the contract's field names.
func protoValue(m proto.Message) (any, error) {
	b, err := protoJSON(m)
	if err != nil {
		return nil, err
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// writeResult is the one output path of every result command: table calls
// table (the default, for people); json writes v as one line, so a
// command that writes a result per pass or per item gives a stream of
// objects; yaml writes v as one YAML document, "---" first, so results
// written one after another form a YAML stream. v is a struct with json
// tags or a JSON value: the keys are the same in json and yaml.
func writeResult(w io.Writer, format string, v any, table func(io.Writer) error) error {
	switch format {
	case outputJSON:
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode result: %w", err)
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case outputYAML:
		y, err := yamlValue(v)
		if err != nil {
			return err
		}
		if _, err := io.WriteString(w, "---\n"); err != nil {
			return err
		}
		return writeYAML(w, y)
	}
	if table == nil {
		return fmt.Errorf("no table for this result")
	}
	return table(w)
}

// writeResultList writes a finite list of results: json one object per
// line, yaml one list, table through table.
func writeResultList(w io.Writer, format string, list []any, table func(io.Writer) error) error {
	switch format {
	case outputJSON:
		for _, v := range list {
			if err := writeResult(w, format, v, nil); err != nil {
				return err
			}
		}
		return nil
	case outputYAML:
		if list == nil {
			list = []any{}
		}
		y, err := yamlValue(list)
		if err != nil {
			return err
		}
		return writeYAML(w, y)
	}
	if table == nil {
		return fmt.Errorf("no table for this result")
	}
	return table(w)
}

// yamlValue is v through JSON, so YAML has v's JSON keys.
func yamlValue(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode result: %w", err)
	}
	var y any
	if err := json.Unmarshal(b, &y); err != nil {
		return nil, fmt.Errorf("encode result: %w", err)
	}
	return y, nil
}

func writeYAML(w io.Writer, v any) error {
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return err
	}
	return enc.Close()
}

// count says n of a thing in English: "1 document", "2 documents" (the
// plural is the noun with an s, which holds for what bmcisctl counts).
func count[N int | int32 | int64](n N, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
