package retrievaleval

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Document is one BEIR corpus entry.
type Document struct {
	ID    string `json:"_id"`
	Title string `json:"title"`
	Text  string `json:"text"`
}

// Query is one BEIR query.
type Query struct {
	ID   string `json:"_id"`
	Text string `json:"text"`
}

// Dataset is a loaded BEIR split.
type Dataset struct {
	Corpus  []Document
	Queries []Query
	Qrels   Qrels
}

// LoadBEIR reads dir/corpus.jsonl, dir/queries.jsonl and
// dir/qrels/<split>.tsv. Only queries that have judgements are kept, as in
// BEIR's own loader.
func LoadBEIR(dir, split string) (*Dataset, error) {
	ds := &Dataset{}
	if err := readJSONL(filepath.Join(dir, "corpus.jsonl"), func(line []byte) error {
		var d Document
		if err := json.Unmarshal(line, &d); err != nil {
			return err
		}
		ds.Corpus = append(ds.Corpus, d)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("load corpus: %w", err)
	}
	qrels, err := readQrelsFile(filepath.Join(dir, "qrels", split+".tsv"))
	if err != nil {
		return nil, fmt.Errorf("load qrels: %w", err)
	}
	ds.Qrels = qrels
	if err := readJSONL(filepath.Join(dir, "queries.jsonl"), func(line []byte) error {
		var q Query
		if err := json.Unmarshal(line, &q); err != nil {
			return err
		}
		if _, ok := qrels[q.ID]; ok {
			ds.Queries = append(ds.Queries, q)
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("load queries: %w", err)
	}
	return ds, nil
}

func readJSONL(path string, fn func([]byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(strings.TrimSpace(string(b))) == 0 {
			continue
		}
		if err := fn(b); err != nil {
			return fmt.Errorf("%s:%d: %w", path, line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func readQrelsFile(path string) (Qrels, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	q, err := ReadQrels(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return q, nil
}

// ReadQrels parses a BEIR qrels TSV (query-id, corpus-id, score) with an
// optional header line.
func ReadQrels(r io.Reader) (Qrels, error) {
	q := Qrels{}
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		fields := strings.Split(strings.TrimSpace(sc.Text()), "\t")
		if len(fields) == 1 && fields[0] == "" {
			continue
		}
		if len(fields) != 3 {
			return nil, fmt.Errorf("line %d: want 3 tab-separated fields, got %d", line, len(fields))
		}
		score, err := strconv.Atoi(fields[2])
		if err != nil {
			if line == 1 {
				continue // header
			}
			return nil, fmt.Errorf("line %d: score: %w", line, err)
		}
		if q[fields[0]] == nil {
			q[fields[0]] = map[string]int{}
		}
		q[fields[0]][fields[1]] = score
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return q, nil
}
