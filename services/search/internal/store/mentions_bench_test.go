package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bmcis/knowledge/platform/mentions"
	"github.com/bmcis/knowledge/platform/syntheticdocs"
	"github.com/bmcis/knowledge/platform/testdb"
)

// Mention linking at scale (docs/BENCHMARKS.md, "Mentions"): a graph of
// benchEntities entities (names shaped like services/vendorgraph/internal/synth's)
// and a synthetic corpus whose chunks name a few of them each. Run with
//
//	BMCIS_MENTIONS_BENCH_CHUNKS=100000 go test ./internal/store -run XXX -bench Mentions -benchtime 1x
//
// (the chunk count defaults to 20,000 to keep a casual run short).
const benchEntities = 200000

var (
	stems    = []string{"vel", "or", "ix", "nor", "tha", "cor", "lum", "zen", "kai", "dra", "mer", "quo", "sar", "tel", "vin", "bra", "fen", "gal", "hal", "jor"}
	suffixes = []string{"Systems", "Corp", "Inc", "Ltd", "Labs", "Group", "Industries", "Technologies"}
	nouns    = []string{"Analytics Suite", "Gateway", "Edge Node", "Ledger", "Sensor Kit", "Cloud Console", "Firewall", "Data Lake", "Scheduler", "Mobile SDK"}
	firsts   = []string{"Ada", "Ben", "Chen", "Dara", "Eli", "Fatima", "Goran", "Hana", "Ivan", "Jun", "Kofi", "Lena", "Mateo", "Nia", "Omar", "Priya"}
	lasts    = []string{"Adams", "Berg", "Costa", "Dubois", "Eriksen", "Fischer", "Garcia", "Haddad", "Ito", "Jensen", "Kowalski", "Larsen", "Moreau", "Novak"}
)

type benchEntity struct {
	id, name, alias string
	vendor          bool
}

func benchGraph(n int) []benchEntity {
	out := make([]benchEntity, n)
	const vendors = 1000
	stem := func(i int) string {
		k := (i * 7919) % 8000
		s := stems[k/400] + stems[(k/20)%20] + stems[k%20]
		return strings.ToUpper(s[:1]) + s[1:]
	}
	for i := range out {
		v := i % vendors
		e := benchEntity{id: fmt.Sprintf("00000000-0000-4000-8000-%012d", i)}
		switch {
		case i < vendors:
			e.name, e.alias, e.vendor = stem(i)+" "+suffixes[i%len(suffixes)], stem(i), true
		case i%10 < 4:
			e.name = fmt.Sprintf("%s %s %d", stem(v), nouns[i%len(nouns)], i%97)
		case i%10 < 7:
			e.name = firsts[i%len(firsts)] + " " + lasts[(i/16)%len(lasts)]
		case i%10 < 9:
			e.name = fmt.Sprintf("%s Platform Component %d", stem(v), i%89)
		default:
			e.name = fmt.Sprintf("%s Summit %d", stem(v), 2015+i%10)
		}
		out[i] = e
	}
	return out
}

func benchNames(g []benchEntity) []mentions.Name {
	var out []mentions.Name
	for _, e := range g {
		out = append(out, mentions.Name{EntityID: e.id, Text: e.name, IsVendor: e.vendor})
		if e.alias != "" {
			out = append(out, mentions.Name{EntityID: e.id, Text: e.alias, IsVendor: true})
		}
	}
	return out
}

// benchDocs splits synthetic documents into chunks of about 1,500
// characters and names three random entities in each chunk.
func benchDocs(g []benchEntity, chunks int) []DocumentRow {
	gen := syntheticdocs.New(1, 30000)
	r := rand.New(rand.NewPCG(7, 7))
	var docs []DocumentRow
	total := 0
	for i := 0; total < chunks; i++ {
		d := gen.Document(i)
		row := DocumentRow{ExternalID: d.ExternalId, SourceFile: d.SourceFile, Category: d.Category, Title: d.Title,
			ContentHash: []byte(d.ExternalId)}
		var cur strings.Builder
		flush := func() {
			if cur.Len() == 0 || total >= chunks {
				return
			}
			text := cur.String()
			for k := 0; k < 3; k++ {
				at := r.IntN(len(text))
				for at < len(text) && text[at] != ' ' {
					at++
				}
				text = text[:at] + " " + g[r.IntN(len(g))].name + text[at:]
			}
			row.Chunks = append(row.Chunks, Chunk{ChunkIndex: len(row.Chunks), ChunkText: text, ChunkTokenCount: len(text) / 4, Hash: []byte(strconv.Itoa(len(row.Chunks)))})
			total++
			cur.Reset()
		}
		for _, p := range strings.Split(string(d.Content), "\n\n") {
			cur.WriteString(p)
			cur.WriteString("\n\n")
			if cur.Len() > 1500 {
				flush()
			}
		}
		flush()
		if len(row.Chunks) > 0 {
			docs = append(docs, row)
		}
	}
	return docs
}

func benchChunks() int {
	if n, err := strconv.Atoi(os.Getenv("BMCIS_MENTIONS_BENCH_CHUNKS")); err == nil && n > 0 {
		return n
	}
	return 20000
}

