package importer

import (
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEntityIDs(t *testing.T) {
	const u = "0b6a2f1e-3c4d-4e5f-8a9b-0c1d2e3f4a5b"
	require.Equal(t, u, FormatUUID(EntityID(u)), "a UUID is used as it is")
	require.Equal(t, EntityID(u), EntityID("0B6A2F1E-3C4D-4E5F-8A9B-0C1D2E3F4A5B"))
	require.Equal(t, EntityID("acme"), EntityID("acme"), "deterministic")
	require.NotEqual(t, EntityID("acme"), RelationshipID("acme"), "separate name spaces")
	id := FormatUUID(EntityID("acme"))
	require.Equal(t, byte('5'), id[14], "UUIDv5")
	// Pinned (checked with Python's uuid.uuid5): changing the derivation would
	// re-key every imported record.
	require.Equal(t, "4d6c4aa7-6286-5f3b-86f7-e70262dfbb46", id)
}

func TestCanonicalObject(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{``, `{}`},
		{`null`, `{}`},
		{`{}`, `{}`},
		{`{ "b": 1, "a": {"y": 2.50, "x": "<&>"} }`, `{"a":{"x":"<&>","y":2.50},"b":1}`},
	} {
		got, err := canonicalObject([]byte(tc.in))
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, string(got))
	}
	for _, bad := range []string{`[]`, `"x"`, `3`, `{"a":"\u0000"}`} {
		_, err := canonicalObject([]byte(bad))
		require.Error(t, err, bad)
	}
}

func TestHashIgnoresFormattingButNotContent(t *testing.T) {
	parse := func(line string) Entity {
		b := NewBatch(10)
		b.Add(1, line)
		require.True(t, b.OK(), "%v", b.problems)
		return b.Entities[0]
	}
	a := parse(`{"kind":"entity","id":"x","name":"X","entity_type":"ORG","confidence":0.5,"attributes":{"a":1,"b":2}}`)
	b := parse(`{ "attributes": {"b":2, "a":1}, "confidence": 0.50, "entity_type": "ORG", "name": "X", "id": "x", "kind": "entity" }`)
	require.Equal(t, a.Hash, b.Hash)
	c := parse(`{"kind":"entity","id":"x","name":"X","entity_type":"ORG","confidence":0.5,"attributes":{"a":1,"b":3}}`)
	require.NotEqual(t, a.Hash, c.Hash)
	d := parse(`{"kind":"entity","id":"x","name":"X","entity_type":"ORG","confidence":0.5,"attributes":{"a":1,"b":2},"snippet":""}`)
	require.Equal(t, a.Hash, d.Hash, "an empty snippet is no snippet")
}

func TestAliasesNormalizedAndDeduplicated(t *testing.T) {
	b := NewBatch(10)
	b.Add(1, `{"kind":"entity","id":"v","name":"Acme Corp","entity_type":"COMPANY","confidence":1,"is_vendor":true,"aliases":["ACME corp.","Acme Corporation","acme  corporation"]}`)
	require.True(t, b.OK())
	require.Equal(t, []Alias{{Alias: "Acme Corporation", Normalized: "acme corporation"}}, b.Entities[0].Aliases)
}

func TestBlankLinesAndLineNumbers(t *testing.T) {
	b := NewBatch(10)
	b.Add(0, "")
	b.Add(0, "   ")
	b.Add(0, "{")
	require.Equal(t, int64(3), b.Lines)
	problems, extra := b.Problems()
	require.Zero(t, extra)
	require.Len(t, problems, 1)
	require.Equal(t, int64(3), problems[0].Line, "line 0 means the position in the stream")
}

func BenchmarkParseRelationship(b *testing.B) {
	batch := NewBatch(1 << 62)
	line := `{"kind":"relationship","id":"r0000001","source_id":"e000001","target_id":"e000002","relationship_type":"PARTNERS_WITH","confidence":0.82,"metadata":{"since":2019}}`
	for i := 0; b.Loop(); i++ {
		batch.relAt = map[UUID]int64{} // the same id each time: measure parsing, not the duplicate check
		batch.Relationships = batch.Relationships[:0]
		batch.Add(int64(i+1), line)
	}
}

func TestCollectMatchesSequentialAdd(t *testing.T) {
	lines := []string{
		`{"kind":"relationship","id":"r1","source_id":"b","target_id":"a","relationship_type":"USES","confidence":0.5}`,
		`{"kind":"entity","id":"a","name":"A","entity_type":"ORG","confidence":1}`,
		``,
		`{"kind":"entity","id":"a","name":"A again","entity_type":"ORG","confidence":1}`,
		`{"kind":"entity","id":"b","name":"B","entity_type":"ORG","confidence":1}`,
		`{"kind":"relationship","id":"r2","source_id":"a","target_id":"ghost","relationship_type":"USES","confidence":0.5}`,
	}
	for len(lines) < 3*chunkLines { // several chunks, so order across workers matters
		n := len(lines)
		lines = append(lines, fmt.Sprintf(`{"kind":"entity","id":"x%d","name":"X %d","entity_type":"PRODUCT","confidence":0.5}`, n, n))
	}
	seq := NewBatch(1 << 20)
	for i, l := range lines {
		seq.Add(int64(i+1), l)
	}
	i := 0
	par, err := Collect(func() (int64, string, error) {
		if i == len(lines) {
			return 0, "", io.EOF
		}
		i++
		return int64(i), lines[i-1], nil
	}, 1<<20, 4)
	require.NoError(t, err)
	for _, b := range []*Batch{seq, par} {
		b.ReportDangling(nil)
	}
	require.Equal(t, seq.Entities, par.Entities)
	require.Equal(t, seq.Relationships, par.Relationships)
	sp, _ := seq.Problems()
	pp, _ := par.Problems()
	require.Equal(t, sp, pp)
	require.Len(t, pp, 2)
	require.Equal(t, `duplicate entity id "a" (first on line 2)`, pp[0].Message)
	require.Equal(t, `field "target_id": "ghost" names no entity in this file or in the graph`, pp[1].Message)

	// The line limit stops reading at the first line past it.
	calls := 0
	over, err := Collect(func() (int64, string, error) { calls++; return 0, "", nil }, 10, 2)
	require.NoError(t, err)
	require.True(t, over.Over())
	require.Equal(t, 11, calls)
	problems, _ := over.Problems()
	require.Equal(t, []Problem{{Line: 11, Message: "the import has more than 10 lines: split the file"}}, problems)
}

func TestValidTypeName(t *testing.T) {
	for _, ok := range []string{"PRODUCT", "WORKS_FOR", "P2P", "X"} {
		require.True(t, validTypeName(ok), ok)
	}
	for _, bad := range []string{"", "product", "_X", "2X", "WORKS-FOR", "Ä"} {
		require.False(t, validTypeName(bad), bad)
	}
}
