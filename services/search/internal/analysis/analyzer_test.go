package analysis

import (
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTerms(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		in   string
		want []string
	}{
		{"empty", Options{}, "", nil},
		{"stop words and stemming", Options{}, "The cells are running quickly", []string{"cell", "run", "quick"}},
		{"case folding", Options{}, "BRCA1 Mutations", []string{"brca1", "mutat"}},
		{"hyphen splits", Options{}, "IL-6 levels", []string{"il", "6", "level"}},
		{"hyphen join option", Options{JoinHyphenated: true}, "IL-6 levels", []string{"il", "6", "il6", "level"}},
		{"hyphen join three parts", Options{JoinHyphenated: true}, "anti-TNF-α x", []string{"anti", "tnf", "α", "antitnfα", "x"}},
		{"decimal kept whole", Options{}, "a dose of 1.5 mg, 10,000 units", []string{"dose", "1.5", "mg", "10,000", "unit"}},
		{"sentence period splits", Options{}, "end.Next", []string{"end", "next"}},
		{"possessive stripped", Options{}, "the patient's outcome", []string{"patient", "outcom"}},
		{"curly apostrophe possessive", Options{}, "Crohn’s disease", []string{"crohn", "diseas"}},
		{"unicode letters", Options{}, "Über naïve TNF-α", []string{"über", "naïv", "tnf", "α"}},
		{"numbers not stemmed", Options{}, "1990s 2019", []string{"1990s", "2019"}},
		{"snowball stop list", Options{Stop: StopSnowball}, "what was found between them", []string{"found"}},
		{"no stop list", Options{Stop: StopNone}, "the cat", []string{"the", "cat"}},
		{"no stem", Options{NoStem: true}, "running cells", []string{"running", "cells"}},
		{"min length", Options{MinLength: 2}, "x ray b", []string{"ray"}},
		{"punctuation only", Options{}, "--- !!! ...", nil},
		{"cjk runs", Options{}, "东京 tower", []string{"东京", "tower"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := New(tc.opts)
			got := a.Terms(tc.in)
			if len(tc.want) == 0 {
				require.Empty(t, got)
				return
			}
			require.Equal(t, tc.want, got)
			// A second pass answers from the stem cache and must agree.
			require.Equal(t, tc.want, a.Terms(tc.in))
		})
	}
}

func TestTokensSpans(t *testing.T) {
	a := NewEnglish()
	in := "Does IL-6 raise Running costs?"
	toks := a.Tokens(in)
	require.Len(t, toks, 6)
	for _, tk := range toks {
		require.Equal(t, in[tk.Start:tk.End], tk.Original)
	}
	require.Equal(t, "Running", toks[4].Original)
	require.Equal(t, "run", toks[4].Term)
}

func TestQueryTermsAndOriginalWords(t *testing.T) {
	a := NewEnglish()
	qts := a.QueryTerms("Running runs and the runner RUNS fast")
	require.Equal(t, []QueryTerm{
		{Term: "run", Count: 3, Words: []string{"Running", "runs"}},
		{Term: "runner", Count: 1, Words: []string{"runner"}},
		{Term: "fast", Count: 1, Words: []string{"fast"}},
	}, qts)

	tests := []struct {
		matched []string
		want    []string
	}{
		{[]string{"run"}, []string{"Running", "runs"}},
		{[]string{"fast", "run"}, []string{"Running", "runs", "fast"}},
		{[]string{"absent"}, nil},
		{nil, nil},
		{[]string{"run", "runner", "fast"}, []string{"Running", "runs", "runner", "fast"}}, // the query's order: one walk
		{[]string{"runner", "absent"}, []string{"runner"}},
		{[]string{"run", "run"}, []string{"Running", "runs"}},
		{[]string{"fast", "absent", "run"}, []string{"Running", "runs", "fast"}},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, OriginalWords(qts, tc.matched))
	}
}

func TestConcurrentUse(t *testing.T) {
	a := NewEnglish()
	text := strings.Repeat("inflammatory cytokines regulate macrophage activation ", 50)
	want := a.Terms(text)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				if got := a.Terms(text); len(got) != len(want) {
					t.Errorf("got %d terms, want %d", len(got), len(want))
				}
			}
		}()
	}
	wg.Wait()
}

var benchText = strings.Repeat("Alterations of the architecture of cerebral white matter in the developing human brain can affect cortical development and result in functional disabilities. A line scan diffusion-weighted magnetic resonance imaging (MRI) sequence with diffusion tensor analysis was applied to measure the apparent diffusion coefficient. ", 6)

// BenchmarkTerms measures analysis of a ~300-token chunk.
func BenchmarkTerms(b *testing.B) {
	a := NewEnglish()
	dst := make([]string, 0, 512)
	b.SetBytes(int64(len(benchText)))
	b.ReportAllocs()
	for b.Loop() {
		dst = a.AppendTerms(dst[:0], benchText)
	}
}

// BenchmarkOriginalWords: each result of a page maps its matched terms
// back to the query's words.
func BenchmarkOriginalWords(b *testing.B) {
	a := NewEnglish()
	for _, q := range []string{"macrophage cytokine regulation in inflammation",
		"Patients with chronic kidney disease who receive erythropoietin show lower rates of anaemia and improved quality of life over two years of treatment"} {
		qts := a.QueryTerms(q)
		var matched []string
		for i, qt := range qts {
			if i%2 == 0 {
				matched = append(matched, qt.Term)
			}
		}
		b.Run(strconv.Itoa(len(qts))+" terms", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = OriginalWords(qts, matched)
			}
		})
	}
}