// BenchmarkMentionsMatcher builds the matcher of 200,000 entities and
// matches every chunk of the corpus in memory (one core).
func BenchmarkMentionsMatcher(b *testing.B) {
	g := benchGraph(benchEntities)
	names := benchNames(g)
	docs := benchDocs(g, benchChunks())
	for b.Loop() {
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		start := time.Now()
		m, err := mentions.Build(names)
		if err != nil {
			b.Fatal(err)
		}
		build := time.Since(start)
		runtime.GC()
		runtime.ReadMemStats(&m1)
		start = time.Now()
		cpu0 := cpuTime()
		chunks, bytes, links := 0, 0, 0
		for _, d := range docs {
			for _, c := range d.Chunks {
				links += len(m.Match(c.ChunkText))
				chunks++
				bytes += len(c.ChunkText)
			}
		}
		match := time.Since(start)
		matchCPU := cpuTime() - cpu0
		b.ReportMetric(float64(chunks)/matchCPU.Seconds(), "chunks/cpu-s")
		b.ReportMetric(build.Seconds(), "build-s")
		b.ReportMetric(float64(m1.HeapAlloc-m0.HeapAlloc)/(1<<20), "matcher-MiB")
		b.ReportMetric(float64(chunks)/match.Seconds(), "chunks/s")
		b.ReportMetric(float64(bytes)/(1<<20)/match.Seconds(), "MiB/s")
		b.ReportMetric(float64(links)/float64(chunks), "links/chunk")
		b.Logf("%d names (%d distinct), %d chunks: build %v, match %v wall, %v CPU", len(names), m.Names(), chunks, build, match, matchCPU)
	}
}

// BenchmarkMentionsIngestAndRelink measures, on PostgreSQL, writing the
// corpus through WriteDocument with no graph and with the 200,000-entity
// graph (the difference is what linking costs ingestion), then re-linking
// every chunk (an import changing more than MaxIncremental names) and
// re-linking after 100 changed entities (the incremental path).
func BenchmarkMentionsIngestAndRelink(b *testing.B) {
	g := benchGraph(benchEntities)
	docs := benchDocs(g, benchChunks())
	chunks := 0
	for _, d := range docs {
		chunks += len(d.Chunks)
	}
	ctx := context.Background()
	for b.Loop() {
		write := func(pool *pgxpool.Pool) time.Duration {
			s := New(pool)
			start, cpu0 := time.Now(), cpuTime()
			for _, d := range docs {
				if _, err := s.WriteDocument(ctx, d); err != nil {
					b.Fatal(err)
				}
			}
			b.Logf("write: %v wall, %v CPU in this process", time.Since(start), cpuTime()-cpu0)
			return time.Since(start)
		}
		empty, _ := testdb.New(b)
		bare := write(empty)

		pool, _ := testdb.New(b)
		start := time.Now()
		loadGraph(b, pool, g)
		b.Logf("graph of %d entities loaded in %v", len(g), time.Since(start))
		linked := write(pool)
		var rows int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM entity_mentions").Scan(&rows); err != nil {
			b.Fatal(err)
		}

		var all, incr time.Duration
		var incrChunks int
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if err := mentions.LockExclusive(ctx, tx); err != nil {
				return err
			}
			m, _, err := mentions.NewLinker().Matcher(ctx, tx)
			if err != nil {
				return err
			}
			start := time.Now()
			if _, err := mentions.RelinkAll(ctx, tx, m); err != nil {
				return err
			}
			all = time.Since(start)
			// Two imports of 100 changed entities each: the first also
			// indexes the words of every chunk written since the last
			// re-link (here all of them), the second finds the index
			// current (the steady state).
			for k := range 2 {
				ids := make([]string, 100)
				for i := range ids {
					ids[i] = g[1000+k+i*7].id
				}
				start = time.Now()
				st, err := mentions.RelinkEntities(ctx, tx, m, ids)
				if err != nil {
					return err
				}
				b.Logf("relink 100 entities: %v (%d chunks indexed, %d read, %d re-linked)", time.Since(start), st.Indexed, st.Read, st.Relinked)
				if k == 1 {
					incr, incrChunks = time.Since(start), st.Relinked
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(chunks)/bare.Seconds(), "chunks/s-no-graph")
		b.ReportMetric(float64(chunks)/linked.Seconds(), "chunks/s-linked")
		b.ReportMetric(float64(chunks)/all.Seconds(), "chunks/s-relink-all")
		b.ReportMetric(incr.Seconds(), "relink-100-entities-s")
		b.Logf("%d chunks in %d documents: write %v without a graph, %v with %d entities (%d mention rows); relink all %v; relink 100 entities (%d chunks) %v",
			chunks, len(docs), bare, linked, len(g), rows, all, incrChunks, incr)
	}
}

func loadGraph(b *testing.B, pool *pgxpool.Pool, g []benchEntity) {
	ctx := context.Background()
	rows := make([][]any, len(g))
	for i, e := range g {
		aliases := []string{}
		if e.alias != "" {
			aliases = append(aliases, e.alias)
		}
		rows[i] = []any{e.id, e.name, "ORG", e.vendor, aliases}
	}
	// Search's copy of the names, as SyncEntityNames keeps it.
	if _, err := pool.CopyFrom(ctx, pgx.Identifier{"search", "entity_names"}, []string{"entity_id", "name", "entity_type", "is_vendor", "aliases"}, pgx.CopyFromRows(rows)); err != nil {
		b.Fatal(err)
	}
	if _, err := mentions.BumpGraphVersion(ctx, pool); err != nil {
		b.Fatal(err)
	}
}

// cpuTime is the CPU time this process has used: on a shared, loaded
// machine it says what the work costs better than the wall clock.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
