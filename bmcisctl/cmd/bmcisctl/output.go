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
	var list []any
	for _, m := range msgs {
		b, err := protoJSON(m)
		if err != nil {
			return err
		}
		if format == outputJSON {
			if _, err := fmt.Fprintf(w, "%s\n", b); err != nil {
				return err
			}
			continue
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		list = append(list, v)
	}
	if format != outputYAML {
		return nil
	}
	if list == nil {
		list = []any{}
	}
	return writeYAML(w, list)
}

// writeRecord writes one message in format (json or yaml).
func writeRecord(w io.Writer, format string, m proto.Message) error {
	b, err := protoJSON(m)
	if err != nil {
		return err
	}
	if format == outputJSON {
		_, err := fmt.Fprintf(w, "%s\n", b)
		return err
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	return writeYAML(w, v)
}

func writeYAML(w io.Writer, v any) error {
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return err
	}
	return enc.Close()
}
